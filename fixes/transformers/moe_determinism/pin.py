"""Pinned MoE routing under activation checkpointing.

Checkpointing recomputes each layer in the backward. If the router's top-k
choice flips between the forward and the recompute (near-tied probabilities
plus bf16 drift from non-deterministic kernels), eager experts save a
different number of tensors (torch.utils.checkpoint raises CheckpointError)
and grouped_mm experts silently recompute with other experts.

The pin is a TorchDispatchMode on `aten.topk`, handed to checkpoint through
`context_fn`: the forward context records the indices of every top-k in the
region, the recompute context returns those indices and gathers the values at
them from the recomputed input. It sits below autograd, so both passes build
the same TopkBackward node and gradients flow as usual. Each checkpointed
region gets its own store (context_fn is called per region), so gradient
accumulation, several forwards before a backward, and out-of-order backward
all work. Limits: non-reentrant checkpoint only (the reentrant one has no
context_fn); routers that use max/argmax (Phimoe, Switch) or hub kernels that
replace the router are not pinned.

The block between the "upstream" markers is also what the make_patch
transformation adds to transformers/integrations/moe.py (transform.py reads
it from here, so the runtime form and the upstream form are one code).
"""
from __future__ import annotations

# --- upstream: begin ---
from torch.utils._python_dispatch import TorchDispatchMode as _TorchDispatchMode


class PinnedTopK(_TorchDispatchMode):
    """Records top-k indices in a checkpointed forward (replay=False) and replays
    them in its recompute (replay=True), gathering the values at those indices."""

    def __init__(self, store: list, replay: bool):
        super().__init__()
        self.store, self.replay, self.next = store, replay, 0

    def __enter__(self):
        self.next = 0  # a second backward through the same region (retain_graph) replays from the start
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        import torch

        kwargs = kwargs or {}
        if func is not torch.ops.aten.topk.default:
            return func(*args, **kwargs)
        if not self.replay:
            values, indices = func(*args, **kwargs)
            self.store.append(indices.clone())
            return values, indices
        if self.next >= len(self.store):
            raise RuntimeError("pinned MoE routing: the recompute ran more top-k calls than the forward")
        indices = self.store[self.next]
        self.next += 1
        dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
        return torch.ops.aten.gather.default(args[0], dim, indices), indices.clone()


def pinned_routing_contexts():
    """A `context_fn` for torch.utils.checkpoint: (forward context, recompute context)."""
    store = []
    return PinnedTopK(store, replay=False), PinnedTopK(store, replay=True)


def pin_moe_routing_kwargs(checkpoint_kwargs):
    """Checkpoint kwargs with "pin_moe_routing" turned into the context_fn that pins routing."""
    kwargs = dict(checkpoint_kwargs or {})
    if not kwargs.pop("pin_moe_routing", False):
        return kwargs
    if kwargs.get("use_reentrant"):
        raise ValueError("pin_moe_routing needs use_reentrant=False: the reentrant checkpoint has no context_fn")
    if "context_fn" in kwargs:
        raise ValueError("pin_moe_routing provides the context_fn; do not pass one as well")
    return {**kwargs, "use_reentrant": False, "context_fn": pinned_routing_contexts}
# --- upstream: end ---


def enable_pinned_routing(model, **checkpoint_kwargs) -> str:
    """Turn on activation checkpointing for a transformers model with routing
    pinned (works like model.gradient_checkpointing_enable). Returns what it did."""
    kwargs = pin_moe_routing_kwargs({**checkpoint_kwargs, "pin_moe_routing": True})
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:  # transformers >= 5.23
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    return f"pinned MoE routing: checkpointing on for {type(model).__name__} with top-k replayed in recompute"


def upstream_block() -> str:
    """The source between the upstream markers, for the transformers patch."""
    import inspect
    import sys

    text = inspect.getsource(sys.modules[__name__])
    start = text.index("# --- upstream: begin ---\n") + len("# --- upstream: begin ---\n")
    return text[start:text.index("# --- upstream: end ---")]
