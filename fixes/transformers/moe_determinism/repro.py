"""Reproducer (CPU): routing flips between forward and recompute under gradient checkpointing.

    python -m fixmono.fixes.transformers.moe_determinism.repro [--families qwen3_5_moe,mixtral,deepseek_v3] [--json]

For tiny random MoE models built from transformers configs (Qwen3.5-MoE,
Mixtral, DeepSeek-V3 with its group-limited sigmoid router), with eager and
grouped_mm experts, three runs of one forward+backward with non-reentrant
checkpointing:
  baseline  no drift
  drift     RecomputeRoutingDrift, a fault-injecting double of bf16 drift that
            flips the top-k choice in the recompute only
  pinned    the same drift with routing pinned (pin.py)
Expected, and what the verdict checks: drift raises CheckpointError with eager
experts and silently changes routing with grouped_mm (detected by
RoutingRecorder); pinned runs, with gradients bitwise equal to the baseline.
The real drift needs ROCm and bf16 (non-deterministic conv1d, attention
backward and GEMMs): this shows the mechanism and the fix, not the hardware.
"""
from __future__ import annotations

import argparse
import sys

import torch

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import report
from .inject import RecomputeRoutingDrift, RoutingRecorder
from .models import FAMILIES, batch, config, tiny_model
from .pin import checkpointing_enable, enable_pinned_routing

EXPERTS = ("eager", "grouped_mm")


def step(family: str, experts: str, drift: bool, pin: bool) -> dict:
    model = tiny_model(family, experts)
    if pin:
        enable_pinned_routing(model)
    else:
        checkpointing_enable(model, {"use_reentrant": False})
    recorder, drifter = RoutingRecorder(), RecomputeRoutingDrift()
    try:
        with recorder:
            if drift:
                with drifter:
                    model(**batch()).loss.backward()
            else:
                model(**batch()).loss.backward()
    except torch.utils.checkpoint.CheckpointError as err:
        return {"error": str(err).splitlines()[0]}
    changed, calls = recorder.changed_decisions()
    return {"error": None, "changed_calls": changed, "calls": calls, "flipped_tokens": drifter.flipped,
            "grads": {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}}


def run_family(family: str, experts: str) -> dict:
    base, drift, pinned = (step(family, experts, d, p) for d, p in ((False, False), (True, False), (True, True)))
    out = {"family": family, "experts": experts, "baseline_error": base["error"], "drift_error": drift["error"],
           "drift_changed_calls": drift.get("changed_calls"), "pinned_error": pinned["error"]}
    if not base["error"] and not pinned["error"]:
        differing = [n for n in base["grads"] if not torch.equal(base["grads"][n], pinned["grads"][n])]
        out.update(pinned_grads_equal=not differing, grads_compared=len(base["grads"]), differing=differing[:5])
    return out


def judge(row: dict) -> tuple[bool, bool]:
    """(bug shown without the pin, fix works with it)."""
    shown = bool(row["drift_error"]) or bool(row["drift_changed_calls"])
    fixed = not row["baseline_error"] and not row["pinned_error"] and row.get("pinned_grads_equal", False)
    return shown, fixed


def describe(row: dict) -> str:
    without = ("CheckpointError" if row["drift_error"] else
               f"routing silently changed in {row['drift_changed_calls']} top-k calls" if row["drift_changed_calls"]
               else "no effect")
    with_pin = ("grads bitwise = baseline" if row.get("pinned_grads_equal") else
                f"FAILED ({row['pinned_error'] or row.get('differing')})")
    return f"{row['family']}/{row['experts']}: drift -> {without}; pinned -> {with_pin}"


def missing(family: str) -> str | None:
    """The name this transformers lacks to build `family` (Qwen3.5-MoE came in 5.2.0), or None."""
    try:
        config(family)
    except ImportError as err:  # "cannot import name 'Qwen3_5MoeTextConfig' from 'transformers' (...)"
        quoted = str(err).split("'")
        return quoted[1] if len(quoted) > 1 else str(err)
    return None


def reproduce(families: tuple[str, ...] = FAMILIES) -> ReproResult:
    import transformers

    absent = {f: name for f in families if (name := missing(f))}
    families = tuple(f for f in families if f not in absent)
    if not families:
        return ReproResult(Verdict.SKIPPED, f"transformers {transformers.__version__} has none of the families "
                                            f"({', '.join(f'{f}: no {n}' for f, n in absent.items())})")
    rows = [run_family(f, e) for f in families for e in EXPERTS]
    verdicts = [judge(r) for r in rows]
    text = "; ".join(describe(r) for r in rows)
    if absent:  # a release older than the model: the others still show the mechanism
        text += "; not in transformers " + transformers.__version__ + ": " + ", ".join(
            f"{f} (no {n})" for f, n in absent.items())
    label = "[RecomputeRoutingDrift: fault-injecting double of bf16 drift, CPU]"
    details = {"rows": rows, "families_absent": absent}
    if all(shown and fixed for shown, fixed in verdicts):
        return ReproResult(Verdict.REPRODUCED, f"{label} {text}", details,
                           needs="ROCm + bf16 for the real drift (non-deterministic conv1d/attention/GEMM)")
    return ReproResult(Verdict.NOT_REPRODUCED, f"{label} not every case behaved as expected: {text}", details)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    return report(reproduce(tuple(args.families.split(","))), args.json)


if __name__ == "__main__":
    sys.exit(main())
