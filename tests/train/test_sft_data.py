"""SFT demonstrations: the flawed-expert share is deterministic, sized by the fraction, and validated."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from swe_rl.train.sft import SFTConfig, flawed_task_ids


def test_flawed_ids_deterministic_and_sized():
    ids = [f"t{i}" for i in range(200)]
    a = flawed_task_ids(ids, 0.5, seed=0)
    assert len(a) == 100 and a <= set(ids)
    assert a == flawed_task_ids(list(reversed(ids)), 0.5, seed=0)  # order of the task list does not matter
    assert a != flawed_task_ids(ids, 0.5, seed=1)
    assert flawed_task_ids(ids, 0.0, seed=0) == frozenset()
    assert len(flawed_task_ids(ids, 1.0, seed=0)) == 200


def test_flawed_fraction_out_of_range_is_one_clear_error():
    with pytest.raises(ValidationError, match="flawed_fraction"):
        SFTConfig(flawed_fraction=1.5)
