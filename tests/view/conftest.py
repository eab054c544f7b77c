"""Fixtures of the viewer's tests.

- `synthetic_run`: a generated evaluation run in swe-rl eval's format (swe_rl.view.synthetic), 60 instances x 2
  runs: seconds to make, every outcome present. Tests copy it before changing anything.
- The `view`-marked tests (also `slow`, so `make test` leaves them out; `make test-view` runs them) open real runs
  in headless Chromium: they need Debian's `chromium`, which `make test-view` installs. Without it they skip with
  that reason, except under CI, where they fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config, items):
    from swe_rl.view.browser import find_chromium

    if find_chromium():
        return
    for item in items:
        if item.get_closest_marker("view") and not os.environ.get("CI"):
            item.add_marker(pytest.mark.skip(reason="needs Debian's chromium: `make test-view` installs it"))


@pytest.hookimpl(tryfirst=True)  # before the session fixtures (minutes of eval and training) are made
def pytest_runtest_setup(item):
    if not item.get_closest_marker("view") or not os.environ.get("CI"):
        return  # without CI a missing chromium skips (marked at collection)
    from swe_rl.view.browser import find_chromium

    if not find_chromium():
        pytest.fail("CI is set but no chromium is installed (`make test-view` installs it)", pytrace=False)


@pytest.fixture(scope="session")
def synthetic_run(tmp_path_factory) -> Path:
    from swe_rl.view.synthetic import make_eval_run

    return make_eval_run(
        tmp_path_factory.mktemp("synthetic") / "eval-synthetic", instances=60, runs=2, seed=1
    )


@pytest.fixture
def run_copy(synthetic_run, tmp_path) -> Path:
    """A copy of the synthetic run this test may change."""
    dest = tmp_path / synthetic_run.name
    shutil.copytree(synthetic_run, dest, ignore=shutil.ignore_patterns("view"))
    return dest
