"""huggingface/transformers#48689 (issue #48687) as a libcst transformation of
src/transformers/integrations/moe.py, `batched_mm_experts_forward`: under
expert parallelism the slots routed to another rank's experts carry a sentinel
id (the local expert count). The function clamps those ids to the last local
expert so the weight gather stays in bounds, and relies on the dispatcher
having zeroed their routing weights. The output is then right, but the
gradient of the routing weights at those slots is the clamped expert's output,
not zero: the router is trained on experts the token never went to.

Two statements are inserted, as upstream did:
- before the clamp: `sentinel_mask = <ids> >= <experts>` (the clamp's bound);
- before the routing weights multiply the expert outputs:
  `<weights> = <weights>.masked_fill(sentinel_mask, 0.0)`.

Presence check: a mask of the ids against the expert count that is applied
(masked_fill, or a multiply by it): 5.18+ masks the weights, 5.1-5.7 masked
the output (either way no gradient reaches those slots). A function with no
clamp (5.0, before sentinels were handled) is not-applicable.
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import LinePlanTransformer, PythonTransform, code, dotted_name, find_all

FUNCTION = "batched_mm_experts_forward"
MASK = "sentinel_mask"
WHY = "# EP sentinel slots: keep them out of the router gradient (huggingface/transformers#48687)"



def clamp_call(stmt: cst.BaseSmallStatement) -> tuple[str, cst.Call] | None:
    """`ids = ids.clamp(0, X - 1)` or `ids.clamp_(0, X - 1)` -> ("ids", call)."""
    value = stmt.value if isinstance(stmt, (cst.Assign, cst.Expr)) else None
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("clamp", "clamp_") and isinstance(value.func.value, cst.Name)):
        return None
    if isinstance(stmt, cst.Assign) and not (len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name)):
        return None
    return value.func.value.value, value


def upper_bound(call: cst.Call) -> str | None:
    """`clamp(0, X - 1)` -> "X"."""
    if len(call.args) != 2:
        return None
    top = call.args[1].value
    if (isinstance(top, cst.BinaryOperation) and isinstance(top.operator, cst.Subtract)
            and isinstance(top.right, cst.Integer) and top.right.value == "1"):
        return code(top.left)
    return None


def weights_name(function: cst.FunctionDef) -> str | None:
    """The flattened routing weights: `<w> = top_k_weights.reshape(-1)`."""
    for assign in find_all(function, cst.Assign):
        value = assign.value
        if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                and dotted_name(value.func.value) == "top_k_weights" and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)):
            return assign.targets[0].target.value
    return None


def multiplies_by(stmt: cst.BaseSmallStatement, weights: str) -> bool:
    """`x = <...> * <weights>.unsqueeze(-1)`: the routing weights applied."""
    if not (isinstance(stmt, cst.Assign) and isinstance(stmt.value, cst.BinaryOperation)
            and isinstance(stmt.value.operator, cst.Multiply)):
        return False
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "unsqueeze"
               and dotted_name(n.func.value) == weights for n in find_all(stmt.value.right, cst.Call))


def sentinel_masks(function: cst.FunctionDef, ids: str, experts: str) -> list[str]:
    """Names bound to `ids >= experts` or `ids < experts`."""
    names = []
    for assign in find_all(function, cst.Assign):
        v = assign.value
        if (isinstance(v, cst.Comparison) and len(v.comparisons) == 1 and code(v.left) == ids
                and isinstance(v.comparisons[0].operator, (cst.GreaterThanEqual, cst.LessThan))
                and code(v.comparisons[0].comparator) == experts and isinstance(assign.targets[0].target, cst.Name)):
            names.append(assign.targets[0].target.value)
    return names


def mask_applied(function: cst.FunctionDef, masks: list[str]) -> bool:
    """A mask used by masked_fill(_) or a multiply (the fixed forms)."""
    for call in find_all(function, cst.Call):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("masked_fill", "masked_fill_"):
            if any(n.value in masks for a in call.args for n in find_all(a.value, cst.Name)):
                return True
    for op in find_all(function, cst.BinaryOperation):
        if isinstance(op.operator, cst.Multiply) and any(n.value in masks for n in find_all(op.right, cst.Name)):
            return True
    return False


def with_comment(stmt: str) -> cst.SimpleStatementLine:
    line = cst.parse_statement(stmt + "\n")
    return line.with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(WHY))])


class MaskSentinelRoutingWeights(LinePlanTransformer):
    mentioning = rf"\b{FUNCTION}\b"

    def targets(self, qualname: str) -> bool:
        return qualname == FUNCTION

    def plan(self, function: cst.FunctionDef) -> dict:
        lines = [line for line in find_all(function, cst.SimpleStatementLine) if len(line.body) == 1]
        clamps = [(line, found) for line in lines if (found := clamp_call(line.body[0]))]
        if not clamps:
            return {}  # no sentinel clamp: not this code (anchors stay 0)
        self.anchors += 1
        if len(clamps) != 1 or upper_bound(clamps[0][1][1]) is None:
            self.problems.append(f"{FUNCTION}: expected one `ids.clamp(0, experts - 1)`, found {len(clamps)} "
                                 f"clamp(s) of a shape this fix does not know")
            return {}
        clamp_line, (ids, call) = clamps[0]
        experts = upper_bound(call)
        masks = sentinel_masks(function, ids, experts)
        if masks and mask_applied(function, masks):
            self.found("sentinel slots masked")
            return {}
        weights = weights_name(function)
        products = [line for line in lines if weights and multiplies_by(line.body[0], weights)]
        if len(products) != 1:
            self.problems.append(f"{FUNCTION}: expected one `... * <routing weights>.unsqueeze(-1)`, "
                                 f"found {len(products)}")
            return {}
        if any(n.value == MASK for n in find_all(function, cst.Name)):
            self.problems.append(f"{FUNCTION}: the name {MASK} is taken; cannot add the mask")
            return {}
        self.change("sentinel slots masked")
        mask = with_comment(f"{MASK} = {ids} >= {experts}")
        fill = with_comment(f"{weights} = {weights}.masked_fill({MASK}, 0.0)")
        return {clamp_line: lambda updated: [mask, updated], products[0]: lambda updated: [fill, updated]}


TRANSFORM = PythonTransform(MaskSentinelRoutingWeights, description="mask EP sentinel slots' routing weights",
                            anchor=f"sentinel clamp in {FUNCTION}")
