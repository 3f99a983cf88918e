"""Plumbing every layer shares: atomic writes, the content-addressed cache, stale-file
cleanup and terminal progress. Pure Python; nothing here knows what it stores."""
