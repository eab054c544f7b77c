"""See README.md: what this package owns and what it may import."""
