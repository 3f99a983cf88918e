"""The gate: paired, scenario-clustered bootstrap intervals per category and guarded marker,
the verdict each interval earns, and the text that explains it; for one adapter
(:mod:`.adapter`) or a recipe across training seeds (:mod:`.recipe`)."""
