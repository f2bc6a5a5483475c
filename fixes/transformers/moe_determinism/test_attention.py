"""Attention selection verifies reproducibility at run time (CPU here)."""
import torch
import torch.nn.functional as F

from fixmono.fixes.transformers.moe_determinism import attention


def test_cpu_selection_is_verified_and_reproducible():
    choice = attention.select(shape=(1, 2, 32, 16))
    assert choice.trials and all(t.error or t.reproducible is not None for t in choice.trials)
    chosen = next(t for t in choice.trials if t.name == choice.name)
    assert chosen.reproducible and chosen.ms == min(t.ms for t in choice.trials if t.reproducible)


def test_a_non_reproducible_backend_is_rejected():
    calls = []

    def noisy(q, k, v):  # a double of a backend whose backward differs run to run
        calls.append(1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) + 1e-6 * len(calls)

    trial = attention.trial("noisy", noisy, (1, 2, 16, 8), torch.float32, "cpu")
    assert trial.reproducible is False


def test_eager_reference_matches_sdpa():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8, dtype=torch.float64, generator=gen) for _ in range(3))
    assert torch.allclose(attention.eager_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True))
