"""Determinism check on the GPU: short LoRA-style fine-tuning runs, compared.

    python -m fixmono.fixes.transformers.moe_determinism.train --out DIR [--config A,B,C] [--steps 20]
    python -m fixmono.fixes.transformers.moe_determinism.train --out DIR --report   # DIR/determinism.md again

Each run is a fresh process: same seed and data, bf16, activation
checkpointing on, LoRA adapters (rank 8) on every Linear but the router and
the LM head, AdamW. Modes: `baseline` (checkpointing only), `pin` (routing
pinned, nothing else) and `recipe` (recipe.enable). Two runs per mode; their
adapter weights are saved as safetensors and compared tensor by tensor
(fixmono/bench/weights.py, the same code as tools/compare_weights). Step times
are medians after 3 warm-up steps.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

from fixmono.runtime.child import child_env, module_command

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


# Named configurations (issue 15): "tiny" is the first GPU check's; A-C are realistic sizes.
# family, batch (sequences, tokens), trained ("lora": rank-8 adapters; "full": all but
# embeddings and head), experts implementation, and the config changes.
_QWEN_A = dict(vocab_size=32000, hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
               num_key_value_heads=4, head_dim=128, num_experts=32, num_experts_per_tok=8,
               moe_intermediate_size=512, shared_expert_intermediate_size=512, linear_key_head_dim=128,
               linear_value_head_dim=128, linear_num_key_heads=8, linear_num_value_heads=16,
               layer_types=["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3
               + ["full_attention"], max_position_embeddings=4096)
CONFIGS = {
    "tiny": dict(family=None, batch=(4, 256), trained="lora", experts="eager", changes=None),
    "A": dict(family="qwen3_5_moe", batch=(4, 2048), trained="lora", experts="eager", changes=_QWEN_A),
    "A-grouped": dict(family="qwen3_5_moe", batch=(4, 2048), trained="lora", experts="grouped_mm", changes=_QWEN_A),
    "B": dict(family="qwen3_5_moe", batch=(4, 2048), trained="full", experts="eager", changes=_QWEN_A),
    "C": dict(family="mixtral", batch=(4, 4096), trained="lora", experts="eager",
              changes=dict(vocab_size=32000, hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                           num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2,
                           intermediate_size=2048, max_position_embeddings=8192)),
}


def gpu_config(family: str, name: str = "tiny"):
    from .models import config

    spec = CONFIGS[name]
    cfg = config(spec["family"] or family)
    if spec["changes"] is None:
        cfg.hidden_size, cfg.num_hidden_layers = 256, 4
        if (spec["family"] or family) == "qwen3_5_moe":
            cfg.layer_types = ["linear_attention", "full_attention"] * 2
    else:
        for key, value in spec["changes"].items():
            setattr(cfg, key, value)
    return cfg


def make_trainable(model, trained: str) -> int:
    """LoRA adapters, or every parameter but the embeddings and the head; returns how many tensors train."""
    if trained == "lora":
        model.requires_grad_(False)
        add_lora(model)
    else:
        model.requires_grad_(True)
        for module in (model.get_input_embeddings(), model.get_output_embeddings()):
            module.requires_grad_(False)
    return sum(p.requires_grad for p in model.parameters())


def run(mode: str, family: str, steps: int, out: Path, name: str = "tiny") -> dict:
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    from . import recipe
    from .models import batch
    from .pin import checkpointing_enable, enable_pinned_routing

    spec = CONFIGS[name]
    torch.manual_seed(0)
    cfg = gpu_config(family, name)
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).cuda().train()
    model.set_experts_implementation(spec["experts"])
    adapters = make_trainable(model, spec["trained"])
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
        data = {k: v.cuda() for k, v in batch(cfg.vocab_size, seed=step, size=spec["batch"]).items()}
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
    return {"mode": mode, "config": name, "trainable_tensors": adapters, "log": log, "losses": losses,
            "step_ms": 1e3 * statistics.median(times[3:]) if len(times) > 3 else None}


def pin_overhead(family: str, steps: int, hidden: int = 1024, layers: int = 8) -> dict:
    """Step time with and without the pin, one process, steps alternating
    between two identical models, so drift and noise hit both alike."""
    from transformers import AutoModelForCausalLM

    from .models import batch, config
    from .pin import checkpointing_enable, enable_pinned_routing

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
    p.add_argument("--family", default="qwen3_5_moe", help="for --config tiny")
    p.add_argument("--config", default="tiny", help="named size(s), comma-separated: " + ", ".join(CONFIGS)
                   + " (A-C: issue 15's)")
    p.add_argument("--report", action="store_true", help="only write DIR/determinism.md from DIR's results")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--overhead", action="store_true", help="only measure the pin's step-time overhead")
    p.add_argument("--child", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = [n for n in args.config.split(",") if n]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown or not names:
        p.error(f"--config: unknown {', '.join(unknown) or 'nothing'}; known: {', '.join(CONFIGS)}")
    if args.report:
        print(write_report(args.out))
        return 0
    if args.overhead:
        result = pin_overhead(args.family, args.steps)
        print(json.dumps(result))
        return 0
    if args.child:
        print(json.dumps(run(args.child[0], args.family, args.steps, Path(args.child[1]), args.config)))
        return 0
    if not torch.cuda.is_available():
        print("skipped: needs a GPU")
        return 77
    args.out.mkdir(parents=True, exist_ok=True)
    identical = [compare_modes(args, name) for name in names]
    print(write_report(args.out))
    return 0 if all(identical) else 1


def compare_modes(args, config: str) -> bool:
    """Two fresh processes per mode for one configuration; True when the recipe's runs are identical."""
    from fixmono.bench.weights import compare, load, summary

    args = argparse.Namespace(**{**vars(args), "config": config})
    results = {}
    modes = [m for m in args.modes.split(",") if m in MODES]
    tag = args.family if args.config == "tiny" else args.config
    for mode in modes:
        runs = []
        for i in (1, 2):
            file = args.out / f"{tag}_{mode}_{i}.safetensors"
            cmd = module_command(f"{__package__}.train", "--out", str(args.out),
                   "--family", args.family, "--config", args.config, "--steps", str(args.steps),
                                 "--child", mode, str(file))
            proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
            lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
            if proc.returncode or not lines:
                runs.append({"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]})
                continue
            runs.append(json.loads(lines[-1]))
        ok = all("error" not in r for r in runs)
        diffs = compare(load(args.out / f"{tag}_{mode}_1.safetensors"),
                        load(args.out / f"{tag}_{mode}_2.safetensors")) if ok else []
        results[mode] = {"runs": runs, "comparison": summary(diffs) if ok else "run failed",
                         "identical": ok and all(d.equal for d in diffs),
                         "max_abs_delta": max((d.max_abs_delta or 0.0 for d in diffs), default=None),
                         "differing_tensors": sum(not d.equal for d in diffs) if ok else None}
        print(f"{mode}: {results[mode]['comparison']}; step "
              f"{[r.get('step_ms') for r in runs]} ms; {[r.get('error') for r in runs if 'error' in r]}", flush=True)
    base_ms = [r["step_ms"] for r in results.get("baseline", {}).get("runs", []) if r.get("step_ms")]
    base = statistics.mean(base_ms) if base_ms else None
    for mode in [m for m in ("pin", "recipe") if m in results and base]:
        ms = [r["step_ms"] for r in results[mode]["runs"] if r.get("step_ms")]
        if ms:
            results[mode]["cost_vs_baseline"] = statistics.mean(ms) / base - 1
            print(f"{mode}: step time {100 * results[mode]['cost_vs_baseline']:+.1f}% vs baseline")
    (args.out / f"determinism_{tag}.json").write_text(json.dumps(results, indent=1))
    return results.get("recipe", {}).get("identical", True)


def write_report(out: Path) -> str:
    """DIR/determinism.md from every determinism_*.json in DIR: per configuration and mode, the
    tensors differing between the two runs and the step times; then every step's loss of every run."""
    lines = ["| config | mode | run 1 vs run 2: tensors differing | max abs delta | step ms (run 1, run 2) |",
             "|---|---|---|---|---|"]
    losses = []
    for file in sorted(out.glob("determinism_*.json")):
        tag = file.stem.removeprefix("determinism_")
        results = json.loads(file.read_text())
        for mode, row in results.items():
            runs = row["runs"]
            ms = ", ".join(f"{r['step_ms']:.0f}" if r.get("step_ms") else r.get("error", "?")[:60] for r in runs)
            tensors = runs[0].get("trainable_tensors", "?")
            differing = "run failed" if row["differing_tensors"] is None else f"{row['differing_tensors']}/{tensors}"
            lines.append(f"| {tag} | {mode} | {differing} | {row['max_abs_delta']} | {ms} |")
        columns = [(mode, i, r["losses"]) for mode, row in results.items() for i, r in enumerate(row["runs"], 1)
                   if "losses" in r]
        if columns:
            losses += ["", f"Losses per step, configuration {tag} (a run's loss in bold where it differs from its "
                       "mode's other run):", "",
                       "| step | " + " | ".join(f"{mode} {i}" for mode, i, _ in columns) + " |",
                       "|---" * (len(columns) + 1) + "|"]
            for step in range(max(len(c[2]) for c in columns)):
                cells = []
                for mode, i, values in columns:
                    other = next((v for m, j, v in columns if m == mode and j != i), values)
                    value = values[step] if step < len(values) else None
                    text = "" if value is None else f"{value:.6f}"
                    differs = value is not None and step < len(other) and other[step] != value
                    cells.append(f"**{text}**" if differs else text)
                losses.append(f"| {step + 1} | " + " | ".join(cells) + " |")
    text = "\n".join(lines + losses) + "\n"
    (out / "determinism.md").write_text(text)
    return text


if __name__ == "__main__":
    sys.exit(main())
