"""The upstream form, for transformers: `pin_moe_routing` in checkpointing kwargs.

    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"pin_moe_routing": True})
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"pin_moe_routing": True})  # >= 5.23

Two files, both libcst:
- src/transformers/integrations/moe.py gets PinnedTopK,
  pinned_routing_contexts and pin_moe_routing_kwargs appended: the same code
  pin.py runs (read from there, so the two forms cannot drift apart);
- in src/transformers/modeling_utils.py, the PreTrainedModel method that builds
  `gradient_checkpointing_func = functools.partial(<checkpoint>, **<kwargs>)`
  (gradient_checkpointing_enable up to 5.22, _activation_checkpointing_enable
  in 5.23) first passes <kwargs> through pin_moe_routing_kwargs. Anchored on
  that assignment, the one statement every 5.x version has, not on the
  method's name or signature.
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import PythonTransform, SiteTransformer, dotted_name, find_all
from .pin import upstream_block

MOE_PY = "src/transformers/integrations/moe.py"
MODELING_UTILS_PY = "src/transformers/modeling_utils.py"
ADDED = ("PinnedTopK", "pinned_routing_contexts", "pin_moe_routing_kwargs")


class AppendPinToMoe(SiteTransformer):
    mentioning = r"\b(?:" + "|".join(ADDED) + r")\b"  # it reads only which of these the module defines

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        self.anchors += 1
        defined = {s.name.value for s in updated.body if isinstance(s, (cst.ClassDef, cst.FunctionDef))}
        if set(ADDED) <= defined:
            self.present += 1
            return updated
        if defined & set(ADDED):
            self.problems.append(f"integrations/moe.py defines only some of {ADDED}")
            return updated
        block = cst.parse_module(upstream_block()).body
        first = block[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2)
        self.changed += 1
        return updated.with_changes(body=[*updated.body, first, *block[1:]])


def _partial_assignment(stmt) -> str | None:
    """The kwargs name in `gradient_checkpointing_func = functools.partial(f, **kw)`."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)):
        return None
    assign = stmt.body[0]
    if [dotted_name(t.target) for t in assign.targets] != ["gradient_checkpointing_func"]:
        return None
    call = assign.value
    if not (isinstance(call, cst.Call) and dotted_name(call.func) == "functools.partial"):
        return None
    kw = [a.value for a in call.args if a.star == "**"]
    return dotted_name(kw[0]) if kw else None


class PinKwargsInCheckpointing(SiteTransformer):
    mentioning = r"\bgradient_checkpointing_func\b"

    def leave_FunctionDef(self, original, updated):
        in_model = self.qualname.startswith("PreTrainedModel.")
        super().leave_FunctionDef(original, updated)
        if not in_model:
            return updated
        body = list(updated.body.body)
        sites = [(i, _partial_assignment(s)) for i, s in enumerate(body) if _partial_assignment(s)]
        nested = [a for a in find_all(updated.body, cst.Assign)
                  if [dotted_name(t.target) for t in a.targets] == ["gradient_checkpointing_func"]]
        if not sites:
            if nested:
                self.anchors += 1
                self.problems.append(f"{self.qualname or original.name.value}: gradient_checkpointing_func is "
                                     "built inside a nested block; the pin would not cover every path")
            return updated
        self.anchors += 1
        if any(n.value == "pin_moe_routing_kwargs" for n in find_all(updated, cst.Name)):
            self.present += 1
            return updated
        index, kwargs = sites[0]
        comment = "# `pin_moe_routing`: replay MoE top-k routing in the recompute (integrations/moe.py)"
        added = [
            cst.parse_statement("from .integrations.moe import pin_moe_routing_kwargs\n").with_changes(
                leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(comment=cst.Comment(comment))]),
            cst.parse_statement(f"{kwargs} = pin_moe_routing_kwargs({kwargs})\n"),
        ]
        self.changed += 1
        return updated.with_changes(body=updated.body.with_changes(body=[*body[:index], *added, *body[index:]]))


MOE_TRANSFORM = PythonTransform(AppendPinToMoe, "add the pinned-routing context to integrations/moe.py",
                                "module")
CHECKPOINTING_TRANSFORM = PythonTransform(
    PinKwargsInCheckpointing, "accept pin_moe_routing in the checkpointing kwargs",
    "PreTrainedModel method building gradient_checkpointing_func with functools.partial")
