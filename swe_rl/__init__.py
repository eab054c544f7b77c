"""swe-rl."""
