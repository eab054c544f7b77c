"""Experiments on the built-in trainer: the CPU demo, method comparisons, the AEM mechanism probe."""
