"""The revert of #172340 as a C++ syntax-tree transformation of
aten/src/ATen/native/cuda/Blas.cpp, for trees whose history lacks the commit.

In `addmm_out_cuda_impl`, the statements that make `disable_addmm_cuda_lt`
depend on the preferred BLAS backend (the `blasPreferredBackend()` variable,
every assignment that reads it, and the "NOTE: See ...172231" comment above
them) are removed. The env-var (`isGloballyDisabledAddmmCudaLt`) and
eligibility (`isInputCompliesAddmmCudaLt`) statements must remain, and any
other use of the preferred backend in the function stops the transformation
(it would be a newer design, e.g. #170571, not this gate).
"""
from __future__ import annotations

import re

from fixmono.engines.cpp import CppDocument, CppTransform, Edit, Plan, line_start, walk

FUNCTION = "addmm_out_cuda_impl"
FLAG = "disable_addmm_cuda_lt"
KEEP = ("isGloballyDisabledAddmmCudaLt", "isInputCompliesAddmmCudaLt")
NOTE = re.compile(r"//.*issues/172231")


def _statements(body):
    return [s for s in walk(body) if s.parent is not None and s.parent.type == "compound_statement"
            and s.type in ("declaration", "expression_statement")]


class RemoveBackendGate(CppTransform):
    def __init__(self):
        super().__init__("drop the preferred-BLAS-backend gating of the addmm Lt path",
                         f"function {FUNCTION} deciding {FLAG}")

    def plan(self, doc: CppDocument) -> Plan:
        plan = Plan()
        functions = [f for f in doc.functions(FUNCTION) if FLAG in doc.text(f)]
        if not functions:
            return plan
        plan.anchors = 1
        if len(functions) > 1:
            plan.problems.append(f"{len(functions)} definitions of {FUNCTION}")
            return plan
        body = functions[0].child_by_field_name("body")
        statements = _statements(body)
        backend_vars = {m.group(1) for s in statements
                        for m in [re.search(r"(\w+)\s*=\s*at::globalContext\(\)\.blasPreferredBackend\(\)",
                                            doc.text(s))] if m and s.type == "declaration"}
        readers = [s for s in statements if "blasPreferredBackend()" in doc.text(s)
                   or any(re.search(rf"\b{v}\b", doc.text(s)) for v in backend_vars)]
        if not readers:
            plan.present += 1
            return plan
        for s in readers:
            text = doc.text(s)
            if s.type == "expression_statement" and not re.match(rf"{FLAG}\s*=", text):
                plan.problems.append(f"line {s.start_point[0] + 1}: the preferred backend is used for "
                                     f"something other than {FLAG}; not the #172340 gate")
                return plan
        rest = " ".join(doc.text(s) for s in statements if s not in readers)
        missing = [k for k in KEEP if k not in rest]
        if missing:
            plan.problems.append(f"{FUNCTION} no longer calls {missing}: the Lt decision changed shape")
            return plan
        edits = []
        for s in readers:
            start, end = line_start(doc.src, s.start_byte), doc.src.index(b"\n", s.end_byte) + 1
            edits.append(Edit(_with_note(doc.src, start), end, ""))
        plan.change(*edits)
        return plan


def _with_note(src: bytes, start: int) -> int:
    """`start`, moved up over blank lines to the "NOTE: See ...172231" comment
    explaining the gate, when there is one: that comment goes too."""
    above = start
    while above:
        previous = line_start(src, above - 1)
        line = src[previous:above].decode("utf-8", "replace")
        if NOTE.search(line):
            return previous
        if line.strip():
            return start
        above = previous
    return start


TRANSFORM = RemoveBackendGate()
