"""Device placement guard: with the inputs on the CPU and torch's default device set to `meta`, every tensor our
code makes without naming a device lands on `meta`, and mixing it with the caller's tensors (or reading it back)
fails — the class of bug a CUDA caller hits as "Expected all tensors to be on the same device". Every estimator,
modulator, loss and off-policy case of swe_rl.algo runs here, with and without the trap; the results must match.
"""

from __future__ import annotations

import pytest
import torch

from tests.device_cases import CASES, run_case


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], torch.Tensor):
            torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
        else:
            assert a[k] == b[k], k


def test_the_trap_catches_a_default_device_tensor():
    """The guard's premise: under the meta default, a device-less tensor next to a CPU one raises."""
    x = torch.ones(3, device="cpu")
    with torch.device("meta"), pytest.raises((RuntimeError, NotImplementedError)):
        (x & torch.tensor([True, False, True])).sum().item()


@pytest.mark.parametrize("name", sorted(CASES))
def test_pipeline_makes_no_tensor_on_the_default_device(name):
    want = run_case(name, "cpu")
    with torch.device("meta"):
        got = run_case(name, "cpu")
    _same(want, got)
