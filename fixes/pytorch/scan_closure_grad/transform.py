"""The fix that shipped in torch 2.13.0 for pytorch/pytorch#184528, as a libcst
transformation of torch/_higher_order_ops/scan.py, `scan_autograd`: the scan's
joint graph is traced from the real init tensors, and an init that does not
require grad is dropped from the graph's gradient inputs and zero-filled. That
cuts the carry chain in the backward scan: parameters the step function closes
over (additional_inputs) keep only each step's direct term, not the gradient
that flows through later steps. The loss and the outputs are right. 2.10-2.12.

The tracing call is wrapped as upstream did: the floating/complex init tensors
that do not require grad get requires_grad on for the trace and back off in a
`finally`. Presence check: `requires_grad_` called in scan_autograd. Before
2.10 scan_autograd has no partitioned graph (the bug lives elsewhere there):
no anchor.
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import LinePlanTransformer, PythonTransform, dotted_name, find_all

FUNCTION = "scan_autograd"
FLIPPED = "flipped"
WHY = ("# an init that does not require grad is dropped from the joint graph's grad inputs and zero-filled,"
       " which cuts the carry chain: trace with requires_grad on, then restore (pytorch/pytorch#184528)")


def traces_partitioned_graph(line: cst.SimpleStatementLine) -> str | None:
    """`x = <...>.create_partitioned_graph(fn, (*<init>, ...), ...)` -> the init's name."""
    stmt = line.body[0] if len(line.body) == 1 else None
    if not isinstance(stmt, (cst.Assign, cst.AnnAssign)) or stmt.value is None:
        return None
    calls = [c for c in find_all(stmt.value, cst.Call) if (dotted_name(c.func) or "").endswith("create_partitioned_graph")]
    if len(calls) != 1 or len(calls[0].args) < 2 or not isinstance(calls[0].args[1].value, cst.Tuple):
        return None
    first = calls[0].args[1].value.elements[0] if calls[0].args[1].value.elements else None
    if isinstance(first, cst.StarredElement) and isinstance(first.value, cst.Name):
        return first.value.value
    return None


class TraceWithInitRequiringGrad(LinePlanTransformer):
    mentioning = rf"\b{FUNCTION}\b"

    def targets(self, qualname: str) -> bool:
        return qualname == FUNCTION

    def plan(self, function: cst.FunctionDef) -> dict:
        traces = [(line, init) for line in find_all(function, cst.SimpleStatementLine)
                  if (init := traces_partitioned_graph(line))]
        if not traces:
            return {}  # no partitioned graph traced here (before 2.10): not this code
        self.anchors += 1
        if any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "requires_grad_"
               for c in find_all(function, cst.Call)):
            self.found("init traced with requires_grad")
            return {}
        if len(traces) != 1:
            self.problems.append(f"{FUNCTION}: {len(traces)} traces of the partitioned graph, expected one")
            return {}
        if any(n.value == FLIPPED for n in find_all(function, cst.Name)):
            self.problems.append(f"{FUNCTION}: the name {FLIPPED} is taken")
            return {}
        line, init = traces[0]
        self.change("init traced with requires_grad")
        head = cst.parse_statement(
            f"{FLIPPED} = [t for t in {init} if (t.dtype.is_floating_point or t.dtype.is_complex) "
            f"and not t.requires_grad]\n")
        guarded = cst.parse_statement(
            f"try:\n    for t in {FLIPPED}:\n        t.requires_grad_(True)\n    pass\n"
            f"finally:\n    for t in {FLIPPED}:\n        t.requires_grad_(False)\n")
        body = list(guarded.body.body)
        body[-1] = line.with_changes(leading_lines=[])  # the trace itself, in place of `pass`
        guarded = guarded.with_changes(body=guarded.body.with_changes(body=body))
        return {line: [head.with_changes(leading_lines=[*line.leading_lines, cst.EmptyLine(comment=cst.Comment(WHY))]),
                       guarded]}


TRANSFORM = PythonTransform(TraceWithInitRequiringGrad, description="trace scan's joint graph with init requiring grad",
                            anchor=f"partitioned-graph trace in {FUNCTION}")
