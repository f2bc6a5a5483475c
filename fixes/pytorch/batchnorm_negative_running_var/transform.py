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

from fixmono.engines.python import PythonTransform, SiteTransformer, call_argument, dotted_name, find_all

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


NON_NEGATIVE_FUNCTIONS = {"torch.abs", "torch.exp", "torch.square", "torch.relu", "torch.sigmoid"}
NON_NEGATIVE_METHODS = {"abs", "abs_", "square", "square_", "exp", "exp_", "relu", "relu_", "sigmoid", "sigmoid_"}
CLAMPS = {"clamp", "clamp_", "clamp_min", "clamp_min_"}


def constant(node: cst.BaseExpression) -> float | None:
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = constant(node.expression)
        return None if inner is None else -inner
    return None


def even_power(node: cst.BaseExpression) -> bool:
    value = constant(node)
    return value is not None and value == int(value) and int(value) % 2 == 0


def is_non_negative(value: cst.BaseExpression) -> bool:
    """Whether the expression is a tensor (or number) that cannot be negative."""
    if constant(value) is not None:
        return constant(value) >= 0
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, cst.Power):
            return even_power(value.right) or is_non_negative(value.left)
        if isinstance(value.operator, (cst.Add, cst.Multiply)):
            return is_non_negative(value.left) and is_non_negative(value.right)
        return False
    if not isinstance(value, cst.Call):
        return False
    name = dotted_name(value.func) or ""
    if name in NON_NEGATIVE_RANDOM or name in NON_NEGATIVE_FUNCTIONS:
        return True
    if not isinstance(value.func, cst.Attribute):
        return False
    method = value.func.attr.value
    if method in NON_NEGATIVE_METHODS:
        return True
    if method in CLAMPS:
        low = call_argument(value, 0, "min")
        return low is not None and constant(low) is not None and constant(low) >= 0
    if method in ("pow", "pow_"):
        exponent = call_argument(value, 0, "exponent")
        return exponent is not None and (even_power(exponent) or is_non_negative(value.func.value))
    return is_non_negative(value.func.value) and method in ("clone", "to", "float", "double", "contiguous")


def definitions(function: cst.FunctionDef, name: str) -> list[cst.SimpleStatementLine]:
    """The statements, in source order, that give `name` its value: assignments
    to it and in-place method calls on it (x.abs_(), x.clamp_(min=0), ...)."""
    found = []
    for line in find_all(function, cst.SimpleStatementLine):
        if len(line.body) != 1:
            continue
        stmt = line.body[0]
        if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0].target, cst.Name) and stmt.targets[0].target.value == name:
            found.append(line)
        elif isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call) and \
                isinstance(stmt.value.func, cst.Attribute) and stmt.value.func.attr.value.endswith("_") and \
                isinstance(stmt.value.func.value, cst.Name) and stmt.value.func.value.value == name:
            found.append(line)
    return found


def leaves_non_negative(line: cst.SimpleStatementLine) -> bool:
    """Whether the variable is non-negative after `line` (an in-place call
    counts as its out-of-place form: x.abs_() as x.abs())."""
    stmt = line.body[0]
    if isinstance(stmt, cst.Assign):
        return is_non_negative(stmt.value)
    call = stmt.value  # an in-place method call on the variable
    rewritten = call.with_changes(func=call.func.with_changes(attr=cst.Name(call.func.attr.value.rstrip("_"))))
    return is_non_negative(rewritten)


class NonNegativeRunningVar(SiteTransformer):
    """One site per name passed as running_var: already non-negative where its
    last value is (whatever the form); else its last assignment, a signed
    random tensor, gets `.abs()`; any other form is reported as found."""

    mentioning = rf"\b{TEST_FUNCTION}\b"

    def __init__(self) -> None:
        super().__init__()
        self._edit: list[set[int]] = []  # ids of the statement lines to fix, per open test_batch_norm

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        if node.name.value == TEST_FUNCTION:
            names = running_var_names(node)
            self.anchors += bool(names)
            self._edit.append(self._plan(node, names))
        return True

    def _plan(self, function: cst.FunctionDef, names: set[str]) -> set[int]:
        edit = set()
        for name in sorted(names):
            lines = definitions(function, name)
            if not lines:
                continue  # a parameter or closure variable: nothing here decides its sign
            if leaves_non_negative(lines[-1]):
                self.present += 1
                continue
            last = lines[-1].body[0]
            if isinstance(last, cst.Assign) and isinstance(last.value, cst.Call) and \
                    dotted_name(last.value.func) in SIGNED_RANDOM:
                edit.add(id(lines[-1]))
                continue
            code = cst.Module(body=[]).code_for_node(lines[-1]).strip()
            self.problems.append(f"running_var {name!r} of {TEST_FUNCTION} is last set by `{code}`: a form this "
                                 "fix does not know to be non-negative or to make so; check it by hand")
        return edit

    def leave_FunctionDef(self, original, updated):
        if original.name.value == TEST_FUNCTION:
            self._edit.pop()
        return super().leave_FunctionDef(original, updated)

    def leave_SimpleStatementLine(self, original, updated: cst.SimpleStatementLine):
        if not self._edit or id(original) not in self._edit[-1]:
            return updated
        assign = updated.body[0]
        self.changed += 1
        fixed = assign.with_changes(value=cst.Call(func=cst.Attribute(value=assign.value, attr=cst.Name("abs"))))
        comment = cst.EmptyLine(indent=True, comment=cst.Comment(COMMENT))
        return updated.with_changes(body=[fixed], leading_lines=[*updated.leading_lines, comment])


TRANSFORM = PythonTransform(
    NonNegativeRunningVar,
    description="make the running_var tensor of test_batch_norm non-negative",
    anchor=f"function {TEST_FUNCTION} calling torch.batch_norm",
)
