"""Reproducer: the MoE auxiliary loss computed on softmax(softmax(logits)).

    python -m fixmono.fixes.transformers.moe_router_double_softmax.repro [--json]

With the installed transformers, for each family it can build tiny (mixtral,
qwen2_moe, qwen3_moe, olmoe: one layer, 8 experts, top 2, CPU): a forward
with output_router_logits=True, then (1) do the recorded router_logits rows
sum to 1 (probabilities, the bug) and (2) the gradient of the model's
aux_loss on the router weight against the one load_balancing_loss_func gives
from the raw logits (hidden @ weight.T, captured at the router's input). Then
the same with the hot-fix enabled (the routers' forward rewritten by this fix).
Exit 1 reproduced, 0 not reproduced (this release returns raw logits), 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import cli

RIGHT = 1e-4  # relative gradient error of a correct aux loss (float32 round-off)


def run_families() -> dict[str, dict]:
    import importlib

    from .routers import FAMILIES, check_model

    results = {}
    for family in FAMILIES:
        if not family.model:
            continue
        try:
            module = importlib.import_module(family.module)
        except ImportError:
            continue
        if not any(hasattr(module, name) for name in family.routers):
            continue  # 4.x: no TopKRouter
        results[family.name] = check_model(family)
    return results


def reproduce() -> ReproResult:
    try:
        import torch  # noqa: F401
        import transformers
    except ImportError as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch and transformers: {err}")
    from . import hotfix

    label = f"transformers {transformers.__version__}"
    try:
        before = run_families()
    except Exception as err:  # noqa: BLE001 - a release that cannot build a tiny model here: say why, not a traceback
        return ReproResult(Verdict.SKIPPED, f"{label}: cannot build a tiny model here ({type(err).__name__}: "
                                            f"{str(err).splitlines()[0] if str(err) else ''})")
    if not before:
        return ReproResult(Verdict.SKIPPED, f"{label}: none of mixtral, qwen2_moe, qwen3_moe, olmoe has a TopKRouter "
                                            f"here (4.x routes in the sparse block and returns raw logits)")
    message = hotfix.enable()
    try:
        after = run_families()
    finally:
        hotfix.disable()
    details = {"release": label, "hotfix": message, "unpatched": before, "patched": after}
    wrong = {name: r for name, r in before.items()
             if r["router_logits_rows_sum_to_1"] or r["grad_rel_error"] > RIGHT}
    still = {name: r for name, r in after.items() if r["router_logits_rows_sum_to_1"] or r["grad_rel_error"] > RIGHT}
    if still:
        return ReproResult(Verdict.REPRODUCED, f"{label}: even with the fix, {', '.join(still)} give a wrong "
                                               f"aux-loss gradient", details)
    if not wrong:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: {', '.join(before)} return raw router logits and "
                                                   f"the aux-loss gradient matches the reference", details)
    worst = max(wrong.values(), key=lambda r: r["grad_rel_error"])
    return ReproResult(Verdict.REPRODUCED,
                       f"{label}: {', '.join(wrong)} record probabilities as router_logits (rows sum to 1); the "
                       f"aux-loss gradient on the router weight is off by up to {worst['grad_rel_error']:.0%} "
                       f"(norm {worst['grad_norm_ratio']:.2f}x the reference); with the fix: raw logits, "
                       f"gradient equal", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
