"""Reproducer: the memory-budget partitioner recomputes dropout's randomness.

    python -m fixmono.fixes.pytorch.memory_budget_rng.repro [--json]

Compiles `y = r * x * w` (r: dropout's mask, and r from multinomial, an RNG
op outside the partitioner's list of three) with torch.compile
(aot_eager_decomp_partition: the partitioner inductor uses, without a C
compiler) at activation_memory_budget 0, 0.5 and 1, with the installed
partitioner and with the fixed one. x = w = 1, so y is the forward's r and
x.grad is the r the backward used: every element where they differ is a
wrong gradient. Runs on the CPU (the partitioner is device-independent).
Exit 1 reproduced, 0 not reproduced (this torch has the fix), 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import cli

OPS = ("dropout", "multinomial")
BUDGETS = (0.0, 0.5, 1.0)


def measure(functions: dict | None) -> list[dict]:
    from . import partitioner

    def run():
        return [partitioner.probe(op, budget) for op in OPS for budget in BUDGETS]

    if functions is None:
        return run()
    with partitioner.installed(functions):
        return run()


def reproduce() -> ReproResult:
    from fixmono.model.errors import TransformFailed

    try:
        import torch
        from . import partitioner
        partitioner.module()
    except (ImportError, AttributeError) as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch with torch._functorch.partitioners: {err}")
    try:
        fixed, unfixable = partitioner.fixed_functions(), ""
    except TransformFailed as err:  # torch 2.4-2.7: no MUST_SAVE filter, the fix's third site
        fixed, unfixable = None, str(err)
    before = measure(None)
    after = measure(fixed) if fixed is not None else None
    details = {"torch": torch.__version__, "unpatched": before, "patched": after, "unfixable": unfixable}
    where = f"torch {torch.__version__}, CPU, {partitioner.N} elements"
    bad = [r for r in before if r["wrong"]]
    if after is not None and any(r["wrong"] for r in after):
        return ReproResult(Verdict.REPRODUCED, f"{where}: even the fixed partitioner gives wrong gradients", details)
    if not bad:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{where}: gradients right at every budget without the patch "
                                                   f"(this torch has the fix)", details)
    shown = ", ".join(f"{r['op']} at budget {r['budget']:g}: {r['wrong']}" for r in bad)
    patched = f"the fix does not apply here ({unfixable})" if after is None else "patched: 0 at every budget"
    return ReproResult(Verdict.REPRODUCED, f"{where}: wrong gradient elements ({shown}) of {partitioner.N}; "
                                           f"{patched}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
