"""The data the gate reads: seeded prompt sets and their splits, data hygiene, graded row
files with their provenance headers, and stored baselines. Nothing here loads a model."""
