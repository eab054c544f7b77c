"""Tool scripts copied into the sandbox (stdlib-only Python, R2E-Gym style). Not imported by swe_rl itself."""
