"""Subcommands of the ``rlgate`` CLI, one module each (see ``pytest_rlgate.cli``)."""
