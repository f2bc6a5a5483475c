"""Reproducer: scan's gradient for a parameter its step function closes over.

    python -m fixmono.fixes.pytorch.scan_closure_grad.repro [--json]

CPU, eager: `scan(step, init, xs)` with `step(carry, x) = (a * carry + x, ...)`
where `a` is a closed-over parameter and `init` does not require grad (a
zero initial state, the usual case); the gradient of a loss on the outputs
with respect to `a`, against the same recurrence run as a Python loop. Then
the same with the hot-fix enabled (scan_autograd rewritten by this fix).
Exit 1 reproduced, 0 not reproduced, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import cli

RIGHT = 1e-5


def relative_error() -> float:
    import torch
    from torch._higher_order_ops.scan import scan

    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.tensor([0.9, 0.5, -0.3]))
    xs = torch.randn(6, 3)
    init = torch.zeros(3)  # does not require grad

    def step(carry, x):
        new = a * carry + x
        return new, new.clone()

    _, ys = scan(step, init, xs)
    (got,) = torch.autograd.grad((ys * ys).sum(), a)
    carry, outs = init, []
    for x in xs:
        carry = a * carry + x
        outs.append(carry)
    (want,) = torch.autograd.grad((torch.stack(outs) ** 2).sum(), a)
    return float((got - want).norm() / want.norm())


def reproduce() -> ReproResult:
    try:
        import torch
        from torch._higher_order_ops.scan import scan  # noqa: F401
    except ImportError as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch with torch._higher_order_ops.scan: {err}")
    from . import hotfix

    label = f"torch {torch.__version__}"
    before = relative_error()
    message = hotfix.enable()
    try:
        after = relative_error()
    finally:
        hotfix.disable()
    details = {"release": label, "hotfix": message, "unpatched_rel_error": before, "patched_rel_error": after}
    if after > RIGHT and not message.startswith("enabled"):  # 2.8/2.9: the bug in older code, no site for this fix
        return ReproResult(Verdict.REPRODUCED, f"{label}: scan's gradient of the closed-over parameter is off by "
                                               f"{before:.1%} from the loop's; this fix cannot be applied here "
                                               f"({message})", details)
    if after > RIGHT:
        return ReproResult(Verdict.REPRODUCED, f"{label}: even with the fix the gradient is off by {after:.1%}", details)
    if before <= RIGHT:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: scan's gradient of the closed-over parameter equals "
                                                   f"the loop's", details)
    return ReproResult(Verdict.REPRODUCED, f"{label}: scan's gradient of the closed-over parameter is off by "
                                           f"{before:.1%} from the loop's (init without requires_grad); with the "
                                           f"fix equal ({after:.1g})", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
