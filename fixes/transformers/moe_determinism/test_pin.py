"""The routing pin on its own: kwargs handling, replay, restoration of torch.topk."""
import contextlib

import pytest
import torch
from torch.utils.checkpoint import checkpoint

from fixmono.fixes.transformers.moe_determinism.inject import RecomputeRoutingDrift
from fixmono.fixes.transformers.moe_determinism.pin import PinnedTopK, pin_moe_routing_kwargs, pinned_routing_contexts


def router_layer(x, w):
    probs = (x @ w).softmax(-1)
    values, idx = torch.topk(probs, 2, dim=-1)
    out = torch.zeros_like(probs).scatter(-1, idx, values)
    return out @ w.t() * x


def grads(pin: bool, drift: bool):
    torch.manual_seed(0)
    x = torch.randn(16, 8, requires_grad=True)
    w = torch.randn(8, 6, requires_grad=True)
    kwargs = {"use_reentrant": False, **({"context_fn": pinned_routing_contexts} if pin else {})}
    drifter = RecomputeRoutingDrift()
    with drifter if drift else contextlib.nullcontext():
        checkpoint(router_layer, x, w, **kwargs).sum().backward()
    return x.grad, w.grad, drifter.flipped


def test_pin_makes_drifted_recompute_bitwise_equal_to_no_drift():
    base = grads(pin=False, drift=False)
    pinned = grads(pin=True, drift=True)
    assert torch.equal(base[0], pinned[0]) and torch.equal(base[1], pinned[1])


def test_without_the_pin_the_drift_changes_gradients():
    base, drifted = grads(pin=False, drift=False), grads(pin=False, drift=True)
    assert drifted[2] > 0 and not torch.equal(base[1], drifted[1])


def test_topk_is_restored_after_the_context_even_on_error():
    original, method = torch.topk, torch.Tensor.topk
    with pytest.raises(ValueError):
        with PinnedTopK([], replay=False):
            assert torch.topk is not original
            raise ValueError("boom")
    assert torch.topk is original and torch.Tensor.topk is method


def test_replay_returns_the_recorded_indices_with_current_values():
    store = []
    scores = torch.tensor([[0.1, 0.5, 0.4]])
    with PinnedTopK(store, replay=False):
        first = torch.topk(scores, 1)
    with PinnedTopK(store, replay=True):
        again = scores.flip(-1).topk(1)  # the method form too, on scores that would pick another index
    assert first.indices.tolist() == again.indices.tolist() == [[1]]
    assert again.values.tolist() == [[0.5]]
    with pytest.raises(RuntimeError, match="more top-k calls"):
        with PinnedTopK(store, replay=True) as ctx:
            ctx.next = 1
            torch.topk(scores, 1)


def test_kwargs():
    assert pin_moe_routing_kwargs({"use_reentrant": False}) == {"use_reentrant": False}
    pinned = pin_moe_routing_kwargs({"pin_moe_routing": True})
    assert pinned == {"use_reentrant": False, "context_fn": pinned_routing_contexts}
    with pytest.raises(ValueError, match="use_reentrant=False"):
        pin_moe_routing_kwargs({"pin_moe_routing": True, "use_reentrant": True})
    with pytest.raises(ValueError, match="context_fn"):
        pin_moe_routing_kwargs({"pin_moe_routing": True, "context_fn": object()})
