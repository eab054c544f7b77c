"""Adapters from other training sets' rows to SWE-bench 5.x rows (filled in below per dataset)."""

from __future__ import annotations

from typing import Any


def adapt_row(row: dict[str, Any]) -> dict[str, Any]:
    """Rows of known non-SWE-bench formats become SWE-bench 5.x rows; SWE-bench rows pass through."""
    return row
