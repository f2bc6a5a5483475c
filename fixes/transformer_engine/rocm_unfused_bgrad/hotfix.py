"""Runtime hot-fix: compute the bias grad outside hipBLASLt on ROCm, for stacks that cannot rebuild TE.

Wraps the extension's `generic_gemm` (transformer_engine_torch), which every
`general_gemm` call, immediate or delayed wgrad, reaches through a module
attribute lookup. Under the same conditions as the source fix (ROCm, bias
grad requested, no gelu, no userbuffers, plain-tensor grad_output, fp32
output) the GEMM runs without the fused bias grad, and the bias grad is
grad_output summed over tokens in fp32.

    from . import hotfix
    hotfix.enable()    # a message saying what it did, or why nothing
    hotfix.disable()
"""
from __future__ import annotations

import functools

BIAS, GELU, GRAD, OUT, OUT_DTYPE, B_INDEX = 7, 9, 11, 4, 6, 2  # positions in generic_gemm's arguments
_ORIGINAL = "_fixmono_original_generic_gemm"


def needs_unfused_bgrad(args: tuple, kwargs: dict, fp32_dtypes: tuple) -> bool:
    import torch

    if len(args) <= GRAD or not args[GRAD] or args[BIAS] is None or args[GELU]:
        return False
    if kwargs.get("comm_overlap") is not None or type(args[B_INDEX]) is not torch.Tensor:
        return False
    out, out_dtype = args[OUT], args[OUT_DTYPE]
    return (out.dtype if out is not None else out_dtype) in fp32_dtypes


def wrap(original, fp32_dtypes: tuple, fast_reduction: bool = False):
    from .reduce import column_sum, torch_column_sum

    bias_grad = column_sum if fast_reduction else torch_column_sum

    @functools.wraps(original)
    def generic_gemm(*args, **kwargs):
        if not needs_unfused_bgrad(args, kwargs, fp32_dtypes):
            return original(*args, **kwargs)
        args = args[:BIAS] + (None,) + args[BIAS + 1:]
        out, _, gelu_input, extra_output = original(*args, **kwargs)
        return out, bias_grad(args[B_INDEX]), gelu_input, extra_output

    setattr(generic_gemm, _ORIGINAL, original)
    return generic_gemm


def _fp32_dtypes(tex) -> tuple:
    import torch

    te_fp32 = getattr(getattr(tex, "DType", None), "kFloat32", None)
    return (torch.float32,) if te_fp32 is None else (torch.float32, te_fp32)


def enable(tex=None, rocm: bool | None = None, fast_reduction: bool = False) -> str:
    """Install the wrapper. fast_reduction=True sums with the two-stage Triton
    kernel of reduce.py (faster for narrow layers, deterministic, but a
    different fp32 rounding than the source patch's torch sum). `tex` and
    `rocm` are for tests (default: the installed extension, and whether torch
    is a ROCm build). Idempotent."""
    name = "TE unfused ROCm bias grad"
    if tex is None:
        try:
            import transformer_engine_torch as tex
        except ImportError:
            return f"{name}: TransformerEngine is not installed; nothing to do"
    if rocm is None:
        import torch

        rocm = getattr(torch.version, "hip", None) is not None
    if not rocm:
        return f"{name}: not a ROCm build; cuBLASLt has the fused bias grad, nothing to do"
    if hasattr(tex.generic_gemm, _ORIGINAL):
        return f"{name}: already enabled"
    tex.generic_gemm = wrap(tex.generic_gemm, _fp32_dtypes(tex), fast_reduction)
    return f"{name}: enabled (generic_gemm wrapped: fp32-output wgrad bias grad computed separately)"


def disable(tex=None) -> str:
    name = "TE unfused ROCm bias grad"
    if tex is None:
        try:
            import transformer_engine_torch as tex
        except ImportError:
            return f"{name}: TransformerEngine is not installed; nothing to do"
    original = getattr(tex.generic_gemm, _ORIGINAL, None)
    if original is None:
        return f"{name}: was not enabled"
    tex.generic_gemm = original
    return f"{name}: disabled"
