"""--validate: run the patched general_gemm against the fault-injecting
hipBLASLt double (double.check_fix): the unpatched text must fail where
hipBLASLt has no BGRADB algorithm, the patched one give the reference wgrad, a
bias grad bitwise equal to an fp32 sum, and unchanged CUDA arguments."""
from __future__ import annotations

from typing import Mapping

from .fix import TARGET


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    from .double import check_fix

    result = check_fix(before[TARGET], after[TARGET])
    return "; ".join(result.problems) or None
