"""`swe-rl view`: a static HTML viewer of evaluation runs, training runs and `swe-rl grade` outputs (README.md)."""
