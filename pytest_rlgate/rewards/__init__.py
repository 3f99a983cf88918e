"""Testing a reward before it trains anything: reward tables as pytest items (:mod:`.tables`),
the probe that tries known and generated hacks (:mod:`.probe`, :mod:`.strategies`), and the
scan that finds which reply feature a reward pays for (:mod:`.scan`)."""
