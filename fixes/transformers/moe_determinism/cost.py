"""Where the recipe's step time goes, and whether each part is needed (GPU).

    python -m fixmono.fixes.transformers.moe_determinism.cost --config A --rounds 30 --out FILE [--profile]

One process, one model (train.py's named configurations). The recipe's parts are
switched on and off between steps, so every variant runs on the same weights,
batch, GPU clocks and allocator state:

  determinism  torch.use_deterministic_algorithms + cuDNN deterministic
  pin          pinned routing (checkpointing's context_fn); off: plain non-reentrant checkpointing
  conv1d       the fixed-order causal conv1d (conv1d.py)
  attention    SDPA limited to the backend attention.select() verified
  experts      sorted grouped-GEMM experts with no index accumulation (experts.py)
  fill-off     torch's NaN fill of new memory under determinism off (fill_uninitialized_memory)

Each round runs every variant once (forward + backward, CUDA events), in a new
random order; a variant's cost is the mean over rounds of its step time divided by
the baseline's in the same round, with a 95% interval (t distribution). Each
variant is also run twice on one batch and its trainable gradients compared
bitwise ("differing"). CUBLAS_WORKSPACE_CONFIG=:4096:8 is set for the whole
process (cuBLAS reads it once; deterministic mode requires it), so the baseline
runs with it too; `--profile` adds torch.profiler's top ops, self CUDA time, for
the baseline and the recipe.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import statistics
import sys
from pathlib import Path

PARTS = ("determinism", "pin", "conv1d", "attention", "experts", "fill-off")
RECIPE_BEFORE = frozenset(PARTS) - {"experts", "fill-off"}  # what recipe.enable did before issue 15


def variants() -> dict[str, frozenset]:
    full = frozenset(PARTS)
    named = {"baseline": frozenset(), "recipe": full, "recipe before issue 15": RECIPE_BEFORE,
             "pin only": frozenset({"pin"}), "experts only": frozenset({"experts"})}
    named.update({f"recipe without {part}": full - {part} for part in PARTS})
    return named


# two-sided 95% t quantiles by degrees of freedom; 1.96 beyond
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18,
         15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04, 40: 2.02, 60: 2.00, 120: 1.98}


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval."""
    n = len(values)
    if n < 2:
        return (values[0] if values else math.nan), math.nan
    df = n - 1
    q = next((_T975[d] for d in sorted(_T975) if d >= df), 1.96)  # the next tabulated df: slightly wide
    return statistics.mean(values), q * statistics.stdev(values) / math.sqrt(n)


class Switches:
    """The recipe's parts on one model, switchable between steps."""

    def __init__(self, model, choice=None):
        from . import attention

        self.model, self.on = model, None
        self.choice = choice or attention.select()

    def set(self, parts: frozenset) -> None:
        import torch

        from . import attention, conv1d, experts
        from .pin import checkpointing_enable, enable_pinned_routing

        if parts == self.on:
            return
        torch.use_deterministic_algorithms("determinism" in parts)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = "determinism" in parts, False
        torch.utils.deterministic.fill_uninitialized_memory = "fill-off" not in parts
        enable_pinned_routing(self.model) if "pin" in parts else checkpointing_enable(self.model, {"use_reentrant": False})
        conv1d.enable(self.model) if "conv1d" in parts else conv1d.disable()
        if "attention" in parts:
            attention.enable(self.model, self.choice)
        else:
            attention.disable()
            self.model.set_attn_implementation("sdpa")
        experts.enable(self.model) if "experts" in parts else experts.disable(self.model)
        self.on = parts


def step_ms(model, data) -> float:
    import torch

    gc.collect()  # a collection inside one variant's step would be charged to it
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    model(**data).loss.backward()
    end.record()
    end.synchronize()
    model.zero_grad(set_to_none=True)
    return start.elapsed_time(end)


def differing_grads(model, data) -> tuple[int, int, bool]:
    """Two forward+backward passes on one batch: (tensors whose gradient differs, tensors, losses equal)."""
    runs = []
    for _ in range(2):
        loss = model(**data).loss
        loss.backward()
        runs.append((loss.detach().clone(), [p.grad.clone() for p in model.parameters() if p.requires_grad]))
        model.zero_grad(set_to_none=True)
    (loss1, g1), (loss2, g2) = runs
    import torch

    return sum(not torch.equal(a, b) for a, b in zip(g1, g2)), len(g1), bool(torch.equal(loss1, loss2))


def profile_top(model, data, top: int) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step_ms(model, data)
    rows = [e for e in prof.key_averages() if e.device_type.name == "CPU" and e.self_device_time_total > 0]
    total = sum(e.self_device_time_total for e in rows)
    rows.sort(key=lambda e: -e.self_device_time_total)
    return {"gpu_ms": total / 1e3,
            "top": [{"op": e.key, "ms": e.self_device_time_total / 1e3, "calls": e.count} for e in rows[:top]]}


def pin_calls(model, switches, data, iters: int = 200) -> dict:
    """The pin's own work, timed call by call: what a recorded top-k (forward) and a replayed one
    (recompute) cost over a plain torch.topk of the router's shape, each with its context's
    enter and exit, times the calls in one recipe step, as a share of the recipe's step time."""
    import time

    import torch

    from . import pin

    shapes = []
    original = pin.PinnedTopK.topk

    def counting(self, input, k, *args, **kwargs):
        shapes.append((tuple(input.shape), k, self.replay))
        return original(self, input, k, *args, **kwargs)

    switches.set(variants()["recipe"])
    pin.PinnedTopK.topk = counting
    try:
        recipe_ms = step_ms(model, data)
    finally:
        pin.PinnedTopK.topk = original
    (shape, k, _), = set((s, k, False) for s, k, _ in shapes)  # one router shape per config
    probs = torch.rand(shape, device="cuda").softmax(-1)

    def per_call_us(fn) -> float:
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        return 1e6 * (time.perf_counter() - start) / iters

    store: list = []

    def record():
        with pin.PinnedTopK(store, replay=False):
            torch.topk(probs, k, dim=-1)
        store.clear()

    recorded = [probs.topk(k).indices]

    def replay():
        with pin.PinnedTopK(recorded, replay=True):
            torch.topk(probs, k, dim=-1)

    plain_us = per_call_us(lambda: torch.topk(probs, k, dim=-1))
    record_us, replay_us = per_call_us(record), per_call_us(replay)
    calls = {"forward": sum(not r for *_, r in shapes), "recompute": sum(r for *_, r in shapes)}
    added_ms = 1e-3 * (calls["forward"] * (record_us - plain_us) + calls["recompute"] * (replay_us - plain_us))
    return {"router_shape": shape, "k": k, "calls_per_step": calls, "plain_topk_us": plain_us,
            "recorded_us": record_us, "replayed_us": replay_us, "added_ms_per_step": added_ms,
            "recipe_step_ms": recipe_ms, "share_of_step": added_ms / recipe_ms}


def build(config: str):
    import torch
    from transformers import AutoModelForCausalLM

    from .train import CONFIGS, gpu_config, make_trainable

    spec = CONFIGS[config]
    torch.manual_seed(0)
    cfg = gpu_config("qwen3_5_moe", config)
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).cuda().train()
    model.set_experts_implementation(spec["experts"])
    make_trainable(model, spec["trained"])
    return model.cuda(), cfg, spec


def run(config: str, rounds: int, names: list[str], profile: bool, warmup: int = 2) -> dict:
    import torch

    from .models import batch

    model, cfg, spec = build(config)
    switches = Switches(model)
    chosen = {name: variants()[name] for name in names}
    data = [{k: v.cuda() for k, v in batch(cfg.vocab_size, seed=s, size=spec["batch"]).items()} for s in range(2)]
    result = {"config": config, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "attention_choice": switches.choice.name, "rounds": rounds, "variants": {}}
    for name, parts in chosen.items():  # warm-up (autotuning, allocator) and the determinism check
        switches.set(parts)
        for _ in range(warmup):
            step_ms(model, data[0])
        differ, tensors, losses_equal = differing_grads(model, data[1])
        result["variants"][name] = {"parts": sorted(parts), "differing": differ, "tensors": tensors,
                                    "losses_equal": losses_equal, "ms": []}
        print(f"{name}: {differ}/{tensors} gradients differ between two passes", flush=True)
    order = random.Random(0)
    for r in range(rounds):
        names_now = list(chosen)
        order.shuffle(names_now)
        for name in names_now:
            switches.set(chosen[name])
            result["variants"][name]["ms"].append(step_ms(model, data[r % 2]))
    base = result["variants"]["baseline"]["ms"]
    for name, row in result["variants"].items():
        mean, half = mean_ci([t / b - 1 for t, b in zip(row["ms"], base)])
        row.update(mean_ms=statistics.mean(row["ms"]), cost=mean, cost_ci95=half)
        print(f"{name}: {row['mean_ms']:.1f} ms, {100 * mean:+.1f}% +- {100 * half:.1f}% vs baseline; "
              f"{row['differing']}/{row['tensors']} differ", flush=True)
    result["pin_calls"] = pin_calls(model, switches, data[0])
    if profile:
        result["profile"] = {}
        for name in ("baseline", "recipe"):
            switches.set(chosen[name])
            result["profile"][name] = profile_top(model, data[0], top=15)
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="A", help="a train.py configuration: A, A-grouped, B, C, tiny")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--variants", default=",".join(variants()), help="comma-separated; baseline is always run")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("skipped: needs a GPU")
        return 77
    names = ["baseline"] + [n for n in args.variants.split(",") if n and n != "baseline"]
    unknown = [n for n in names if n not in variants()]
    if unknown:
        print(f"cost: unknown variant(s) {', '.join(unknown)}; known: {', '.join(variants())}", file=sys.stderr)
        return 2
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    result = run(args.config, args.rounds, names, args.profile)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
