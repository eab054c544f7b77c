"""Sandbox bench (see sandboxes/bench.py): start latency, round trip vs exec_run/CLI, 32 concurrent sandboxes.

Usage: .venv/bin/python bench/sandbox.py [IMAGE] [N_CONCURRENT]   (also: `sandboxes bench`)
"""

from __future__ import annotations

import sys

from sandboxes.bench import main

if __name__ == "__main__":
    image = sys.argv[1] if len(sys.argv) > 1 else "swe-rl/base:bookworm"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    result = main(image, n)
    sys.exit(1 if result.failures else 0)
