"""Named fake: vllm.inputs.TokensPrompt (a TypedDict in vLLM: a plain dict here)."""

TokensPrompt = dict
