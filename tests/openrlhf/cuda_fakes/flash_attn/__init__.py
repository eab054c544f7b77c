"""Named fake of the CUDA-only `flash_attn` package (see ../README.md): import-time names only."""

__version__ = "2.8.3+cuda-only-fake"


class CudaOnlyFake(RuntimeError):
    """A CUDA-only code path was reached in a CPU test."""


def cuda_only(name: str):
    def fail(*args, **kwargs):
        raise CudaOnlyFake(f"{name} is CUDA-only (flash-attn); the CPU tests must not reach it")

    fail.__name__ = name.rsplit(".", 1)[-1]
    return fail
