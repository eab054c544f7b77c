"""Bundled prompt templates (data files; see README.md)."""
