"""--validate: the written `scan_autograd` run on doubles of the partitioner and
the autograd function, with real tensors for init (a float that does not
require grad, an integer one, a float that does): at trace time every float
init must require grad and the integer one is untouched; after the call, and
after a trace that raises, each has its own requires_grad back."""
from __future__ import annotations

import ast
import contextlib
from types import SimpleNamespace
from typing import Mapping

from .fix import TARGET
from .transform import FUNCTION


def run(text: str, fail: bool) -> tuple[list[bool], list[bool]]:
    import torch

    seen: list[bool] = []

    def create_partitioned_graph(fn, operands, **kwargs):
        seen.extend(t.requires_grad for t in operands[:3])
        if fail:
            raise RuntimeError("trace failed")
        return "graph"

    function = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION)
    function.decorator_list = []
    scope = {"disable_proxy_modes_tracing": contextlib.nullcontext, "HopPartitionedGraph": object,
             "HopGraphMinCutPartitioner": SimpleNamespace(create_partitioned_graph=create_partitioned_graph),
             "ScanAutogradOp": SimpleNamespace(apply=lambda *args: "applied")}
    exec(compile(ast.Module(body=[function], type_ignores=[]), f"<{FUNCTION}>", "exec"), scope)  # noqa: S102
    init = [torch.zeros(2), torch.zeros(2, dtype=torch.int64), torch.zeros(2, requires_grad=True)]
    with contextlib.suppress(RuntimeError):
        scope[FUNCTION](None, init, [], [])
    return seen, [t.requires_grad for t in init]


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError as err:
        return f"cannot validate: torch is not importable here ({err})"
    for fail in (False, True):
        seen, restored = run(after[TARGET], fail)
        if seen != [True, False, True]:
            return f"at trace time init requires_grad is {seen}, expected [True, False, True] (float, int, float)"
        if restored != [False, False, True]:
            return f"after {'a failing' if fail else 'the'} trace init requires_grad is {restored}, expected restored"
    return None
