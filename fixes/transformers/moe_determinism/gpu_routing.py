"""Routing decisions that differ between the forward and the recompute, on the GPU.

    python -m fixmono.fixes.transformers.moe_determinism.gpu_routing --config A-grouped --out FILE

grouped_mm experts save the same shapes whatever the routing, so a flipped top-k
in the recompute raises nothing: the backward silently uses other experts. Here
one forward+backward of train.py's configuration (bf16, non-reentrant
checkpointing) records the top-k indices each experts module receives, in the
forward and in its recompute, and counts the tokens whose expert set differs:

  real drift      plain checkpointing, deterministic algorithms off, no injection
  injected        plain checkpointing, deterministic algorithms on, RecomputeRoutingDrift
                  (inject.py: noise of SCALE x mean |score| added to the scores the
                  recompute's top-k selects with; a double of ROCm's bf16 drift)
  pinned          the same injection with the pin on

and whether the pinned run's gradients are bitwise those of the pinned run with no
injection.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


class ExpertInputs:
    """Forward pre-hooks on every experts module: the top_k_index it was called with, by pass."""

    def __init__(self, model):
        from .inject import in_backward

        self.calls: dict[str, dict[str, list]] = {}
        self.handles = []
        for name, module in model.named_modules():
            if type(module).__name__.endswith("Experts"):
                def hook(module, args, kwargs, name=name):
                    index = args[1] if len(args) > 1 else kwargs["top_k_index"]
                    passes = self.calls.setdefault(name, {"forward": [], "recompute": []})
                    passes["recompute" if in_backward() else "forward"].append(index.detach().sort(-1).values)
                self.handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    def differing(self) -> tuple[int, int]:
        """(tokens routed to another expert set in the recompute, tokens recomputed), over all modules."""
        changed = total = 0
        for passes in self.calls.values():
            for fwd, rec in zip(passes["forward"], passes["recompute"]):
                changed += int((fwd != rec).any(-1).sum())
                total += fwd.shape[0]
        return changed, total

    def remove(self):
        for handle in self.handles:
            handle.remove()


def one_step(model, data, pin: bool, deterministic: bool, scale: float | None) -> dict:
    import torch

    from .inject import RecomputeRoutingDrift
    from .pin import checkpointing_enable, enable_pinned_routing

    torch.use_deterministic_algorithms(deterministic)
    enable_pinned_routing(model) if pin else checkpointing_enable(model, {"use_reentrant": False})
    inputs = ExpertInputs(model)
    drift = RecomputeRoutingDrift(scale=scale) if scale is not None else None
    try:
        if drift is not None:
            with drift:
                model(**data).loss.backward()
        else:
            model(**data).loss.backward()
    finally:
        inputs.remove()
    grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    model.zero_grad(set_to_none=True)
    changed, total = inputs.differing()
    return {"pin": pin, "deterministic": deterministic, "drift_scale": scale, "tokens_rerouted": changed,
            "tokens_recomputed": total, "drift_flips_seen": drift.flipped if drift else None, "grads": grads}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="A-grouped")
    p.add_argument("--scales", default="0.01,10", help="RecomputeRoutingDrift scales to inject")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    import os

    import torch

    if not torch.cuda.is_available():
        print("skipped: needs a GPU")
        return 77
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    from .cost import build
    from .models import batch

    model, cfg, spec = build(args.config)
    data = {k: v.cuda() for k, v in batch(cfg.vocab_size, seed=0, size=spec["batch"]).items()}
    runs = {"real drift": one_step(model, data, pin=False, deterministic=False, scale=None),
            "pinned, no injection": one_step(model, data, pin=True, deterministic=True, scale=None)}
    for scale in (float(s) for s in args.scales.split(",")):
        runs[f"injected {scale:g}"] = one_step(model, data, pin=False, deterministic=True, scale=scale)
        runs[f"pinned, injected {scale:g}"] = one_step(model, data, pin=True, deterministic=True, scale=scale)
    reference = runs["pinned, no injection"]["grads"]
    for name, run in runs.items():
        grads = run.pop("grads")
        run["grads_equal_to_pinned_no_injection"] = all(torch.equal(a, b) for a, b in zip(grads, reference))
        print(f"{name}: {run['tokens_rerouted']}/{run['tokens_recomputed']} token routings differ in the recompute; "
              f"gradients bitwise those of the pinned run without injection: "
              f"{run['grads_equal_to_pinned_no_injection']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"config": args.config, "gpu": torch.cuda.get_device_name(),
                                    "torch": torch.__version__, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
