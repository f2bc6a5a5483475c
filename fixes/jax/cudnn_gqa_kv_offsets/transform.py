"""jax-ml/jax#39521 as a libcst transformation of
jax/_src/cudnn/fused_attention_stablehlo.py: in `_fix_seqlen_offsets`, the
packed-sequence kv offsets are scaled to element offsets by the number of
*query* heads (`kv_offsets * N * H`, N from `query.shape`). With grouped or
multi-query attention the key has fewer heads, so every kv segment after the
first starts at the wrong element: cuDNN reads the wrong keys/values (or past
the buffer). The key's head count is taken from `key.shape` and used instead.

Matched by the function name, the `query.shape`/`key.shape` unpacking and the
`kv_offsets = kv_offsets * ...` statement, never by line numbers.
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import PythonTransform, SiteTransformer, find_all

FUNCTION = "_fix_seqlen_offsets"
KV_HEADS = "K"  # the name the key's head count gets (jax-ml/jax#39521 uses the same)


def shape_unpack(stmt: cst.BaseSmallStatement, tensor: str) -> list[str] | None:
    """`a, b, c, d = tensor.shape` -> ["a", "b", "c", "d"], else None."""
    if not (isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Tuple)):
        return None
    value = stmt.value
    if not (isinstance(value, cst.Attribute) and value.attr.value == "shape"
            and isinstance(value.value, cst.Name) and value.value.value == tensor):
        return None
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in stmt.targets[0].target.elements]
    return names if len(names) == 4 and None not in names else None


def product_names(expr: cst.BaseExpression) -> list[str] | None:
    """`a * b * c` -> ["a", "b", "c"] (names only), else None."""
    if isinstance(expr, cst.Name):
        return [expr.value]
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        left, right = product_names(expr.left), product_names(expr.right)
        return None if left is None or right is None else left + right
    return None


def is_kv_scaling(stmt: cst.BaseSmallStatement) -> bool:
    return (isinstance(stmt, cst.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0].target, cst.Name) and stmt.targets[0].target.value == "kv_offsets"
            and (product_names(stmt.value) or [None])[0] == "kv_offsets")


class KvOffsetsByKeyHeads(SiteTransformer):
    mentioning = rf"\b{FUNCTION}\b"

    def __init__(self) -> None:
        super().__init__()
        self._plan: dict | None = None  # for the open _fix_seqlen_offsets: what to rewrite

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        if node.name.value == FUNCTION and self._plan is None:
            self.anchors += 1
            self._plan = self._decide(node)
        return True

    def _decide(self, function: cst.FunctionDef) -> dict:
        smalls = [s for line in find_all(function, cst.SimpleStatementLine) for s in line.body]
        queries = [n for s in smalls if (n := shape_unpack(s, "query"))]
        keys = [(s, n) for s in smalls if (n := shape_unpack(s, "key"))]
        scalings = [s for s in smalls if is_kv_scaling(s)]
        if len(queries) != 1 or len(keys) != 1 or len(scalings) != 1:
            self.problems.append(f"{FUNCTION}: expected one `... = query.shape`, one `... = key.shape` and one "
                                 f"`kv_offsets = kv_offsets * ...`, found {len(queries)}, {len(keys)}, {len(scalings)}")
            return {}
        q_heads, (key_stmt, key_names) = queries[0][2], keys[0]
        factors = product_names(scalings[0].value)[1:]
        if key_names[2] != "_" and key_names[2] in factors and q_heads not in factors:
            self.present += 1  # already scaled by the key's heads
            return {}
        if q_heads not in factors:
            self.problems.append(f"{FUNCTION}: kv_offsets is scaled by {factors}, neither the query's heads "
                                 f"({q_heads}) nor the key's; a shape this fix does not know")
            return {}
        heads = key_names[2] if key_names[2] != "_" else KV_HEADS
        bound = {n.value for n in find_all(function, cst.Name)}
        if key_names[2] == "_" and heads in bound:
            self.problems.append(f"{FUNCTION}: the name {heads} is taken; cannot name the key's heads")
            return {}
        self.changed += 1
        return {"key": key_stmt, "scaling": scalings[0], "heads": heads, "query_heads": q_heads}

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        plan = self._plan or {}
        if original is plan.get("key"):
            elements = list(updated.targets[0].target.elements)
            elements[2] = elements[2].with_changes(value=cst.Name(plan["heads"]))
            target = updated.targets[0].with_changes(target=updated.targets[0].target.with_changes(elements=elements))
            return updated.with_changes(targets=[target])
        if original is plan.get("scaling"):
            return updated.with_changes(value=self._swap(updated.value, plan["query_heads"], plan["heads"]))
        return updated

    def _swap(self, expr: cst.BaseExpression, old: str, new: str) -> cst.BaseExpression:
        if isinstance(expr, cst.Name):
            return expr.with_changes(value=new) if expr.value == old else expr
        return expr.with_changes(left=self._swap(expr.left, old, new), right=self._swap(expr.right, old, new))

    def leave_FunctionDef(self, original, updated):
        if original.name.value == FUNCTION:
            self._plan = {}
        return super().leave_FunctionDef(original, updated)


TRANSFORM = PythonTransform(KvOffsetsByKeyHeads, description="scale packed kv offsets by the key's head count",
                            anchor=f"function {FUNCTION}")
