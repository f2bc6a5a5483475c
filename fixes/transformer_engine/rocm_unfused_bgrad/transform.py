"""ROCm/TransformerEngine#634 as a libcst transformation of `general_gemm`
(transformer_engine/pytorch/cpp_extensions/gemm.py).

Two insertions into the function, anchored on statements every 2.x version
has, so the edit survives the drift around them:

  after `args = (A, transa, B, transb, out, quantizer, out_dtype, bias, ...)`:
      rocm_unfused_bgrad = <ROCm> and grad and bias is not None and not gelu
                           and ub is None and B is a plain tensor and the output is fp32
      if rocm_unfused_bgrad: args = args[:7] + (None,) + args[8:]   # GEMM without BGRADB
  before the final `return out, bias_grad, gelu_input, extra_output`:
      if rocm_unfused_bgrad: bias_grad = B summed over tokens in fp32

Every GEMM branch between the two (hipBLASLt, and in ROCm's fork the Triton
and FlyDSL backends) sees the same `args`, and delayed-wgrad callers go
through the same function. <ROCm> is `IS_HIP_EXTENSION` where the file
imports it (ROCm's fork) and `torch.version.hip is not None` elsewhere, so
the NVIDIA file needs no new import. The CUDA path is unchanged.
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import PythonTransform, SiteTransformer, dotted_name, find_all, module_binds

FUNCTION = "general_gemm"
FLAG = "rocm_unfused_bgrad"
BIAS_INDEX, GRAD_INDEX = 7, 11  # positions in the tuple passed to tex.generic_gemm

CONDITION = '''\
# ROCm: hipBLASLt has no algorithm for the fused bias-gradient epilogue (BGRADB)
# with fp32 output ("Unable to find any suitable algorithms"). Run the GEMM
# without it and compute the bias gradient separately (ROCm/TransformerEngine#634).
{flag} = (
    {is_hip}
    and grad
    and bias is not None
    and not gelu
    and ub is None
    and type(B) is torch.Tensor
    and (out.dtype if out is not None else out_dtype) == torch.float32
)
'''
DROP_BIAS = "if {flag}:\n    args = args[:{i}] + (None,) + args[{j}:]  # no fused bias grad\n"
BIAS_GRAD = '''\
if {flag}:
    # grad_output summed over tokens in fp32, the dtype the fused epilogue returns
    bias_grad = B.reshape(-1, B.shape[-1]).sum(dim=0, dtype=torch.float32)
'''


def is_args_tuple(stmt: cst.BaseStatement) -> bool:
    if not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)):
        return False
    assign = stmt.body[0]
    return (len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)
            and assign.targets[0].target.value == "args" and isinstance(assign.value, cst.Tuple))


def tuple_names(stmt: cst.SimpleStatementLine) -> list[str | None]:
    return [dotted_name(e.value) for e in stmt.body[0].value.elements]


def is_final_return(stmt: cst.BaseStatement) -> bool:
    if not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Return)):
        return False
    value = stmt.body[0].value
    return isinstance(value, cst.Tuple) and "bias_grad" in [dotted_name(e.value) for e in value.elements]


def already_fixed(function: cst.FunctionDef) -> bool:
    """Our edit, or any fix that computes bias_grad in Python with a sum."""
    if any(n.value == FLAG for n in find_all(function, cst.Name)):
        return True
    for assign in find_all(function, cst.Assign):
        targets = [dotted_name(t.target) for t in assign.targets]
        sums = [c for c in find_all(assign.value, cst.Call)
                if isinstance(c.func, cst.Attribute) and c.func.attr.value == "sum"]
        if "bias_grad" in targets and sums:
            return True
    return False


class UnfusedRocmBiasGrad(SiteTransformer):
    mentioning = rf"\b{FUNCTION}\b"

    def __init__(self) -> None:
        super().__init__()
        self.is_hip = "torch.version.hip is not None"

    def visit_Module(self, node: cst.Module) -> bool:
        if module_binds(node, "IS_HIP_EXTENSION"):
            self.is_hip = "IS_HIP_EXTENSION"
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        nested = len(self._scope) > 1
        super().leave_FunctionDef(original, updated)
        if original.name.value != FUNCTION or nested:
            return updated
        self.anchors += 1
        if already_fixed(original):
            self.present += 1
            return updated
        return self._rewrite(updated)

    def _rewrite(self, function: cst.FunctionDef) -> cst.FunctionDef:
        body = list(function.body.body)
        args_at = [i for i, s in enumerate(body) if is_args_tuple(s)]
        if len(args_at) != 1:
            self.problems.append(f"{FUNCTION}: expected one `args = (...)` tuple, found {len(args_at)}")
            return function
        names = tuple_names(body[args_at[0]])
        if len(names) <= GRAD_INDEX or names[BIAS_INDEX] != "bias" or names[GRAD_INDEX] != "grad":
            self.problems.append(f"{FUNCTION}: `args` no longer has bias at {BIAS_INDEX} and grad at "
                                 f"{GRAD_INDEX} (it is {names[:GRAD_INDEX + 1]})")
            return function
        if not is_final_return(body[-1]):
            self.problems.append(f"{FUNCTION}: its last statement is not `return out, bias_grad, ...`")
            return function
        fmt = dict(flag=FLAG, is_hip=self.is_hip, i=BIAS_INDEX, j=BIAS_INDEX + 1)
        after_args = [cst.parse_statement(CONDITION.format(**fmt)), cst.parse_statement(DROP_BIAS.format(**fmt))]
        before_return = cst.parse_statement(BIAS_GRAD.format(**fmt))
        split = args_at[0] + 1
        # the statement after `args` (usually `kwargs = {...}`) keeps its place; ours go after it
        # when it is the kwargs dict, so the GEMM arguments stay together
        if split < len(body) and _assigns(body[split], "kwargs"):
            split += 1
        new_body = body[:split] + _blank_first(after_args) + body[split:-1] + [
            _with_blank(before_return), body[-1]]
        self.changed += 1
        return function.with_changes(body=function.body.with_changes(body=new_body))


def _assigns(stmt: cst.BaseStatement, name: str) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)
            and dotted_name(stmt.body[0].targets[0].target) == name)


def _with_blank(stmt):
    return stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False), *stmt.leading_lines])


def _blank_first(stmts: list) -> list:
    return [_with_blank(stmts[0]), *stmts[1:]]


TRANSFORM = PythonTransform(
    UnfusedRocmBiasGrad,
    description="compute the bias grad outside hipBLASLt for fp32-output wgrad on ROCm",
    anchor=f"function {FUNCTION}",
)
