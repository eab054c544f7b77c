"""Named fake: flash_attn.utils.distributed (ring attention only)."""

from flash_attn import cuda_only

all_gather = cuda_only("flash_attn.utils.distributed.all_gather")
