"""The function the fix is about, run for real on the CPU:
`batched_mm_experts_forward` of the installed transformers, or of any
version's moe.py text (defined with the installed module's globals), on a
small expert-parallel case: 4 local experts, token slots routed elsewhere
carry the sentinel id 4 with routing weight 0, as the EP dispatcher leaves
them. What the router learns from is the gradient of the routing weights."""
from __future__ import annotations

import types

MODULE = "transformers.integrations.moe"
FUNCTION = "batched_mm_experts_forward"
TARGET = "src/transformers/integrations/moe.py"
TOKENS, HIDDEN, INTERMEDIATE, EXPERTS, TOP_K = 6, 8, 8, 4, 2
SENTINEL = EXPERTS  # the local expert count: what EP writes for a non-local expert


def module():
    import importlib

    return importlib.import_module(MODULE)


def function_from(text: str):
    from fixmono.runtime.define import define

    return define(text, FUNCTION, vars(module()))


def fixed_function(text: str | None = None):
    """The function of `text` (default: the installed file) transformed."""
    from .transform import TRANSFORM  # libcst: only here
    from fixmono.runtime.define import module_source

    return function_from(TRANSFORM.rewrite(text if text is not None else module_source(MODULE)).source)


def experts_stub():
    """What the function reads from `self`, for every 5.x version (extra
    attributes are harmless to older ones)."""
    import torch

    g = torch.Generator().manual_seed(0)
    stub = types.SimpleNamespace(
        num_experts=EXPERTS, has_gate=True, has_bias=False, is_transposed=False, has_post_expert_norm=False,
        _is_expert_parallel=True,
        gate_up_proj=torch.randn(EXPERTS, 2 * INTERMEDIATE, HIDDEN, generator=g),
        down_proj=torch.randn(EXPERTS, HIDDEN, INTERMEDIATE, generator=g),
        act_fn=torch.nn.functional.silu)
    stub._apply_gate = lambda out: stub.act_fn(out.chunk(2, dim=-1)[0]) * out.chunk(2, dim=-1)[1]
    return stub


def run_case(function) -> dict:
    """Forward and backward through `function`; the routing-weight gradient
    at sentinel slots must be 0, at routed slots it is the expert output."""
    import torch

    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(TOKENS, HIDDEN, generator=g)
    ids = torch.randint(0, EXPERTS, (TOKENS, TOP_K), generator=g)
    sentinel = torch.zeros(TOKENS, TOP_K, dtype=torch.bool)
    sentinel[::2, 1] = True  # every other token's second expert lives on another rank
    ids = ids.masked_fill(sentinel, SENTINEL)
    weights = torch.rand(TOKENS, TOP_K, generator=g).masked_fill(sentinel, 0.0).requires_grad_()
    ids_before = ids.clone()
    out = function(experts_stub(), hidden, ids, weights)
    out.backward(torch.randn(out.shape, generator=g))
    grad = weights.grad
    return {"sentinel_grad_max": float(grad[sentinel].abs().max()), "routed_grad_min": float(grad[~sentinel].abs().min()),
            "sentinel_slots": int(sentinel.sum()), "ids_mutated": bool((ids != ids_before).any()),
            "right": bool((grad[sentinel] == 0).all() and (grad[~sentinel] != 0).all())}
