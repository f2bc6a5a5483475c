"""Reproducer: the router's gradient at expert-parallel sentinel slots.

    python -m fixmono.fixes.transformers.moe_sentinel_router_grad.repro [--version 5.17.0] [--json]

Runs `batched_mm_experts_forward` (the "batched_mm" experts implementation)
on the CPU, in one process, as one expert-parallel rank sees it: 4 local
experts, every other token's second expert on another rank (sentinel id 4,
routing weight 0, as the EP dispatcher leaves it). Backpropagates and reads
the gradient of the routing weights: at sentinel slots it must be exactly 0
(the token never went to that expert), at routed slots non-zero. Then the
same with the fix applied. The function is the installed transformers' or,
with --version, that release's (its moe.py read from the published wheel and
defined with the installed module's helpers). Multi-GPU expert parallelism
itself is not run: what reaches the router is this gradient.
Exit 1 reproduced, 0 not reproduced (that version has the fix), 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import cli

LAST_AFFECTED = "5.17.0"


def reproduce(version: str | None = None) -> ReproResult:
    try:
        import transformers
        from . import experts
        from fixmono.runtime.define import module_source
        text = module_source(experts.MODULE)
    except (ImportError, AttributeError) as err:
        return ReproResult(Verdict.SKIPPED, f"needs transformers with integrations.moe: {err}")
    label = f"transformers {transformers.__version__} (installed)"
    if version:
        from fixmono.model.errors import UserError
        from fixmono.sources.open import open_upstream
        try:
            data = open_upstream(f"pip:transformers=={version}").read(experts.TARGET)
        except UserError as err:
            return ReproResult(Verdict.SKIPPED, f"cannot read transformers {version}: {err}")
        if data is None:
            return ReproResult(Verdict.SKIPPED, f"transformers {version} has no {experts.TARGET}")
        text, label = data.decode(), f"transformers {version} (its moe.py, from the wheel)"
    from fixmono.model.errors import NotApplicable
    try:
        before = experts.run_case(experts.function_from(text))
        after = experts.run_case(experts.fixed_function(text))
    except NotApplicable as err:
        return ReproResult(Verdict.SKIPPED, f"{label}: {err}")
    except (IndexError, RuntimeError) as err:  # 5.0: sentinel ids not handled at all
        return ReproResult(Verdict.SKIPPED, f"{label}: sentinel ids fail outright ({err}); another bug")
    details = {"function_of": label, "unpatched": before, "patched": after}
    if not after["right"]:
        return ReproResult(Verdict.REPRODUCED, f"{label}: even the patched function leaks gradient", details)
    if before["right"]:
        hint = "" if version else f"; the last affected release: --version {LAST_AFFECTED}"
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: routing-weight gradient 0 at sentinel slots "
                                                   f"without the patch (it has the fix){hint}", details)
    return ReproResult(Verdict.REPRODUCED,
                       f"{label}: routing-weight gradient up to {before['sentinel_grad_max']:.3g} at "
                       f"{before['sentinel_slots']} sentinel slots (should be 0); patched: 0 there, routed slots "
                       f"unchanged", details, needs="several GPUs for expert parallelism itself")


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, options=(("--version", "a published transformers release to take the function from"),))


if __name__ == "__main__":
    sys.exit(main())
