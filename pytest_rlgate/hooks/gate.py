"""pytest hooks and fixtures: gate (filled in by its feature)."""
