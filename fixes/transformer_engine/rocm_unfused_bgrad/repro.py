"""Reproducer: TE Linear(bias) backward with fp32 main_grad accumulation on ROCm.

    python -m fixmono.fixes.transformer_engine.rocm_unfused_bgrad.repro [--json]

With TransformerEngine on ROCm it runs a tiny te.Linear(bias=True,
fuse_wgrad_accumulation=True) backward in bf16 with an fp32 main_grad and
reports hipBLASLt's "Unable to find any suitable algorithms"; it then enables
the hot-fix and runs again. Anywhere else the verdict is `skipped` (it needs
TE on ROCm), and the double-based check runs instead: our ROCm-shaped
general_gemm (and the installed TE's, if any) before and after the
transformation, against HipblasltGemmDouble, a fault-injecting double of the
extension.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import report, torch_backend
from . import hotfix
from .double import HIPBLASLT_ERROR, check_fix
from .transform import TRANSFORM

FIXTURE = Path(__file__).parent / "fixtures" / "gemm_rocm.py"


def linear_backward(te, tokens=64, in_features=128, out_features=96):
    """One Linear(bias) forward+backward as Megatron runs it with fp32 grad accumulation."""
    layer = te.Linear(in_features, out_features, bias=True, params_dtype=torch.bfloat16,
                      fuse_wgrad_accumulation=True)
    layer.weight.main_grad = torch.zeros(out_features, in_features, device="cuda", dtype=torch.float32)
    x = torch.randn(tokens, in_features, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    layer(x).float().sum().backward()
    torch.cuda.synchronize()
    return layer


def double_check() -> tuple[list[str], list[str]]:
    """(problems, lines) of the double-based check on our fixture and on the
    installed TE's gemm.py when there is one."""
    sources = {"ROCm-shaped fixture": FIXTURE.read_text()}
    try:
        import transformer_engine.pytorch.cpp_extensions.gemm as installed

        sources[f"installed TE ({Path(installed.__file__)})"] = Path(installed.__file__).read_text()
    except Exception:  # not installed, or fails to import without a GPU
        pass
    problems, lines = [], []
    for name, source in sources.items():
        res = check_fix(source, TRANSFORM.rewrite(source).source)
        problems += [f"{name}: {p}" for p in res.problems]
        lines.append(f"{name}: unpatched fails with {res.unpatched_error!r}; patched "
                     + ("ok (wgrad matches, bias grad bitwise = fp32 sum, immediate = delayed, "
                        "CUDA arguments unchanged)" if not res.problems else "FAILS: " + "; ".join(res.problems)))
    return problems, lines


def reproduce() -> ReproResult:
    problems, lines = double_check()
    check = "double-based check [HipblasltGemmDouble, not hipBLASLt]: " + " | ".join(lines)
    try:
        import transformer_engine.pytorch as te
    except Exception as err:
        te, why = None, f"TransformerEngine not importable ({type(err).__name__})"
    backend = torch_backend()
    if te is None or backend != "rocm":
        why = why if te is None else f"backend is {backend}"
        return ReproResult(Verdict.SKIPPED, f"{why}; {check}",
                           {"double_problems": problems, "double_check": lines},
                           needs="TransformerEngine on ROCm (hipBLASLt), e.g. MI300X/MI350X")
    try:
        linear_backward(te)
        first = None
    except RuntimeError as err:
        first = str(err)
    message = hotfix.enable()
    try:
        linear_backward(te)
        fixed = "passes with the hot-fix"
    except RuntimeError as err:
        fixed = f"still fails with the hot-fix: {err}"
    finally:
        hotfix.disable()
    details = {"error": first, "hotfix": message, "with_hotfix": fixed, "double_check": lines}
    if first and HIPBLASLT_ERROR in first:
        return ReproResult(Verdict.REPRODUCED, f"Linear(bias) wgrad with fp32 main_grad: {first}; {fixed}",
                           details)
    return ReproResult(Verdict.NOT_REPRODUCED,
                       f"Linear(bias) wgrad with fp32 main_grad ran on ROCm without error ({first or 'ok'})",
                       details)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true")
    return report(reproduce(), p.parse_args(argv).json)


if __name__ == "__main__":
    sys.exit(main())
