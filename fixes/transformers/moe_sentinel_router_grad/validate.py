"""--validate: define the patched `batched_mm_experts_forward` from the
written text (with the installed transformers' helpers) and run the
expert-parallel case: routing-weight gradient exactly 0 at every sentinel
slot, non-zero at every routed slot."""
from __future__ import annotations

from typing import Mapping

from .experts import TARGET


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    try:
        from . import experts
        function = experts.function_from(after[TARGET])
    except ImportError as err:
        return f"cannot validate: transformers is not importable here ({err})"
    case = experts.run_case(function)
    if case["right"]:
        return None
    return (f"routing-weight gradient {case['sentinel_grad_max']:.3g} at sentinel slots (must be 0), "
            f"smallest at routed slots {case['routed_grad_min']:.3g}")
