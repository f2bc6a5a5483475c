"""Benchmark: what the fix costs a small dropout-heavy model, side by side.

    python -m fixmono.fixes.pytorch.memory_budget_rng.bench [--steps 20] [--backend inductor] [--device cpu] [--json]

A 4-block MLP (512 -> 2048 -> 512, dropout 0.1 after each linear, residual),
batch 32 x 128 tokens (--batch), compiled at activation_memory_budget 0, 0.5 and 1 with
the installed partitioner and with the fixed one; the two are timed in
alternation in one process. Reported per budget and partitioner: median step
time (forward + backward), the bytes the compiled forward saves for the
backward (what the budget governs; measured with saved_tensors_hooks), peak
memory on CUDA, and whether the gradients used the forward's dropout masks
(the fixed partitioner must always; the installed one does not below 1).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def build(device: str):
    import torch

    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Dropout(0.1),
                   torch.nn.Linear(2048, 512), torch.nn.Dropout(0.1)]
    blocks = torch.nn.ModuleList(torch.nn.Sequential(*layers[i:i + 5]) for i in range(0, len(layers), 5))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = blocks

        def forward(self, x):
            for block in self.blocks:
                x = x + block(x)
            return x

    return Model().to(device)


def saved_bytes(step) -> int:
    import torch

    total = 0

    def pack(t):
        nonlocal total
        total += t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return total


def run(args) -> dict:
    import torch
    import torch._functorch.config as fconfig
    from . import partitioner

    torch._dynamo.config.recompile_limit = 64  # one graph per variant, by design
    fixed = (partitioner.functions_from(args.fixed_source.read_text()) if args.fixed_source
             else partitioner.fixed_functions())
    installed = {"OpTypes.is_random": partitioner.module().OpTypes.is_random,
                 "choose_saved_values_set": partitioner.module().choose_saved_values_set}
    x = torch.randn(args.batch, 128, 512, device=args.device)
    results = {}
    torch._dynamo.reset()
    for budget in args.budgets:
        compiled = {}
        for name, functions in (("installed", installed), ("fixed", fixed)):
            # a model of its own class per variant: dynamo's cache (on the
            # class's forward) cannot hand one variant's graph to another
            model = build(args.device)
            with partitioner.installed(functions), fconfig.patch(activation_memory_budget=budget,
                                                                 enable_autograd_cache=False):
                fn = torch.compile(model, backend=args.backend)
                fn(x).sum().backward()  # forward and backward compiled now, under this partitioner
            compiled[name] = (model, fn)
        times = {name: [] for name in compiled}
        peaks = {name: 0 for name in compiled}
        for _ in range(args.steps):
            for name, (model, fn) in compiled.items():
                model.zero_grad(set_to_none=True)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                start = time.perf_counter()
                fn(x).sum().backward()
                if args.device == "cuda":
                    torch.cuda.synchronize()
                    peaks[name] = max(peaks[name], torch.cuda.max_memory_allocated())
                times[name].append(time.perf_counter() - start)
        row = {}
        for name, (_, fn) in compiled.items():
            row[name] = {"step_ms": round(statistics.median(times[name]) * 1e3, 2),
                         "saved_mb": round(saved_bytes(lambda: fn(x).sum()) / 2**20, 2)}
            if args.device == "cuda":
                row[name]["peak_mb"] = round(peaks[name] / 2**20, 1)
        # last: the probe resets dynamo, which would recompile the models above
        for name, functions in (("installed", installed), ("fixed", fixed)):
            with partitioner.installed(functions):
                row[name]["right"] = partitioner.probe("dropout", budget, backend=args.backend,
                                                     device=args.device)["wrong"] == 0
        row["step_ratio"] = round(row["fixed"]["step_ms"] / row["installed"]["step_ms"], 3)
        results[str(budget)] = row
    return {"torch": torch.__version__, "device": args.device, "batch": args.batch, "backend": args.backend, "steps": args.steps,
            "budgets": results}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--backend", default="inductor")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=32, help="sequences of 128 tokens per step")
    p.add_argument("--budgets", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    p.add_argument("--fixed-source", type=Path, help="partitioners.py already transformed (where libcst is missing)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = run(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"torch {out['torch']}, {out['device']}, {out['backend']}, median of {out['steps']} steps")
    print("budget | partitioner | step ms | saved MB | grads use the forward's masks | step fixed/installed")
    for budget, row in out["budgets"].items():
        for name in ("installed", "fixed"):
            r = row[name]
            ratio = f"{row['step_ratio']:.3f}" if name == "fixed" else ""
            peak = f" (peak {r['peak_mb']} MB)" if "peak_mb" in r else ""
            print(f"{budget} | {name} | {r['step_ms']} | {r['saved_mb']}{peak} | {r['right']} | {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
