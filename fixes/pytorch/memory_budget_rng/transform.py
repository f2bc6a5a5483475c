"""pytorch/pytorch#190717 / #190758 as a libcst transformation of
torch/_functorch/partitioners.py: with `activation_memory_budget < 1` the
partitioner may put a random op (dropout's rand, randn, multinomial, ...) in
the backward graph too, where the recompute draws fresh randomness and the
gradient uses a mask the forward never applied. Three sites:

- `OpTypes.is_random`: random ops are the three listed ones *or any op tagged
  `nondeterministic_seeded`* (the tag the rest of AOTAutograd already uses for
  RNG), so the min-cut's "random op" ban covers multinomial, poisson, rand...
- `choose_saved_values_set`, the `memory_budget == 0` shortcut (return the
  inputs, no min-cut at all): taken only when the forward has no random op;
  otherwise the budget-0 choice goes through the knapsack like any budget.
- `choose_saved_values_set`, the `must_save_nodes` filter: random ops join the
  MUST_SAVE nodes, so the knapsack can never trade them back into recompute.

The min-cut then saves the cheapest value downstream of each random op (the
bool mask, or inductor's seeds) and the budget keeps governing everything else.
Matched by class, function and statement shape, never by line numbers.
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import PythonTransform, SiteTransformer, dotted_name, find_all

TAG = "nondeterministic_seeded"
IS_RANDOM = "OpTypes.is_random"
CHOOSE = "choose_saved_values_set"
OP_LIST = "get_default_op_list"  # the module's OpTypes factory


def mentions(node: cst.CSTNode, name: str) -> bool:
    """Whether `name` is a Name or attribute in `node`."""
    return any(n.value == name for n in find_all(node, cst.Name))


def is_budget_zero_test(test: cst.BaseExpression, budget: str) -> bool:
    """`<budget> == 0` (the shortcut's test, unfixed)."""
    return (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == budget
            and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)
            and isinstance(test.comparisons[0].comparator, cst.Integer)
            and test.comparisons[0].comparator.value == "0")


def is_must_save_filter(comp: cst.ListComp) -> bool:
    """`[i for i in ... if <...>.get("recompute", ...) == CheckpointPolicy.MUST_SAVE]`"""
    ifs = comp.for_in.ifs
    return (len(ifs) == 1 and comp.for_in.inner_for_in is None
            and any(dotted_name(a) == "CheckpointPolicy.MUST_SAVE" for a in find_all(ifs[0].test, cst.Attribute)))


def parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.IfExp, cst.Lambda, cst.NamedExpr)):
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


class KeepRandomOpsSaved(SiteTransformer):
    mentioning = r"\b(?:is_random|choose_saved_values_set)\b"  # OpTypes.is_random, and CHOOSE

    def __init__(self) -> None:
        super().__init__()
        self._choose: dict = {}  # names in the open choose_saved_values_set

    # --- OpTypes.is_random -------------------------------------------------
    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        if self.qualname != IS_RANDOM or original.value is None or self._is_random_param is None:
            return updated  # not this function, or already tagged: the text stays as it is
        node = self._is_random_param
        tagged = cst.parse_expression(f'torch.Tag.{TAG} in getattr({node}.target, "tags", ())')
        return updated.with_changes(value=cst.BooleanOperation(parenthesized(updated.value), cst.Or(), tagged))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        if self.qualname == IS_RANDOM:
            self.anchors += 1
            self._decide_is_random(node)
        elif self.qualname == CHOOSE:
            self.anchors += 1
            self._decide_choose(node)
        return True

    def _decide_is_random(self, function: cst.FunctionDef) -> None:
        self._is_random_param = None
        params = function.params.params
        returns = find_all(function, cst.Return)
        if mentions(function, TAG):
            self.found("random ops by their nondeterministic_seeded tag")
        elif len(params) != 2 or len(returns) != 1 or returns[0].value is None:
            self.problems.append(f"{IS_RANDOM}: expected (self, node) and one return, a shape this fix does not know")
        else:
            self._is_random_param = params[1].name.value
            self.change("random ops by their nondeterministic_seeded tag")

    def _decide_choose(self, function: cst.FunctionDef) -> None:
        params = [p.name.value for p in function.params.params]
        if len(params) < 3:
            self.problems.append(f"{CHOOSE}: expected (joint_graph, node_info, memory_budget, ...)")
            return
        graph, _, budget = params[:3]
        shortcuts = [i for i in find_all(function, cst.If) if i.test is not None and
                     (is_budget_zero_test(i.test, budget) or (isinstance(i.test, cst.BooleanOperation)
                                                              and is_budget_zero_test(i.test.left, budget)))]
        filters = [c for c in find_all(function, cst.ListComp) if is_must_save_filter(c)]
        if len(shortcuts) > 1 or len(filters) != 1:
            self.problems.append(f"{CHOOSE}: expected at most one `if {budget} == 0:` and one MUST_SAVE filter, "
                                 f"found {len(shortcuts)} and {len(filters)}")
            return
        self._choose = {"graph": graph}
        if not shortcuts or mentions(shortcuts[0].test, "is_random"):
            self.found("no budget-0 shortcut past random ops")
        else:
            self._choose["shortcut"] = shortcuts[0]
            self.change("no budget-0 shortcut past random ops")
        if mentions(filters[0].for_in.ifs[0].test, "is_random"):
            self.found("random ops kept out of the knapsack")
        else:
            self._choose["filter"] = filters[0]
            self.change("random ops kept out of the knapsack")

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        if original is not self._choose.get("shortcut"):
            return updated
        no_random = cst.parse_expression(
            f"not any({OP_LIST}().is_random(n) for n in {self._choose['graph']}.nodes)")
        return updated.with_changes(test=cst.BooleanOperation(updated.test, cst.And(), no_random))

    def leave_CompIf(self, original: cst.CompIf, updated: cst.CompIf) -> cst.CompIf:
        comp = self._choose.get("filter")
        if comp is None or original is not comp.for_in.ifs[0]:
            return updated
        item = comp.elt
        random = cst.parse_expression(f"{OP_LIST}().is_random({cst.Module([]).code_for_node(item)})")
        return updated.with_changes(test=cst.BooleanOperation(parenthesized(updated.test), cst.Or(), random))

    def leave_FunctionDef(self, original, updated):
        if self.qualname == CHOOSE:
            self._choose = {}
        return super().leave_FunctionDef(original, updated)


TRANSFORM = PythonTransform(KeepRandomOpsSaved, description="never recompute random ops under a memory budget",
                            anchor=f"{IS_RANDOM} or {CHOOSE}")
