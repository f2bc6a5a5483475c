"""pytorch/pytorch#148476 as a C++ syntax-tree transformation of
aten/src/ATen/native/transformers/attention.cpp: in the
`efficient_attention` case of `scaled_dot_product_attention`,
`compute_logsumexp` comes from `should_compute_logsumexp(query, key, value)`,
which ignores the attention mask. With only the mask requiring grad the
memory-efficient forward returns an empty logsumexp, and its backward reads it
(CUDA: illegal memory access with one head, "LSE is not correctly aligned
(strideH)" with more). The mask's requires_grad (under grad mode) is OR-ed in,
as upstream already does in the `overrideable` case.

Anchored on the case label and the helper's call, never on line numbers; the
mask is the dispatcher's `std::optional<Tensor>` parameter (its name read from
the signature). Presence: the case already looks at the mask's requires_grad,
or the helper takes the mask, or the case calls upstream's own fix, PR #188302's
`should_compute_logsumexp_with_attn_mask(query, key, value, attn_mask)` (in
pytorch main from mid-2026: seen in fork snapshots whose attention.cpp compiles
with torch 2.14.1's and 2.15.0's headers).
"""
from __future__ import annotations

import re

from fixmono.engines.cpp import CppDocument, CppTransform, Edit, Plan, ancestors, walk

FUNCTION = "scaled_dot_product_attention"
HELPER = "should_compute_logsumexp"
UPSTREAM_HELPER = "should_compute_logsumexp_with_attn_mask"  # PR #188302
CASE = "efficient_attention"
MASK_GRAD = re.compile(r"\b\w*mask\w*\s*(?:->|\.value\(\)\s*\.)\s*requires_grad\(\)")


def case_of(doc: CppDocument, node) -> str | None:
    """The `case X:` label `node` sits under, as written."""
    for a in ancestors(node):
        if a.type == "case_statement" and a.child_by_field_name("value") is not None:
            return doc.text(a.child_by_field_name("value")).replace(" ", "")
    return None


def mask_parameter(doc: CppDocument, function) -> list[str]:
    params = function.child_by_field_name("declarator").child_by_field_name("parameters")
    names = []
    for p in params.named_children if params is not None else []:
        ident = [n for n in walk(p) if n.type == "identifier"]
        if ident and "mask" in doc.text(ident[-1]) and "optional" in doc.text(p):
            names.append(doc.text(ident[-1]))
    return names


class MaskGradNeedsLogsumexp(CppTransform):
    def __init__(self):
        super().__init__("compute logsumexp when only the attention mask requires grad",
                         f"{HELPER} call in the {CASE} case of {FUNCTION}")

    def plan(self, doc: CppDocument) -> Plan:
        plan = Plan()
        dispatchers = [f for f in doc.functions(FUNCTION) if HELPER in doc.text(f)]
        if not dispatchers:
            return plan
        plan.anchors = 1
        if len(dispatchers) > 1:
            plan.problems.append(f"{len(dispatchers)} definitions of {FUNCTION} call {HELPER}")
            return plan
        function = dispatchers[0]
        in_case = lambda c: (case_of(doc, c) or "").endswith("::" + CASE)  # noqa: E731
        if any(in_case(c) for c in doc.calls(function, UPSTREAM_HELPER)):
            plan.found("the efficient case asks for logsumexp when the mask requires grad (upstream's helper)")
            return plan
        calls = [c for c in doc.calls(function, HELPER) if in_case(c)]
        if len(calls) != 1:
            plan.problems.append(f"expected one {HELPER}(...) in `case ...::{CASE}:`, found {len(calls)}")
            return plan
        call = calls[0]
        case = next(a for a in ancestors(call) if a.type == "case_statement")
        helpers = doc.functions(HELPER)
        takes_mask = any("mask" in doc.text(h.child_by_field_name("declarator")) for h in helpers)
        if MASK_GRAD.search(doc.text(case)) or takes_mask:
            plan.found("the efficient case asks for logsumexp when the mask requires grad")
            return plan
        masks = mask_parameter(doc, function)
        if len(masks) != 1:
            plan.problems.append(f"{FUNCTION}: expected one std::optional mask parameter, found {masks}")
            return plan
        mask = masks[0]
        term = f" || (at::GradMode::is_enabled() && {mask}.has_value() && {mask}->requires_grad())"
        plan.change(Edit(call.end_byte, call.end_byte, term),
                    what="the efficient case asks for logsumexp when the mask requires grad")
        return plan


TRANSFORM = MaskGradNeedsLogsumexp()
