"""Reproducer: BatchNorm (eval) + ReLU with a negative running_var, eager against
the TorchScript NNC/TE fuser (what test_jit_fuser_te tests) and torch.compile.

    python -m fixmono.fixes.pytorch.batchnorm_negative_running_var.repro [--device cuda] [--json]

Eager gives NaN in the channels where running_var + eps < 0. The bug is a fused
kernel that gives numbers there: reported on ROCm 7.2 / MI300X (pytorch#168755,
#177665: 25600 of 81920 elements mismatched). On CPU and CUDA the paths agree
(measured on CPU here, and on an H200 with torch 2.11+cu130), so there the
verdict is not-reproduced and says that ROCm is needed.

--simulate-rocm runs the same comparison with RocmNanToNumberDouble, a
fault-injecting double of the reported ROCm fused kernel (NaN -> 0). It shows
the check's mechanism on any machine and is labelled as such; it never stands
in for the real verdict.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass

import torch

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import report, torch_backend

EPS = 1e-4
SHAPE = (4, 16, 32, 40)  # the test's input: 81920 elements, 5120 per channel
# Without LLVM, NNC on CPU interprets its IR (~7 s per variant at SHAPE): use
# a smaller batch of the same channels there; the mechanism is per element.
SMALL_SHAPE = (2, 16, 8, 10)


def input_shape(device: str) -> tuple[int, ...]:
    return SHAPE if device != "cpu" or torch._C._llvm_enabled() else SMALL_SHAPE
REPORTED = "ROCm 7.2 on MI300X (pytorch#168755, fixed in the test by #177665)"


def bn(i, x):
    return torch.batch_norm(i, x, x, x, x, False, 0.1, EPS, False).relu()


def bn_no_weight(i, x):
    return torch.batch_norm(i, None, x, x, x, False, 0.1, EPS, False).relu()


def bn_no_bias(i, x):
    return torch.batch_norm(i, x, None, x, x, False, 0.1, EPS, False).relu()


def bn_neither(i, x):
    return torch.batch_norm(i, None, None, x, x, False, 0.1, EPS, False).relu()


VARIANTS = (bn, bn_no_weight, bn_no_bias, bn_neither)


def make_inputs(device: str, valid: bool, seed: int = 0):
    """The test's data: one random tensor is weight, bias, mean and variance.
    valid=True is the fixed test: that tensor is non-negative."""
    gen = torch.Generator().manual_seed(seed)
    shape = input_shape(device)
    x = torch.randn(shape[1], generator=gen).to(device)
    i = torch.randn(*shape, generator=gen).to(device)
    return i, (x.abs() if valid else x)


def mismatches(expected: torch.Tensor, actual: torch.Tensor) -> int:
    """Elements assert_close(equal_nan=True) would reject (its float32 tolerances)."""
    close = torch.isclose(actual, expected, rtol=1.3e-6, atol=1e-5, equal_nan=True)
    return int((~close).sum())


@contextlib.contextmanager
def nnc_fuser():
    """The settings test_jit_fuser_te uses, restored afterwards."""
    saved = (torch._C._jit_can_fuse_on_cpu(), torch._C._jit_texpr_fuser_enabled(),
             torch._C._jit_get_te_must_use_llvm_cpu())
    torch._C._jit_override_can_fuse_on_cpu(True)
    torch._C._jit_set_te_must_use_llvm_cpu(False)
    torch._C._jit_set_texpr_fuser_enabled(True)
    try:
        yield
    finally:
        torch._C._jit_override_can_fuse_on_cpu(saved[0])
        torch._C._jit_set_texpr_fuser_enabled(saved[1])
        torch._C._jit_set_te_must_use_llvm_cpu(saved[2])


def run_nnc(fn, args):
    with nnc_fuser():
        traced = torch.jit.trace(fn, args)
        for _ in range(3):  # the profiling executor fuses after warm-up runs
            out = traced(*args)
        fused = "prim::TensorExprGroup" in str(traced.graph_for(*args))
    return out, fused


class Inductor:
    """torch.compile, each variant compiled once and reused for both data sets."""

    def __init__(self):
        self._compiled = {}

    def __call__(self, fn, args):
        if fn not in self._compiled:
            if not self._compiled and "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
                from torch._inductor import config

                config.compile_threads = 1  # four small graphs: see in_process_compile in ../inductor_mix_order_cat_grad
            self._compiled[fn] = torch.compile(fn, dynamic=False)
        return self._compiled[fn](*args), True


class RocmNanToNumberDouble:
    """Fault-injecting double of the ROCm fused kernel reported in #168755:
    where the correct result is NaN it returns a number (0), as a relu folded
    into a max without NaN propagation would. Not a ROCm measurement."""

    name = "rocm-double"

    def __call__(self, fn, args):
        return torch.nan_to_num(fn(*args), nan=0.0), True


@dataclass
class PathResult:
    path: str
    mismatched: int = 0
    total: int = 0
    fused: bool = True
    error: str | None = None


def compare_paths(device: str, valid: bool, paths: dict) -> list[PathResult]:
    args = make_inputs(device, valid)
    results = []
    for name, runner in paths.items():
        res = PathResult(name)
        for fn in VARIANTS:
            expected = fn(*args)
            try:
                out, fused = runner(fn, args)
            except Exception as err:  # e.g. no C++ compiler for inductor on CPU
                res.error = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
                break
            res.fused &= fused
            res.mismatched += mismatches(expected, out)
            res.total += expected.numel()
        results.append(res)
    return results


def describe(results: list[PathResult]) -> str:
    parts = []
    for r in results:
        if r.error:
            parts.append(f"{r.path}: not run ({r.error})")
        else:
            pct = 100.0 * r.mismatched / r.total if r.total else 0.0
            note = "" if r.fused else ", no fusion group formed"
            parts.append(f"{r.path}: {r.mismatched}/{r.total} differ ({pct:.1f}%{note})")
    return "; ".join(parts)


def reproduce(device: str | None = None, simulate_rocm: bool = False,
              compile: bool = True) -> ReproResult:
    backend = torch_backend()
    device = device or ("cuda" if backend != "cpu" else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        return ReproResult(Verdict.SKIPPED, f"device {device} requested but no GPU is visible",
                           needs=f"a GPU; the bug was reported on {REPORTED}")
    if simulate_rocm:
        paths = {RocmNanToNumberDouble.name: RocmNanToNumberDouble()}
    else:
        paths = {"nnc": run_nnc}
        if compile:
            paths["inductor"] = Inductor()
    invalid = compare_paths(device, valid=False, paths=paths)
    valid = compare_paths(device, valid=True, paths=paths)
    i, x = make_inputs(device, valid=False)
    neg = int((x + EPS < 0).sum())
    nan = int(torch.isnan(bn(i, x)).sum())
    details = {"backend": backend, "device": device, "torch": torch.__version__,
               "input_shape": list(i.shape),
               "negative_variance_channels": neg, "eager_nan_elements": nan,
               "invalid_running_var": [vars(r) for r in invalid],
               "fixed_running_var": [vars(r) for r in valid]}
    bad = [r for r in invalid if not r.error and r.mismatched]
    where = f"{backend} ({device}), torch {torch.__version__}, input {tuple(i.shape)}"
    data = f"running_var with {neg}/{SHAPE[1]} channels below -eps, eager NaN in {nan} elements"
    fixed = f"with the fix (non-negative running_var): {describe(valid)}"
    label = " [fault-injecting double, not a ROCm run]" if simulate_rocm else ""
    if bad:
        return ReproResult(Verdict.REPRODUCED,
                           f"eager and fused disagree on {where}{label}: {describe(invalid)}; "
                           f"{data}; {fixed}", details)
    return ReproResult(Verdict.NOT_REPRODUCED,
                       f"eager and fused agree on {where}: {describe(invalid)}; {data}; {fixed}",
                       details, needs=None if backend == "rocm" else f"ROCm: reported on {REPORTED}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", help="cpu or cuda (default: the GPU if there is one)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile path")
    p.add_argument("--simulate-rocm", action="store_true",
                   help="compare against RocmNanToNumberDouble instead of the real fused paths")
    args = p.parse_args(argv)
    result = reproduce(args.device, simulate_rocm=args.simulate_rocm, compile=not args.no_compile)
    return report(result, args.json)


if __name__ == "__main__":
    sys.exit(main())
