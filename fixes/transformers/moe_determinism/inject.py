"""Test instruments for routing under checkpointing (CPU-friendly).

RecomputeRoutingDrift is a fault-injecting double of the bf16 drift seen on
ROCm: in the recompute only (inside a backward: graph task id != -1) it adds
noise to the scores that a top-k *selects* with, so routing flips as it does
near ties, while the returned values are the unperturbed scores at the chosen
indices. With the pin active, the pin answers the recompute's top-k first and
the drift never applies, so gradients must equal the no-drift run bitwise.

RoutingRecorder records every top-k's indices with the pass it ran in, so a
silent routing change (grouped_mm experts) can be detected.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def in_backward() -> bool:
    return torch._C._current_graph_task_id() != -1


class RecomputeRoutingDrift(TorchDispatchMode):
    def __init__(self, scale: float = 10.0, seed: int = 0):
        super().__init__()
        self.scale, self.gen, self.flipped = scale, torch.Generator().manual_seed(seed), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not torch.ops.aten.topk.default or not in_backward():
            return func(*args, **kwargs)
        scores = args[0]
        noise = torch.randn(scores.shape, generator=self.gen).to(scores.device, scores.dtype) * self.scale
        _, drifted = func(scores + noise * scores.detach().abs().mean(), *args[1:], **kwargs)
        _, clean = func(*args, **kwargs)
        self.flipped += int((drifted != clean).any(dim=-1).sum())
        dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
        return torch.ops.aten.gather.default(scores, dim, drifted), drifted


class RoutingRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.forward: list[torch.Tensor] = []
        self.recompute: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.topk.default:
            (self.recompute if in_backward() else self.forward).append(out[1].detach().clone())
        return out

    def changed_decisions(self) -> tuple[int, int]:
        """(recomputed top-k calls whose indices match no forward call, recomputed
        calls). Regions recompute in reverse order, so calls are matched by
        content, not position."""
        def same(a, b):
            return a.shape == b.shape and torch.equal(a.sort(dim=-1).values, b.sort(dim=-1).values)

        changed = sum(1 for r in self.recompute if not any(same(r, f) for f in self.forward))
        return changed, len(self.recompute)
