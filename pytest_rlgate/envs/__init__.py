"""Environments: a case reader, a reward and markers for one task each."""
