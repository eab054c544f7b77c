"""Experiments on the built-in trainer: the CPU demo, method comparisons, the AEM mechanism probe."""

from swe_rl.experiments import sources as _sources  # noqa: F401  (registers the toy and decisions data sources)
