"""Pinned MoE routing under activation checkpointing.

Checkpointing recomputes each layer in the backward. If the router's top-k
choice flips between the forward and the recompute (near-tied probabilities
plus bf16 drift from non-deterministic kernels), eager experts save a
different number of tensors (torch.utils.checkpoint raises CheckpointError)
and grouped_mm experts silently recompute with other experts.

The pin is a pair of contexts handed to checkpoint through `context_fn`: the
forward context records the indices of every top-k in the region, the
recompute context returns those indices. Both take the values with gather at
the indices (bitwise the values topk returns; gather's backward scatters into
the same positions as topk's), so autograd records the same node in both
passes and gradients are bitwise those of plain checkpointing. Only torch.topk/Tensor.topk are
swapped while a context is active: a TorchDispatchMode on aten.topk (the
design in the notes) works too but runs Python for every op of the region,
which cost +34% step time on a tiny model on an H200. Each checkpointed
region gets its own store (context_fn is called per region), so gradient
accumulation, several forwards before a backward, and out-of-order backward
all work. Limits: non-reentrant checkpoint only (the reentrant one has no
context_fn); not under torch.compile (which wants TorchDispatchMode contexts);
one thread per process runs the region (the swap is process-wide); routers
that use max/argmax (Phimoe, Switch) or hub kernels that replace the router
are not pinned.

The block between the "upstream" markers is also what the make_patch
transformation adds to transformers/integrations/moe.py (transform.py reads
it from here, so the runtime form and the upstream form are one code).
"""
from __future__ import annotations

# --- upstream: begin ---
class PinnedTopK:
    """Records the indices of every torch.topk / Tensor.topk in a checkpointed
    forward (replay=False); in its recompute (replay=True) returns those indices.
    Only topk is intercepted (swapped while the context is active), so the
    other ops of the region pay nothing."""

    def __init__(self, store: list, replay: bool):
        self.store, self.replay, self.next, self.saved = store, replay, 0, None

    def topk(self, input, k, dim=-1, largest=True, sorted=True, **kwargs):
        import torch

        # Both passes take the values with gather, so autograd records the same
        # node (and saves the same tensors) in the forward and the recompute.
        if not self.replay:
            indices = self.saved[0](input.detach(), k, dim, largest, sorted, **kwargs).indices
            self.store.append(indices)
        elif self.next < len(self.store):
            indices = self.store[self.next]
            self.next += 1
        else:
            raise RuntimeError("pinned MoE routing: the recompute ran more top-k calls than the forward")
        return torch.return_types.topk((input.gather(dim, indices), indices.clone()))

    def __enter__(self):
        import torch

        self.next = 0  # a second backward through the same region (retain_graph) replays from the start
        self.saved = (torch.topk, torch.Tensor.topk)
        torch.topk = self.topk
        torch.Tensor.topk = lambda input, *args, **kwargs: self.topk(input, *args, **kwargs)
        return self

    def __exit__(self, *exc):
        import torch

        torch.topk, torch.Tensor.topk = self.saved
        return False


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


def checkpointing_enable(model, checkpoint_kwargs: dict) -> None:
    """model.activation_checkpointing_enable (transformers >= 5.23) or the older
    gradient_checkpointing_enable, with these torch.utils.checkpoint kwargs."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs=checkpoint_kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=checkpoint_kwargs)


def enable_pinned_routing(model, **checkpoint_kwargs) -> str:
    """Turn on activation checkpointing for a transformers model with routing
    pinned (works like model.gradient_checkpointing_enable). Returns what it did."""
    checkpointing_enable(model, pin_moe_routing_kwargs({**checkpoint_kwargs, "pin_moe_routing": True}))
    return f"pinned MoE routing: checkpointing on for {type(model).__name__} with top-k replayed in recompute"


def upstream_block() -> str:
    """The source between the upstream markers, for the transformers patch."""
    import inspect
    import sys

    text = inspect.getsource(sys.modules[__name__])
    start = text.index("# --- upstream: begin ---\n") + len("# --- upstream: begin ---\n")
    return text[start:text.index("# --- upstream: end ---")]
