"""pytest hooks and fixtures: specs (filled in by its feature)."""
