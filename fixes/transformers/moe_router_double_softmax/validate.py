"""--validate: every <X>TopKRouter of each written file, defined alone from the
patched text and run on random tokens: it must return the raw logits
(hidden @ weight.T) as router_logits, with the same top-k choice and weights
as the softmax gives."""
from __future__ import annotations

from typing import Mapping


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    try:
        from .routers import FAMILIES, check_router, router_classes
    except ImportError as err:
        return f"cannot validate: torch is not importable here ({err})"
    wrong = []
    for family in FAMILIES:
        if family.path not in after:  # optional file absent, or not written by this run
            continue
        for name, cls in router_classes(after[family.path]).items():
            result = check_router(cls)
            if not all(result[k] for k in ("returns_raw_logits", "same_choice", "same_weights")):
                wrong.append(f"{name}: {result}")
    return "; ".join(wrong) or None
