"""pytest hooks and fixtures: prompts (filled in by its feature)."""
