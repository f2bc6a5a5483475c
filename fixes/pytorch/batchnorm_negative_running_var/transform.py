"""The upstream fix (#177665) as a libcst transformation of
test/test_jit_fuser_te.py: in `test_batch_norm`, the tensor passed as
running_var must be non-negative.

The test calls torch.batch_norm(i, x, x, x, x, ...) in small nested functions
and feeds them one `x = torch.randn(...)` made in its device loop; that x is
weight, bias, running_mean and running_var at once. The transformation finds
the names passed as running_var (positional argument 4, or keyword) and
rewrites the assignment of a possibly-negative random tensor to that name,
`torch.randn(...)`, into `torch.randn(...).abs()`, with a comment saying why.
Only the data changes: the traced graphs, and so what the fuser is tested on,
stay the same.
"""
from __future__ import annotations

import libcst as cst

from tools.fixlib.engines.python import PythonTransform, SiteTransformer, call_argument, dotted_name, find_all

TEST_FUNCTION = "test_batch_norm"
RUNNING_VAR = (4, "running_var")  # torch.batch_norm(input, weight, bias, mean, var, ...)
SIGNED_RANDOM = {"torch.randn", "torch.randn_like"}
NON_NEGATIVE_RANDOM = {"torch.rand", "torch.rand_like", "torch.ones", "torch.ones_like"}
COMMENT = "# running_var must be >= 0: where var + eps < 0 eager gives NaN, fused kernels may not (#177665)"


def running_var_names(function: cst.FunctionDef) -> set[str]:
    names = set()
    for call in find_all(function, cst.Call):
        if dotted_name(call.func) == "torch.batch_norm":
            arg = call_argument(call, *RUNNING_VAR)
            if isinstance(arg, cst.Name):
                names.add(arg.value)
    return names


def is_non_negative(value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    name = dotted_name(value.func) or ""
    if name in NON_NEGATIVE_RANDOM:
        return True
    return isinstance(value.func, cst.Attribute) and value.func.attr.value in {"abs", "abs_", "square"}


class NonNegativeRunningVar(SiteTransformer):
    def __init__(self) -> None:
        super().__init__()
        self._targets: list[set[str]] = []  # running_var names per open test_batch_norm

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        if node.name.value == TEST_FUNCTION:
            names = running_var_names(node)
            self.anchors += bool(names)
            self._targets.append(names)
        return True

    def leave_FunctionDef(self, original, updated):
        if original.name.value == TEST_FUNCTION:
            self._targets.pop()
        return super().leave_FunctionDef(original, updated)

    def _target_assign(self, stmt: cst.BaseSmallStatement) -> cst.Assign | None:
        if not self._targets or not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1:
            return None
        target = stmt.targets[0].target
        return stmt if isinstance(target, cst.Name) and target.value in self._targets[-1] else None

    def leave_SimpleStatementLine(self, original, updated: cst.SimpleStatementLine):
        if len(updated.body) != 1 or not (assign := self._target_assign(updated.body[0])):
            return updated
        if is_non_negative(assign.value):
            self.present += 1
            return updated
        if not (isinstance(assign.value, cst.Call) and dotted_name(assign.value.func) in SIGNED_RANDOM):
            return updated
        self.changed += 1
        fixed = assign.with_changes(value=cst.Call(func=cst.Attribute(value=assign.value, attr=cst.Name("abs"))))
        comment = cst.EmptyLine(indent=True, comment=cst.Comment(COMMENT))
        return updated.with_changes(body=[fixed], leading_lines=[*updated.leading_lines, comment])


TRANSFORM = PythonTransform(
    NonNegativeRunningVar,
    description="make the running_var tensor of test_batch_norm non-negative",
    anchor=f"function {TEST_FUNCTION} calling torch.batch_norm",
)
