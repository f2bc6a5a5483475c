"""Run a real (or fixture) `general_gemm` on CPU against test doubles.

HipblasltGemmDouble stands in for the compiled extension `tex`
(transformer_engine_torch): it implements `generic_gemm` with torch and, in
ROCm mode, raises "Unable to find any suitable algorithms" exactly where
hipBLASLt does: bias gradient requested (grad and bias), no gelu, fp32 output.
It is a fault-injecting double, not hipBLASLt; it lets the fix's logic run on
any machine. Everything else `general_gemm` calls gets an inert double, and a
name without one is reported, so a new TE version cannot slip through.
"""
from __future__ import annotations

import functools
import inspect
import symtable
import types
import typing
from dataclasses import dataclass, field

import libcst as cst
import torch

HIPBLASLT_ERROR = "Unable to find any suitable algorithms"


class HipblasltGemmDouble(types.SimpleNamespace):
    """Double of `tex` with the hipBLASLt BGRADB limitation (rocm=True) or without (CUDA)."""

    class CommOverlap:  # only used in annotations and isinstance checks
        pass

    class CommOverlapP2P:
        pass

    CommOverlapType = types.SimpleNamespace(AG="AG", RS="RS")

    def __init__(self, rocm: bool):
        super().__init__()
        self.rocm = rocm
        self.calls: list[dict] = []

    def generic_gemm(self, A, transa, B, transb, out, quantizer, out_dtype, bias, bias_dtype, gelu,
                     gelu_in, grad, workspace, workspace_size, accumulate, use_split_accumulator,
                     comm_overlap=None, comm_type=None, extra_output=None, bulk_overlap=False,
                     alpha=1.0, beta=None):
        self.calls.append({k: _comparable(v) for k, v in dict(
            A=A, B=B, transa=transa, transb=transb, out=out, out_dtype=out_dtype, bias=bias,
            gelu=gelu, grad=grad, accumulate=accumulate, comm_overlap=comm_overlap).items()})
        dtype = out_dtype or (out.dtype if out is not None else A.dtype)
        if self.rocm and grad and bias is not None and not gelu and dtype == torch.float32:
            raise RuntimeError(HIPBLASLT_ERROR)
        if A.dim() != 2 or B.dim() != 2:
            raise NotImplementedError("the double implements 2-D GEMMs only")
        # TE's convention in row-major terms: D = op(B) @ op(A)
        a = A.float().t() if transa else A.float()
        b = B.float().t() if transb else B.float()
        result = alpha * (b @ a)
        bias_grad = None
        if bias is not None and grad:  # the fused BGRADB epilogue: column sums of B
            bias_grad = B.sum(dim=0, dtype=torch.float32).to(dtype)
        elif bias is not None:
            result = result + bias.float()
        if out is None:
            return result.to(dtype), bias_grad, None, extra_output
        if accumulate:
            out.add_(result.to(out.dtype), alpha=1.0 if beta is None else 1.0)
        else:
            out.copy_(result.to(out.dtype))
        return out, bias_grad, None, extra_output


def _comparable(value):
    """A call argument as a value that == compares (tensors by dtype, shape, data)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), tuple(value.flatten().tolist()))
    return value


class _DTypes(dict):
    """TE_DType double: maps a torch dtype to itself."""

    def __missing__(self, key):
        return key


def _torch_with_hip(rocm: bool):
    """torch, but with torch.version.hip set as a ROCm build would have it."""
    proxy = types.ModuleType("torch")
    proxy.__dict__.update({k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
    proxy.version = types.SimpleNamespace(**{**vars(torch.version), "hip": "6.4.0" if rocm else None})
    return proxy


class _Never:
    """A type nothing is an instance of (quantized tensor classes, DebugQuantizer)."""


def inert_doubles() -> dict:
    never = {name: type(name, (_Never,), {}) for name in (
        "DebugQuantizer", "Float8BlockwiseQTensorStorage", "Float8BlockwiseQTensorBase",
        "NVFP4TensorStorage", "MXFP4TensorStorage", "Float8TensorStorage", "Float8TensorBase",
        "MXFP8TensorStorage", "QuantizedTensorStorage", "Quantizer")}
    return {
        **{n: getattr(typing, n) for n in ("Any", "Iterable", "List", "Optional", "Tuple", "Union")},
        **never,
        "TE_DType": _DTypes(),
        "validate_gemm_scale": lambda scale, enabled: (1.0 if enabled else 0.0) if scale is None else scale,
        "get_cublas_workspace": lambda *a, **k: torch.empty(8, dtype=torch.uint8),
        "get_tensor_device": lambda t: 0,
        "is_custom": lambda t: False,
        "_unwrap_tensor": lambda t, usage: t,
        "_validate_native_gemm_output_quantizer": lambda q: None,
        "_is_nvfp4_row_scaled_tensor": lambda t: False,
        "swizzle_inputs": lambda A, B, layout: None,
        "reset_swizzled_inputs": lambda A, B, saved: None,
        "_gemm_backend": lambda: "hipblaslt",
        "is_experimental": lambda t: False,
        **{name: _unreachable(name) for name in (
            "custom_gemm", "experimental_gemm", "_nvfp4_row_scaled_gemm_inputs")},
    }


def _unreachable(name: str):
    def call(*args, **kwargs):
        raise AssertionError(f"{name} called: the harness only runs plain-tensor GEMMs")
    return call


class MissingDouble(Exception):
    """general_gemm uses a global name the harness has no double for."""


def function_source(source: str, name: str = "general_gemm") -> str:
    module = cst.parse_module(source)
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            return module.code_for_node(stmt)
    raise LookupError(f"no top-level {name} in the source")


def global_names(code: str) -> set[str]:
    top = symtable.symtable(code, "<general_gemm>", "exec")
    names = {s.get_name() for s in top.get_symbols() if s.is_referenced()}
    for child in top.get_children():
        names |= {s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()}
    return names


def load_general_gemm(source: str, rocm: bool, tex=None):
    """general_gemm from `source`, with `tex` replaced by HipblasltGemmDouble
    (or the `tex` given). Returns (function, tex)."""
    code = function_source(source)
    tex = tex if tex is not None else HipblasltGemmDouble(rocm)
    namespace = {**inert_doubles(), "torch": _torch_with_hip(rocm), "tex": tex,
                 "IS_HIP_EXTENSION": rocm, "__builtins__": __builtins__}
    builtin_names = set(dir(__builtins__)) if isinstance(__builtins__, types.ModuleType) else set(__builtins__)
    missing = sorted(global_names(code) - set(namespace) - builtin_names)
    if missing:
        raise MissingDouble(f"general_gemm uses {missing}: add doubles for them")
    exec(compile(code, "<general_gemm>", "exec"), namespace)
    return namespace["general_gemm"], tex


@dataclass
class WgradCase:
    tokens: int = 96
    in_features: int = 48
    out_features: int = 40
    seed: int = 0

    def tensors(self):
        gen = torch.Generator().manual_seed(self.seed)
        x = torch.randn(self.tokens, self.in_features, generator=gen).bfloat16()
        dy = torch.randn(self.tokens, self.out_features, generator=gen).bfloat16()
        bias = torch.zeros(self.out_features, dtype=torch.bfloat16)
        main_grad = torch.randn(self.out_features, self.in_features, generator=gen)
        return x, dy, bias, main_grad


def workspace_kwargs(general_gemm) -> dict:
    """TE 2.1-2.7 take the cuBLAS workspace as an argument; later versions make it."""
    if "workspace" in inspect.signature(general_gemm).parameters:
        return {"workspace": torch.empty(8, dtype=torch.uint8)}
    return {}


def wgrad_call(general_gemm, x, dy, bias, main_grad):
    """The call TE's Linear backward makes for wgrad with fuse_wgrad_accumulation
    (fp32 main_grad, accumulate) and a bias whose grad is fused into the GEMM."""
    return general_gemm(x, dy, out_dtype=main_grad.dtype, layout="NT", grad=True, out=main_grad,
                        accumulate=True, bias=bias, **workspace_kwargs(general_gemm))


@dataclass
class CheckResult:
    """What the behavioural check saw; `problems` empty means the fix works."""

    unpatched_error: str | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_fix(unpatched_source: str, patched_source: str, case: WgradCase = WgradCase()) -> CheckResult:
    """Unpatched general_gemm must fail on ROCm; patched must give the reference
    wgrad and a bias grad bitwise equal to an fp32 sum, in the immediate and
    delayed-wgrad call patterns; on CUDA the extension must see the same
    arguments with and without the patch."""
    res = CheckResult()
    x, dy, bias, main_grad = case.tensors()
    ref_wgrad = main_grad + dy.float().t() @ x.float()
    ref_bgrad = dy.sum(dim=0, dtype=torch.float32)

    old, _ = load_general_gemm(unpatched_source, rocm=True)
    try:
        wgrad_call(old, x, dy, bias, main_grad.clone())
        res.problems.append("unpatched general_gemm did not fail where hipBLASLt does")
    except RuntimeError as err:
        res.unpatched_error = str(err)

    new, tex = load_general_gemm(patched_source, rocm=True)
    immediate_grad, delayed_grad = main_grad.clone(), main_grad.clone()
    deferred = functools.partial(wgrad_call, new, x, dy, bias, delayed_grad)  # wgrad_store.put(...)
    try:
        wgrad, bgrad, _, _ = wgrad_call(new, x, dy, bias, immediate_grad)
        d_wgrad, d_bgrad, _, _ = deferred()  # ... backward_dw() later
    except RuntimeError as err:
        res.problems.append(f"patched general_gemm failed on ROCm: {err}")
        return res
    if tex.calls and tex.calls[0]["bias"] is not None:
        res.problems.append("patched general_gemm still asked the GEMM for the fused bias grad")
    if not torch.allclose(wgrad, ref_wgrad, rtol=1e-5, atol=1e-4):
        res.problems.append(f"wgrad differs from the torch reference by {float((wgrad - ref_wgrad).abs().max())}")
    if bgrad is None or bgrad.dtype != torch.float32 or not torch.equal(bgrad, ref_bgrad):
        res.problems.append("bias grad is not bitwise equal to dy.sum(0, dtype=float32)")
    if not (torch.equal(wgrad, d_wgrad) and d_bgrad is not None and torch.equal(bgrad, d_bgrad)):
        res.problems.append("immediate and delayed wgrad calls differ")

    calls, weight = [], x[:8]  # any fixed [8 x in_features] tensor serves as a weight
    for source in (unpatched_source, patched_source):
        fn, cuda_tex = load_general_gemm(source, rocm=False)
        for bias_arg in (bias, None):  # fused-bgrad wgrad and plain wgrad
            wgrad_call(fn, x, dy, bias_arg, main_grad.clone())
        fn(weight, x, out_dtype=torch.bfloat16, layout="TN", bias=bias[:8],
           **workspace_kwargs(fn))  # a forward GEMM with a fused bias add
        calls.append(cuda_tex.calls)
    if calls[0] != calls[1]:
        res.problems.append("on CUDA the patched general_gemm passes different arguments to the GEMM")
    else:
        res.notes.append(f"CUDA path: {len(calls[0])} GEMM calls with identical arguments")
    return res
