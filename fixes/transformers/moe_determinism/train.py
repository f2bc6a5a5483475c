"""Determinism check on the GPU: short LoRA-style fine-tuning runs, compared.

    python -m fixes.transformers.moe_determinism.train --out DIR [--family qwen3_5_moe] [--steps 20]

Each run is a fresh process: same seed and data, bf16, activation
checkpointing on, LoRA adapters (rank 8) on every Linear but the router and
the LM head, AdamW. Modes: `baseline` (checkpointing only), `pin` (routing
pinned, nothing else) and `recipe` (recipe.enable). Two runs per mode; their
adapter weights are saved as safetensors and compared tensor by tensor
(tools/fixlib/weights.py, the same code as tools/compare_weights). Step times
are medians after 3 warm-up steps.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

MODES = ("baseline", "pin", "recipe")


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int = 8):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.a = nn.Parameter(torch.randn(rank, base.in_features, dtype=base.weight.dtype) * 0.02)
        self.b = nn.Parameter(torch.zeros(base.out_features, rank, dtype=base.weight.dtype))

    def forward(self, x):
        return self.base(x) + (x @ self.a.t()) @ self.b.t()


def add_lora(model) -> int:
    targets = [(name, mod) for name, mod in model.named_modules() if isinstance(mod, nn.Linear)
               and not name.endswith(("gate", "lm_head", "router"))]
    for name, mod in targets:
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        setattr(parent, name.rsplit(".", 1)[-1], LoRALinear(mod))
    return len(targets)


def gpu_config(family: str):
    from fixes.transformers.moe_determinism.models import config

    cfg = config(family)
    cfg.hidden_size, cfg.num_hidden_layers = 256, 4
    if family == "qwen3_5_moe":
        cfg.layer_types = ["linear_attention", "full_attention"] * 2
    return cfg


def run(mode: str, family: str, steps: int, out: Path) -> dict:
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    from fixes.transformers.moe_determinism import recipe
    from fixes.transformers.moe_determinism.models import batch
    from fixes.transformers.moe_determinism.pin import checkpointing_enable, enable_pinned_routing

    torch.manual_seed(0)
    cfg = gpu_config(family)
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).cuda().train()
    model.set_experts_implementation("eager")
    model.requires_grad_(False)
    adapters = add_lora(model)
    model.cuda()
    log = []
    if mode == "recipe":
        log = recipe.enable(model)
    elif mode == "pin":
        log = [enable_pinned_routing(model)]
    else:
        checkpointing_enable(model, {"use_reentrant": False})
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3)
    times, losses = [], []
    for step in range(steps):
        data = {k: v.cuda() for k, v in batch(cfg.vocab_size, seed=step, size=(4, 256)).items()}
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = model(**data).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    state = {n: p.detach().float().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}
    save_file(state, str(out))
    return {"mode": mode, "adapters": adapters, "log": log, "losses": losses,
            "step_ms": 1e3 * statistics.median(times[3:]) if len(times) > 3 else None}


def pin_overhead(family: str, steps: int, hidden: int = 1024, layers: int = 8) -> dict:
    """Step time with and without the pin, one process, steps alternating
    between two identical models, so drift and noise hit both alike."""
    from transformers import AutoModelForCausalLM

    from fixes.transformers.moe_determinism.models import batch, config
    from fixes.transformers.moe_determinism.pin import checkpointing_enable, enable_pinned_routing

    cfg = config(family)
    cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads = hidden, layers, 16, 4
    if hasattr(cfg, "layer_types"):
        cfg.layer_types = (cfg.layer_types * layers)[:layers]
    cfg._attn_implementation = "sdpa"
    models = {}
    for name in ("baseline", "pin"):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).cuda().train()
        model.set_experts_implementation("eager")
        enable_pinned_routing(model) if name == "pin" else checkpointing_enable(model, {"use_reentrant": False})
        models[name] = model
    times = {name: [] for name in models}
    for step in range(steps):
        data = {k: v.cuda() for k, v in batch(cfg.vocab_size, seed=step, size=(4, 1024)).items()}
        order = list(models.items()) if step % 2 == 0 else list(models.items())[::-1]  # no order bias
        for name, model in order:
            torch.cuda.synchronize()
            start = time.perf_counter()
            model(**data).loss.backward()
            torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
            model.zero_grad(set_to_none=True)
    med = {name: 1e3 * statistics.median(t[3:]) for name, t in times.items()}
    return {"family": family, "hidden": hidden, "layers": layers, "step_ms": med,
            "pin_overhead": med["pin"] / med["baseline"] - 1}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--family", default="qwen3_5_moe")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--overhead", action="store_true", help="only measure the pin's step-time overhead")
    p.add_argument("--child", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.overhead:
        result = pin_overhead(args.family, args.steps)
        print(json.dumps(result))
        return 0
    if args.child:
        print(json.dumps(run(args.child[0], args.family, args.steps, Path(args.child[1]))))
        return 0
    if not torch.cuda.is_available():
        print("skipped: needs a GPU")
        return 77
    from tools.fixlib.weights import compare, load, summary

    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for mode in MODES:
        runs = []
        for i in (1, 2):
            file = args.out / f"{args.family}_{mode}_{i}.safetensors"
            cmd = [sys.executable, "-m", "fixes.transformers.moe_determinism.train", "--out", str(args.out),
                   "--family", args.family, "--steps", str(args.steps), "--child", mode, str(file)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
            lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
            if proc.returncode or not lines:
                runs.append({"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]})
                continue
            runs.append(json.loads(lines[-1]))
        ok = all("error" not in r for r in runs)
        diffs = compare(load(args.out / f"{args.family}_{mode}_1.safetensors"),
                        load(args.out / f"{args.family}_{mode}_2.safetensors")) if ok else []
        results[mode] = {"runs": runs, "comparison": summary(diffs) if ok else "run failed",
                         "identical": ok and all(d.equal for d in diffs),
                         "max_abs_delta": max((d.max_abs_delta or 0.0 for d in diffs), default=None),
                         "differing_tensors": sum(not d.equal for d in diffs)}
        print(f"{mode}: {results[mode]['comparison']}; step "
              f"{[r.get('step_ms') for r in runs]} ms; {[r.get('error') for r in runs if 'error' in r]}", flush=True)
    base = statistics.mean(r["step_ms"] for r in results["baseline"]["runs"] if r.get("step_ms"))
    for mode in ("pin", "recipe"):
        ms = [r["step_ms"] for r in results[mode]["runs"] if r.get("step_ms")]
        if ms:
            results[mode]["cost_vs_baseline"] = statistics.mean(ms) / base - 1
            print(f"{mode}: step time {100 * results[mode]['cost_vs_baseline']:+.1f}% vs baseline")
    (args.out / "determinism.json").write_text(json.dumps(results, indent=1))
    return 0 if results["recipe"]["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
