"""--validate: what the written attention.cpp decides. The efficient case's
`compute_logsumexp` (its initializer and any later `compute_logsumexp = ...`
in the case) is evaluated over every combination of grad mode, q/k/v
requiring grad, mask present and mask requiring grad, with the helper as the
file defines it (q/k/v requires_grad && grad mode). Logsumexp must be asked for
exactly when grad mode is on and something that needs a gradient through the
kernel (q, k, v or the mask) requires one. Then the compile check: the patched
file compiled (g++ -fsyntax-only) with the installed torch's headers, the
unpatched one first (engines/compile_check.py)."""
from __future__ import annotations

import itertools
import re
from typing import Mapping

from fixmono.engines.compile_check import compile_check, torch_headers

TARGET = "aten/src/ATen/native/transformers/attention.cpp"
TERMS = (  # C++ predicate -> Python name, applied in order
    (r"should_compute_logsumexp\([^()]*\)", "(qkv_grad and grad_mode)"),
    (r"(?:at::)?GradMode::is_enabled\(\)", "grad_mode"),
    (r"\b\w*mask\w*\.has_value\(\)", "mask"),
    (r"\b\w*mask\w*\s*(?:->|\.value\(\)\s*\.)\s*requires_grad\(\)", "mask_grad"),
    (r"\|\|", " or "), (r"&&", " and "), (r"!(?!=)", " not "),
)


def decision(text: str) -> str | None:
    """The efficient case's compute_logsumexp as a Python expression, or None."""
    from .transform import CASE, HELPER

    case = re.search(rf"case\s+[\w:]*{CASE}\s*:(.*?)(?=\bcase\s+[\w:]+\s*:|\bdefault\s*:)", text, re.S)
    if not case:
        return None
    parts = re.findall(r"\bcompute_logsumexp\s*=\s*([^;]*);", case.group(1))
    if not parts or HELPER not in parts[0]:
        return None
    expr = parts[0]
    for later in parts[1:]:
        expr = later.replace("compute_logsumexp", f"({expr})")
    for pattern, name in TERMS:
        expr = re.sub(pattern, name, expr)
    return " ".join(expr.split())


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    expr = decision(after[TARGET])
    if expr is None:
        return "no compute_logsumexp = should_compute_logsumexp(...) in the efficient_attention case"
    if re.search(r"[^\w\s()]", expr.replace(" or ", " ").replace(" and ", " ").replace(" not ", " ")) \
            or set(re.findall(r"[A-Za-z_]\w*", expr)) - {"qkv_grad", "grad_mode", "mask", "mask_grad", "and", "or",
                                                          "not"}:
        return f"compute_logsumexp depends on something this check cannot evaluate: {expr}"
    wrong = []
    for grad_mode, qkv_grad, mask, mask_grad in itertools.product((False, True), repeat=4):
        mask_grad = mask_grad and mask
        got = bool(eval(expr, {"__builtins__": {}},  # noqa: S307 - names and operators checked above
                        dict(grad_mode=grad_mode, qkv_grad=qkv_grad, mask=mask, mask_grad=mask_grad)))
        want = grad_mode and (qkv_grad or mask_grad)
        if got != want:
            wrong.append(f"grad_mode={grad_mode} qkv_grad={qkv_grad} mask_grad={mask_grad}: {got}")
    if wrong:
        return f"logsumexp decision wrong for {len(wrong)} case(s), e.g. {wrong[0]}"
    return compile_check(before[TARGET], after[TARGET], TARGET, torch_headers())
