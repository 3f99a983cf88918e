"""Hook modules of the rlgate plugin, one per feature; ``pytest_rlgate.plugin`` names them."""
