"""--validate, on the C++ syntax tree of the patched Blas.cpp: in
addmm_out_cuda_impl, follow every assignment that feeds disable_addmm_cuda_lt
(through local variables). The gate is gone when nothing feeding it reads the
preferred BLAS backend, so the cuBLASLt epilogue is taken on both backend
paths (cuBLAS and cuBLASLt preferred) alike; the env-var and eligibility
checks must still feed it. Then the compile check: the patched file compiled
(g++ -fsyntax-only) with the installed torch's headers and the CUDA toolkit's,
the unpatched one first (engines/compile_check.py)."""
from __future__ import annotations

from typing import Mapping

from .fix import TARGET
from .transform import FLAG, FUNCTION, KEEP
from fixmono.engines.compile_check import compile_check, torch_headers
from fixmono.engines.cpp import CppDocument, walk

NAME_NODES = ("identifier", "field_identifier")


def assignments(doc: CppDocument, body) -> dict[str, list]:
    """variable -> the right-hand sides assigned to it in `body`."""
    found: dict[str, list] = {}
    for node in walk(body):
        if node.type == "init_declarator":
            target, value = node.child_by_field_name("declarator"), node.child_by_field_name("value")
        elif node.type == "assignment_expression":
            target, value = node.child_by_field_name("left"), node.child_by_field_name("right")
        else:
            continue
        if target is not None and value is not None and target.type == "identifier":
            found.setdefault(doc.text(target), []).append(value)
    return found


def feeding(doc: CppDocument, body, variable: str) -> tuple[set[str], list]:
    """Names read by everything assigned to `variable`, transitively, and the
    right-hand sides visited (for line numbers)."""
    assigned = assignments(doc, body)
    names, seen, todo, values = set(), set(), [variable], []
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for value in assigned.get(current, []):
            values.append(value)
            for leaf in walk(value):
                if leaf.type in NAME_NODES:
                    names.add(doc.text(leaf))
                    if leaf.type == "identifier" and doc.text(leaf) in assigned:
                        todo.append(doc.text(leaf))
    return names, values


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    doc = CppDocument(after[TARGET])
    functions = [f for f in doc.functions(FUNCTION) if FLAG in doc.text(f)]
    if len(functions) != 1:
        return f"{len(functions)} definitions of {FUNCTION} deciding {FLAG}"
    names, values = feeding(doc, functions[0].child_by_field_name("body"), FLAG)
    if "blasPreferredBackend" in names:
        line = min(v.start_point[0] + 1 for v in values if "blasPreferredBackend" in doc.text(v))  # for the message
        return (f"{FLAG} still depends on the preferred BLAS backend (line {line}): "
                "the cuBLASLt epilogue is not taken when cuBLAS is preferred")
    missing = [k for k in KEEP if k not in names]
    if missing:
        return f"{FLAG} no longer depends on {', '.join(missing)}: the edit removed more than the gate"
    return compile_check(before[TARGET], after[TARGET], TARGET, torch_headers(cuda=True))
