"""PyTorch scan: gradients of closed-over parameters lose the carry chain when
the initial carry does not require grad (pytorch/pytorch#184528; fixed in
2.13.0, most likely by #185332).

Declaration only: transform.py, repro.py, hotfix.py, validate.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .transform import TRANSFORM, WHY

TARGET = "torch/_higher_order_ops/scan.py"

_TRACE = ("        graph = HopGraphMinCutPartitioner.create_partitioned_graph(\n"
          "            combine_fn, (*init, *[x[0] for x in xs], *additional_inputs))\n")
_FUNCTION = ("@scan_op.py_autograd_impl\ndef scan_autograd(combine_fn, init, xs, additional_inputs):\n"
             "    with disable_proxy_modes_tracing():\n{body}"
             "    return ScanAutogradOp.apply(graph, *init, *xs, *additional_inputs)\n")
_FIXED = (f"        {WHY}\n"
          "        flipped = [t for t in init if (t.dtype.is_floating_point or t.dtype.is_complex) and not t.requires_grad]\n"
          "        try:\n            for t in flipped:\n                t.requires_grad_(True)\n"
          + "".join("    " + line + "\n" for line in _TRACE.splitlines())
          + "        finally:\n            for t in flipped:\n                t.requires_grad_(False)\n")

CASES = (
    Case("trace from the real init (2.10-2.12)", path=TARGET, before=_FUNCTION.format(body=_TRACE),
         after=_FUNCTION.format(body=_FIXED)),
    Case("init flipped while tracing (2.13+)", expect="already-applied", path=TARGET,
         before=_FUNCTION.format(body="        for t in init:\n            t.requires_grad_(True)\n" + _TRACE)),
    Case("no partitioned graph (2.8, 2.9)", expect="not-applicable", path=TARGET,
         before="def scan_autograd(combine_fn, init, xs, additional_inputs):\n"
                "    return ScanAutogradOp.apply(combine_fn, len(init), *init, *xs)\n"),
    Case("traced twice", expect="failed", path=TARGET, before=_FUNCTION.format(body=_TRACE + _TRACE)),
    Case("the name flipped is taken", expect="failed", path=TARGET,
         before=_FUNCTION.format(body="        flipped = None\n" + _TRACE)),
)

FIX = Fix(
    id="pytorch-scan-closure-grad",
    title="scan: trace the autograd graph with init requiring grad, so closed-over parameters get every step's gradient",
    upstream="pytorch",
    description="""\
torch 2.10-2.12, eager or compiled, any device: scan's autograd traces the
step function's joint graph from the real init tensors. An init that does not
require grad (a zero initial state) is dropped from the graph's gradient
inputs and zero-filled, which cuts the gradient that flows from step to step:
a parameter the step function closes over gets only each step's direct term.
The loss and outputs are right; the gradient is silently wrong. Turn
requires_grad on for those init tensors while tracing and restore it after,
as torch 2.13.0 does.""",
    dep3=Dep3(
        origin="upstream, torch 2.13.0 (https://github.com/pytorch/pytorch/pull/185332, inferred)",
        bug="https://github.com/pytorch/pytorch/issues/184528",
        forwarded="not-needed",
        applied_upstream="https://github.com/pytorch/pytorch/pull/185332",
        last_update="2026-11-24",
    ),
    backends=("cuda", "rocm", "cpu"),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/scan.py", mutate=("scan_autograd",), edit="move")),),
    references=("https://github.com/pytorch/pytorch/issues/184528",
                "https://github.com/pytorch/pytorch/pull/184529",
                "https://github.com/pytorch/pytorch/pull/185332"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="torch._higher_order_ops.scan"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cpu",
    validate=lazy(f"{__package__}.validate:check"),
)
