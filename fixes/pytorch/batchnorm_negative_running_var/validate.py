"""--validate: build the patched test_batch_norm's inputs as the test does
(its running_var expression, evaluated with torch on the CPU, seed 0) and
check what the fix promises: running_var is non-negative, so eager batch norm
gives numbers, equal to the reference formula, where it gave NaN before.

Only the running_var expression of the patched text is evaluated, and only
when it names nothing but `torch` and `device`."""
from __future__ import annotations

import ast
from typing import Mapping

from .fix import TARGET

EPS = 1e-4


def running_var_expression(text: str) -> ast.expr | str:
    """The expression test_batch_norm gives torch.batch_norm as running_var
    (through a local name when it is one), or a problem."""
    functions = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == "test_batch_norm"]
    if len(functions) != 1:
        return f"{len(functions)} test_batch_norm functions"
    calls = [n for n in ast.walk(functions[0]) if isinstance(n, ast.Call)
             and ast.unparse(n.func) in ("torch.batch_norm", "batch_norm")]
    if not calls:
        return "test_batch_norm calls no torch.batch_norm"
    call = calls[0]
    keyword = [k.value for k in call.keywords if k.arg == "running_var"]
    value = keyword[0] if keyword else call.args[4] if len(call.args) > 4 else None
    if isinstance(value, ast.Name):
        assigned = [n.value for n in ast.walk(functions[0]) if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
        value = assigned[-1] if assigned else None
    return value if value is not None else "cannot find what running_var is"


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    import torch

    expression = running_var_expression(after[TARGET])
    if isinstance(expression, str):
        return expression
    names = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}
    if not names <= {"torch", "device"}:
        return f"running_var is {ast.unparse(expression)!r}: it names {sorted(names - {'torch', 'device'})}, not evaluated"
    torch.manual_seed(0)
    code = compile(ast.Expression(expression), "<running_var>", "eval")
    var = eval(code, {"__builtins__": {}, "torch": torch}, {"device": "cpu"})  # noqa: S307 (checked above)
    negative = int((var < 0).sum())
    if negative:
        return (f"running_var = {ast.unparse(expression)} has {negative} negative value(s) of {var.numel()}: "
                "eager batch_norm gives NaN there")
    x = torch.randn(2, var.numel(), 3, 3)
    eager = torch.batch_norm(x, var, var, var, var, False, 0.1, EPS, False)  # as the test: one tensor for all four
    t = var.double()[None, :, None, None]
    reference = (x.double() - t) / torch.sqrt(t + EPS) * t + t
    if torch.isnan(eager).any() or not torch.allclose(eager.double(), reference, rtol=1e-4, atol=1e-5):
        return "eager batch_norm differs from the reference formula"
    return None
