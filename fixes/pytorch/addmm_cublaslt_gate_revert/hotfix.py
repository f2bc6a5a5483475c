"""Runtime hot-fix: prefer cuBLASLt where this torch build gates the addmm bias epilogue on it.

On builds with #172340, addmm/F.linear use the fused cuBLASLt bias (and
relu/gelu) epilogue only when the preferred BLAS backend is cuBLASLt, and on
CUDA the default preference resolves to cuBLAS. `enable()` probes what the
default path runs (kernel names of one small F.linear under the profiler) and,
if it is the unfused path, sets torch.backends.cuda.preferred_blas_library
("cublaslt"). That preference is process-wide: it also sends mm, bmm, matmul
and the other GEMMs through cuBLASLt (see README.md for what that costs).
"""
from __future__ import annotations

NAME = "addmm cuBLASLt preference"
_state: dict = {"previous": None}


def classify_kernels(names: list[str]) -> str:
    """'fused' (the cuBLASLt epilogue: a GEMM with `bias` in its name, or
    cuBLASLt's own epilogue kernel), 'unfused' (a GEMM plus ATen's copy of the
    bias and its activation kernels) or 'unknown', from CUDA kernel names."""
    lowered = [n.lower() for n in names]
    gemms = [n for n in lowered if any(k in n for k in ("gemm", "nvjet", "xmma", "cutlass"))]
    if any("bias" in n for n in gemms) or any("cublaslt::epilogue" in n for n in lowered):
        return "fused"
    if gemms and (any("at::native" in n for n in lowered) or any("badd" in n for n in gemms)):
        return "unfused"
    return "unknown"


def probe_default_path() -> str:
    """What F.linear with a 1-D bias runs now: 'fused', 'unfused' or 'unknown'."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    torch.nn.functional.linear(x, w, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.nn.functional.linear(x, w, b)
        torch.cuda.synchronize()
    return classify_kernels([e.name for e in prof.events() if e.device_type.name == "CUDA"])


def enable(force: bool = False) -> str:
    try:
        import torch
    except ImportError:
        return f"{NAME}: torch is not installed; nothing to do"
    if not torch.cuda.is_available() or getattr(torch.version, "hip", None):
        return f"{NAME}: no CUDA device (the gate only hurts CUDA builds); nothing to do"
    if _state["previous"] is not None:
        return f"{NAME}: already enabled"
    path = "forced" if force else probe_default_path()
    if path not in ("unfused", "forced"):
        return f"{NAME}: the default path already runs the {path} epilogue; nothing to do"
    _state["previous"] = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library("cublaslt")
    return (f"{NAME}: preferred BLAS library set to cublaslt (was {_state['previous']}); addmm/linear bias "
            "epilogues are fused again, and mm/bmm/matmul now also go through cuBLASLt")


def disable() -> str:
    if _state["previous"] is None:
        return f"{NAME}: was not enabled"
    import torch

    torch.backends.cuda.preferred_blas_library(_state["previous"])
    _state["previous"] = None
    return f"{NAME}: preferred BLAS library restored"
