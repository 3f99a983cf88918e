"""Testing a reward before it trains anything: reward tables as pytest items (:mod:`.tables`),
the probe that tries known and generated hacks (:mod:`.probe`, :mod:`.strategies`), and the
scan that finds which reply feature a reward pays for (:mod:`.scan`)."""

#: File name endings read as reward tables: here, not in :mod:`.tables`, so the pytest plugin
#: picks the files it collects without loading yaml.
SPEC_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".jsonl")
