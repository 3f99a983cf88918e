"""pytest hooks and fixtures: training (filled in by its feature)."""
