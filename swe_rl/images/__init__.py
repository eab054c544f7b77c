"""The images room's public surface for the rest of the pipeline (README.md says what this package owns).

Names resolve on first use, so importing one module of the package does not import all of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers (at run time they resolve lazily below)
    from swe_rl.images.swebench_build import build_inputs
    from swe_rl.images.swebench_images import image_tag
    from swe_rl.images.task_images import image_fix, prepare_images

_SURFACE = {
    "prepare_images": "swe_rl.images.task_images",  # what `swe-rl grade` and `swe-rl eval` run first
    "image_fix": "swe_rl.images.task_images",
    "build_inputs": "swe_rl.images.swebench_build",
    "image_tag": "swe_rl.images.swebench_images",  # the one name of an instance image (written into task rows)
}
__all__ = [  # the keys of _SURFACE (tests/foundation/test_rooms.py holds them equal)
    "build_inputs",
    "image_fix",
    "image_tag",
    "prepare_images",
]


def __getattr__(name: str) -> Any:
    if name not in _SURFACE:
        raise AttributeError(f"module 'swe_rl.images' has no attribute {name!r}")
    value = getattr(importlib.import_module(_SURFACE[name]), name)
    globals()[name] = value
    return value
