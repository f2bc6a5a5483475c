"""MoE experts whose forward and backward are deterministic by construction, and fast.

Under torch.use_deterministic_algorithms(True), transformers' eager experts pay for
their index ops: `final.index_add_(0, token_idx, out)` and the backward of
`hidden_states[token_idx]` (index_put with accumulate) take torch's sort-based
deterministic kernels, once per expert per pass, and the loop syncs with the host
for every expert. grouped_mm experts index with duplicates (`hidden_states[perm //
top_k]`, `weighted_out[inv_perm]`), whose backward is the same slow path.

Here no op accumulates through an index: slots are sorted by expert once (stable
sort), rows are moved with a permutation whose backward is the inverse permutation
(a gather), a token's top-k copies are made by `expand` (backward: a sum over k),
the experts run as two grouped GEMMs (transformers' `_grouped_linear`: torch's
grouped_mm, or its fallback), and the top-k outputs are combined by a reshape-sum in
a fixed order, as transformers' grouped_mm does. No host sync.

    experts.enable(model)   # registered as "fixmono_deterministic" in ExpertsInterface
    experts.disable(model)
"""
from __future__ import annotations

import weakref

import torch

NAME = "fixmono_deterministic"
_previous: dict[int, tuple[weakref.ref, str]] = {}  # id(model) -> (the model, the implementation it had)


class _Permute(torch.autograd.Function):
    """x[perm] whose backward is grad[inverse]: a gather, never a scatter-add."""

    @staticmethod
    def forward(ctx, x, perm, inverse):
        ctx.save_for_backward(inverse)
        return x.index_select(0, perm)

    @staticmethod
    def backward(ctx, grad):
        (inverse,) = ctx.saved_tensors
        return grad.index_select(0, inverse), None, None


def _expert_parallel(experts) -> bool:
    """Whether routing may carry expert-parallel sentinels (ids == num_experts): transformers >= 5.23
    says so per module; before, only a distributed run can have them."""
    flag = getattr(experts, "_is_expert_parallel", None)
    if flag is not None:
        return bool(flag)
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def deterministic_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """ExpertsInterface signature: hidden_states (T, H), top_k_index and top_k_weights (T, K) -> (T, H)."""
    from transformers.integrations.moe import _grouped_linear

    tokens, top_k = top_k_index.shape
    expert_ids = top_k_index.reshape(-1)
    sorted_ids, order = torch.sort(expert_ids, stable=True)
    inverse = torch.argsort(order)
    # offsets[e] = slots routed to experts 0..e; ids >= num_experts (expert-parallel sentinels) sort
    # to the tail, beyond the last offset, where the grouped GEMM does not compute
    bounds = torch.arange(1, self.num_experts + 1, device=sorted_ids.device, dtype=sorted_ids.dtype)
    offsets = torch.searchsorted(sorted_ids, bounds).to(torch.int32)
    # the grouped GEMM leaves sentinel rows uninitialised (forward output and input gradient): zero them,
    # two passes over the rows that only expert parallelism needs
    sentinel = (sorted_ids >= self.num_experts).unsqueeze(-1) if _expert_parallel(self) else None
    sorted_ids = sorted_ids.clamp(max=self.num_experts - 1)

    slots = hidden_states.unsqueeze(1).expand(tokens, top_k, hidden_states.shape[-1]).reshape(tokens * top_k, -1)
    rows = _Permute.apply(slots, order, inverse)
    if sentinel is not None:
        rows = rows.masked_fill(sentinel, 0.0)

    def linear(x, weight_name):
        bias = getattr(self, f"{weight_name}_bias")[sorted_ids] if getattr(self, "has_bias", False) else None
        return _grouped_linear(x, getattr(self, weight_name), offsets, bias=bias,
                               is_transposed=getattr(self, "is_transposed", False))

    if getattr(self, "has_gate", True):
        out = linear(rows, "gate_up_proj")
        apply_gate = getattr(self, "_apply_gate", None)
        if apply_gate is not None:
            out = apply_gate(out)
        else:
            gate, up = out.chunk(2, dim=-1)
            out = self.act_fn(gate) * up
    else:
        out = self.act_fn(linear(rows, "up_proj"))
    out = linear(out, "down_proj")
    if sentinel is not None:
        out = out.masked_fill(sentinel, 0.0)
    if getattr(self, "has_post_expert_norm", False):
        out = self.post_expert_norm(out)
    out = _Permute.apply(out, inverse, order) * top_k_weights.reshape(-1, 1).to(out.dtype)
    return out.view(tokens, top_k, -1).sum(dim=1).to(hidden_states.dtype)


def register() -> bool:
    """Add the forward to transformers' ExpertsInterface; False where transformers has none."""
    try:
        from transformers.integrations.moe import ExpertsInterface
    except ImportError:
        return False
    ExpertsInterface.register(NAME, deterministic_experts_forward)
    return True


def enable(model) -> str:
    current = getattr(model.config, "_experts_implementation", None)
    if current == NAME:
        return f"deterministic experts: already {NAME}"
    if not hasattr(model, "set_experts_implementation") or not register():
        return "deterministic experts: not replaced (this transformers has no ExpertsInterface)"
    model.set_experts_implementation(NAME)
    _previous[id(model)] = (weakref.ref(model), current or "eager")
    return (f"deterministic experts: {current} -> {NAME} (sorted slots, grouped GEMMs, fixed-order combine; "
            "no index accumulation)")


def disable(model=None) -> str:
    """Give the model (every model enable() changed, when None) its experts implementation back."""
    keys = list(_previous) if model is None else [id(model)] if id(model) in _previous else []
    restored = []
    for key in keys:
        ref, previous = _previous.pop(key)
        if ref() is not None:
            ref().set_experts_implementation(previous)
            restored.append(previous)
    if not restored:
        return "deterministic experts: nothing to restore"
    return f"deterministic experts: {NAME} -> {', '.join(sorted(set(restored)))} ({len(restored)} model(s))"
