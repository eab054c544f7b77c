"""Named fake: flash_attn.bert_padding (used by OpenRLHF only with sample packing)."""

from einops import rearrange  # flash-attn re-exports einops' rearrange here

from flash_attn import cuda_only

index_first_axis = cuda_only("flash_attn.bert_padding.index_first_axis")
pad_input = cuda_only("flash_attn.bert_padding.pad_input")
unpad_input = cuda_only("flash_attn.bert_padding.unpad_input")

__all__ = ["index_first_axis", "pad_input", "rearrange", "unpad_input"]
