import pytest
import torch

from swe_rl.algo.entropy import entropy_from_logits, token_entropy, token_entropy_from_hidden


def naive(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    return torch.distributions.Categorical(logits=logits.double() / temperature).entropy()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_matches_naive_from_bf16(temperature):
    torch.manual_seed(0)
    logits = (torch.randn(3, 37, 2053) * 4).bfloat16()
    for chunk in (7, 1000):
        got = token_entropy(logits, chunk_size=chunk, temperature=temperature)
        assert got.dtype == torch.float32 and got.shape == (3, 37)
        assert (got.double() - naive(logits, temperature)).abs().max() < 1e-4


def test_from_hidden_matches_full_logits_and_gradients():
    torch.manual_seed(1)
    hidden = torch.randn(2, 9, 16, requires_grad=True)
    weight = torch.nn.Parameter(torch.randn(300, 16) * 0.5)
    bias = torch.nn.Parameter(torch.randn(300) * 0.1)
    w_out = torch.randn(2, 9)
    got = token_entropy_from_hidden(hidden, weight, bias, chunk_size=4, temperature=0.8)
    (got * w_out).sum().backward()
    grads = [t.grad.clone() for t in (hidden, weight, bias)]
    for t in (hidden, weight, bias):
        t.grad = None
    ref = naive(hidden @ weight.T + bias, 0.8)
    (ref * w_out).sum().backward()
    assert (got.double() - ref).abs().max() < 1e-4
    for g, t in zip(grads, (hidden, weight, bias), strict=True):
        assert torch.allclose(g, t.grad, atol=1e-4)


def test_logits_gradient_matches_autograd_of_naive():
    torch.manual_seed(2)
    logits = torch.randn(4, 5, 64, requires_grad=True)
    token_entropy(logits, chunk_size=3).sum().backward()
    g = logits.grad.clone()
    logits.grad = None
    naive(logits).sum().backward()
    assert torch.allclose(g, logits.grad, atol=1e-5)


def test_real_tiny_model_lm_head(tiny_tokenizer, tiny_model):
    # the session-wide tiny Qwen2/Qwen3 models (shared with other areas' tests)
    model = tiny_model.eval()
    ids = torch.tensor([tiny_tokenizer.encode("def add(a, b):\n    return a + b\n")])
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
        head = model.get_output_embeddings()
        from_logits = token_entropy(out.logits, chunk_size=5)
        from_hidden = token_entropy_from_hidden(out.hidden_states[-1], head.weight, head.bias, chunk_size=5)
    assert (from_logits.double() - naive(out.logits)).abs().max() < 1e-4
    assert (from_hidden - from_logits).abs().max() < 1e-4


def test_entropy_from_logits_plain():
    x = torch.randn(5, 33)
    before = x.clone()
    assert (entropy_from_logits(x, temperature=0.5).double() - naive(x, 0.5)).abs().max() < 1e-5
    assert torch.equal(x, before)  # the in-place shifts work on a copy


def test_bad_input():
    with pytest.raises(ValueError, match="chunk_size"):
        token_entropy(torch.randn(2, 3), chunk_size=0)
    with pytest.raises(ValueError, match="lm_head"):
        token_entropy_from_hidden(torch.randn(2, 3), torch.randn(5, 4))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_masked_logits_give_the_entropy_and_gradient_of_what_is_left(temperature):
    """A logit set to -inf (a masked or padded vocabulary row) has probability 0: the entropy and its gradient are
    those of the remaining logits, and the masked ones get gradient 0 (0 * -inf would make both NaN)."""
    torch.manual_seed(3)
    logits = torch.randn(5, 64) * 3
    keep = torch.rand(5, 64) > 0.3
    keep[:, 0] = True
    masked = logits.masked_fill(~keep, float("-inf")).requires_grad_(True)
    w_out = torch.randn(5)
    got = token_entropy(masked, chunk_size=2, temperature=temperature)
    (got * w_out).sum().backward()
    for r in range(5):
        sub = logits[r][keep[r]].clone().requires_grad_(True)
        ref = naive(sub, temperature)
        (ref * w_out[r]).backward()
        assert abs(got[r].item() - ref.item()) < 1e-5
        assert torch.allclose(masked.grad[r][keep[r]], sub.grad.float(), atol=1e-5)
        assert torch.all(masked.grad[r][~keep[r]] == 0)
