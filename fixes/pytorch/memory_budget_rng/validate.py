"""--validate: define the patched `OpTypes.is_random` and
`choose_saved_values_set` from the written text (with the installed torch's
partitioner globals) and compile dropout and multinomial at budgets 0 and 0.5:
the backward must use the forward's randomness at every element."""
from __future__ import annotations

from typing import Mapping

TARGET = "torch/_functorch/partitioners.py"


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    try:
        import torch  # noqa: F401
        from . import partitioner
        fixed = partitioner.functions_from(after[TARGET])
    except ImportError as err:
        return f"cannot validate: torch is not importable here ({err})"
    except (NameError, ValueError, SyntaxError) as err:
        return f"cannot validate: the patched functions do not load against the installed torch ({err})"
    try:
        with partitioner.installed(fixed):
            results = [partitioner.probe(op, budget) for op in ("dropout", "multinomial") for budget in (0.0, 0.5)]
    except Exception as err:  # noqa: BLE001 - whatever the written partitioner raises is the finding
        first = (str(err).strip().splitlines() or [""])[0]
        return f"the patched partitioner fails to compile a dropout graph: {type(err).__name__}: {first}"
    wrong = [f"{r['op']} at budget {r['budget']:g}: {r['wrong']} of {r['total']}" for r in results if r["wrong"]]
    return f"gradients used fresh randomness ({'; '.join(wrong)})" if wrong else None
