"""pytorch/pytorch#193103 (issue #193061) as a libcst transformation of
torch/_inductor/codegen/simd.py, `SIMDScheduling._codegen_mix_order_reduction`:
after the fused mix-order kernel, each partial reduction's final reduce is
emitted as `<buffer_name> = <workspace slice>.<op>(dim=0)...`, which rebinds
the buffer's name in the generated wrapper. When the buffer is a view into
another buffer's storage (a NonOwningLayout: e.g. the gradients of chunks of
one parameter, assembled by a cat), the rebinding drops the write and that
region of the real buffer is never written (garbage or the previous step's
values). From 2.10.0 (mix-order reduction on by default) to 2.14.1.

The emitted line becomes, for such a buffer only, a write through the view:
`<buffer_name>.copy_(<the same reduce>)` after the view's allocation is
emitted; every other buffer keeps the line it had. (2.15.0 restructured the
loop around the same branch; this is the minimal form of it.)

Presence check: a `.copy_(` written, or NonOwningLayout tested, in the loop.
A function without the loop (before 2.10) is no anchor.
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import LinePlanTransformer, PythonTransform, code, dotted_name, find_all, module_binds

FUNCTION = "SIMDScheduling._codegen_mix_order_reduction"
BUFFER, REDUCE = "written_through", "reduce_expr"
WHY = ("# a view into another buffer (e.g. a cat destination): write through it; rebinding the name "
       "leaves that region never written (pytorch/pytorch#193061)")



def is_partial_accum_loop(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.For) and any(isinstance(n, cst.Attribute) and n.attr.value == "saved_partial_accumulate"
                                             for n in find_all(node.iter, cst.Attribute))


def writeline(line: cst.SimpleStatementLine) -> cst.Call | None:
    stmt = line.body[0] if len(line.body) == 1 else None
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call) and \
            isinstance(stmt.value.func, cst.Attribute) and stmt.value.func.attr.value == "writeline":
        return stmt.value
    return None


def rebinds_buffer(call: cst.Call) -> bool:
    """writeline(final_reduce) or writeline(f"{buffer_name} = ...")."""
    if len(call.args) != 1:
        return False
    arg = call.args[0].value
    if isinstance(arg, cst.Name):
        return arg.value == "final_reduce"
    if isinstance(arg, cst.FormattedString) and len(arg.parts) >= 2:
        first, second = arg.parts[0], arg.parts[1]
        return (isinstance(first, cst.FormattedStringExpression) and dotted_name(first.expression) == "buffer_name"
                and isinstance(second, cst.FormattedStringText) and second.value.startswith(" = "))
    return False


def already_writes_through(loop: cst.For) -> bool:
    texts = [code(s) for s in find_all(loop, cst.SimpleString)] + [code(s) for s in find_all(loop, cst.FormattedString)]
    return any(".copy_(" in t for t in texts) or any(
        isinstance(n, cst.Attribute) and n.attr.value == "NonOwningLayout" for n in find_all(loop, cst.Attribute))


class WriteThroughNonOwningOutputs(LinePlanTransformer):
    mentioning = r"\b_codegen_mix_order_reduction\b"  # (module_binds reads the imports: never set aside)

    def __init__(self) -> None:
        super().__init__()
        self._imports_ir = False

    def visit_Module(self, node: cst.Module) -> bool:
        self._imports_ir = module_binds(node, "ir")
        return True

    def targets(self, qualname: str) -> bool:
        return qualname == FUNCTION

    def plan(self, function: cst.FunctionDef) -> dict:
        loops = [n for n in find_all(function, cst.For) if is_partial_accum_loop(n)  # not the renaming loop
                 and any(writeline(line) for line in find_all(n, cst.SimpleStatementLine))]
        if not loops:
            return {}  # no final reduce of partial accumulations: not this code
        self.anchors += 1
        if len(loops) != 1:
            self.problems.append(f"{FUNCTION}: {len(loops)} loops writing the final reduces, expected one")
            return {}
        loop = loops[0]
        if already_writes_through(loop):
            self.found("final reduce written through views")
            return {}
        lines = [line for line in find_all(loop, cst.SimpleStatementLine)
                 if (call := writeline(line)) is not None and rebinds_buffer(call)]
        if len(lines) != 1:
            self.problems.append(f"{FUNCTION}: expected one writeline of `<buffer_name> = <reduce>`, found {len(lines)}")
            return {}
        names = {n.value for n in find_all(function, cst.Name)}
        if "buffer_name" not in names or names & {BUFFER, REDUCE}:
            self.problems.append(f"{FUNCTION}: the loop does not bind buffer_name, or {BUFFER}/{REDUCE} are taken")
            return {}
        if not self._imports_ir:
            self.problems.append(f"{FUNCTION}: the module does not import `ir` (needed for NonOwningLayout)")
            return {}
        self.change("final reduce written through views")
        call = writeline(lines[0])
        wrapper, line = code(call.func.value), code(call.args[0].value)
        branch = cst.parse_statement(
            f"if {BUFFER} is not None and isinstance(getattr({BUFFER}, 'layout', None), ir.NonOwningLayout):\n"
            f"    {WHY}\n"
            f"    {wrapper}.codegen_allocation({BUFFER})\n"
            f"    {REDUCE} = ({line}).split(' = ', 1)[1]\n"
            f"    {wrapper}.writeline(f'{{buffer_name}}.copy_({{{REDUCE}}})')\n"
            f"else:\n"
            f"    pass\n")
        # the original line itself (libcst re-indents its continuation lines) as the else branch
        branch = branch.with_changes(orelse=cst.Else(body=cst.IndentedBlock(
            body=[lines[0].with_changes(leading_lines=[])])))
        lookup = cst.parse_statement(f"{BUFFER} = V.graph.get_buffer(buffer_name)\n")
        return {lines[0]: [lookup.with_changes(leading_lines=lines[0].leading_lines), branch]}


TRANSFORM = PythonTransform(WriteThroughNonOwningOutputs, description="write mix-order final reduces through views",
                            anchor=f"final reduce loop in {FUNCTION}")
