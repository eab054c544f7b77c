"""Adapters that let other agent frameworks run inside our sandboxes (each imports its framework lazily)."""
