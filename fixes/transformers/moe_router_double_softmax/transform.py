"""huggingface/transformers#45131 (issue #45120) as a libcst transformation of
each MoE model's `<X>TopKRouter.forward`: from 5.0.0 to 5.5.4 the router
reassigns `router_logits` to its softmax and returns that as the router
logits; the model records it (OutputRecorder(<X>TopKRouter, index=0)) and
`load_balancing_loss_func` applies softmax again, so the auxiliary loss is
computed on softmax(softmax(logits)) and barely pushes towards balance.

The rewrite is upstream's: the softmax goes into a new local `router_probs`,
`torch.topk` reads it, and the raw `router_logits` stay what the router
returns. Nothing else in the method changes (a later `.to(router_logits.dtype)`
now casts to the logits' dtype, as in 5.6.0).

Presence check: `router_probs = <softmax>(router_logits...)` with topk reading
`router_probs`. A router whose forward has no softmax of `router_logits`
(sigmoid routers, 4.x files with no TopKRouter class) is no anchor.
"""
from __future__ import annotations

import re

import libcst as cst

from fixmono.engines.python import PythonTransform, SiteTransformer, dotted_name, find_all

ROUTER = re.compile(r"^\w+TopKRouter\.forward$")
LOGITS, PROBS = "router_logits", "router_probs"


def softmax_of_logits(stmt: cst.BaseSmallStatement) -> str | None:
    """`<name> = <...>softmax(router_logits[.float()], ...)` -> name."""
    if not (isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name)
            and isinstance(stmt.value, cst.Call) and (dotted_name(stmt.value.func) or "").endswith("softmax")
            and stmt.value.args):
        return None
    first = stmt.value.args[0].value
    reads_logits = any(n.value == LOGITS for n in find_all(first, cst.Name))
    return stmt.targets[0].target.value if reads_logits else None


def topk_calls(function: cst.FunctionDef, of: str) -> list[cst.Call]:
    """`<...>topk(<of>, ...)` calls."""
    return [call for call in find_all(function, cst.Call)
            if (dotted_name(call.func) or "").endswith("topk") and call.args
            and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == of]


class KeepRouterLogitsRaw(SiteTransformer):
    mentioning = rf"TopKRouter|\b{LOGITS}\b"  # a router class, and its forward (the softmax of the logits)

    def __init__(self) -> None:
        super().__init__()
        self._plan: dict = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        if ROUTER.match(self.qualname):
            self._plan = self._decide(node)
        return True

    def _decide(self, function: cst.FunctionDef) -> dict:
        router = self.qualname.split(".")[0]
        lines = [line for line in find_all(function, cst.SimpleStatementLine) if len(line.body) == 1]
        softmaxes = [(line, name) for line in lines if (name := softmax_of_logits(line.body[0]))]
        if not softmaxes:
            return {}  # no softmax of the logits here (a sigmoid router): not this code
        self.anchors += 1
        if len(softmaxes) != 1:
            self.problems.append(f"{router}.forward: {len(softmaxes)} softmaxes of {LOGITS}, expected one")
            return {}
        line, target = softmaxes[0]
        if target == PROBS and len(topk_calls(function, PROBS)) == 1:
            self.found(router)
            return {}
        if target != LOGITS:
            self.problems.append(f"{router}.forward: the softmax of {LOGITS} goes to {target}, a shape this fix "
                                 f"does not know")
            return {}
        topks = topk_calls(function, LOGITS)
        if len(topks) != 1:
            self.problems.append(f"{router}.forward: expected one topk of {LOGITS}, found {len(topks)}")
            return {}
        if any(n.value == PROBS for n in find_all(function, cst.Name)):
            self.problems.append(f"{router}.forward: the name {PROBS} is taken")
            return {}
        self.change(router)
        return {"softmax": line.body[0], "topk": topks[0]}

    def leave_Assign(self, original, updated):
        if original is self._plan.get("softmax"):
            return updated.with_changes(targets=[updated.targets[0].with_changes(target=cst.Name(PROBS))])
        return updated

    def leave_Call(self, original, updated):
        if original is self._plan.get("topk"):
            first = updated.args[0].with_changes(value=cst.Name(PROBS))
            return updated.with_changes(args=[first, *updated.args[1:]])
        return updated

    def leave_FunctionDef(self, original, updated):
        if ROUTER.match(self.qualname):
            self._plan = {}
        return super().leave_FunctionDef(original, updated)


TRANSFORM = PythonTransform(KeepRouterLogitsRaw, description="keep the router's returned logits raw (softmax to router_probs)",
                            anchor="a softmax of router_logits in a <X>TopKRouter.forward")
