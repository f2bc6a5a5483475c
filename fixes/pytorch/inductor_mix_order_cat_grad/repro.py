"""Reproducer: compiled gradients of chunk()s of one parameter (CUDA, Triton).

    python -m fixmono.fixes.pytorch.inductor_mix_order_cat_grad.repro [--json]

The reported pattern (AdaLN / DiT scale-shift tables): two modulated layer
norms whose shift and scale are chunks of one [1, 4, D] parameter, over
32768 tokens of width 1024 (large enough for Inductor to fuse the row and
column reductions: mix-order reduction, on by default from 2.10). The
parameter's gradient from torch.compile against eager, per chunk; then
compiled again with the hot-fix enabled (this fix's rewrite of the installed
simd.py), with Inductor's caches off so nothing compiled before is reused.
Exit 1 reproduced, 0 not reproduced, 77 skipped (no CUDA GPU).
"""
from __future__ import annotations

import os
import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import cli

TOKENS, WIDTH = 32768, 1024
WRONG, RIGHT = 1e-2, 1e-4  # relative error per chunk: float32 round-off is ~1e-7


def table_grad(compiled: bool):
    import torch
    import torch.nn.functional as F

    def step(x, table):
        shift1, scale1, shift2, scale2 = table.chunk(4, dim=1)
        x = x + F.layer_norm(x, (WIDTH,)) * (1 + scale1) + shift1
        x = x + F.layer_norm(x, (WIDTH,)) * (1 + scale2) + shift2
        return (x * x).sum()

    torch.manual_seed(0)
    x = torch.randn(1, TOKENS, WIDTH, device="cuda")
    table = torch.nn.Parameter(torch.randn(1, 4, WIDTH, device="cuda") * 0.1)
    (torch.compile(step) if compiled else step)(x, table).backward()
    return table.grad.detach().clone()


def in_process_compile() -> int | None:
    """Compile in this process (compile_threads 1) unless the user chose a number:
    a reproducer compiles a few small graphs, and a pool of compile workers,
    each of them importing torch, costs more than it saves, the more so beside
    other reproducers (`status --run` on an H200, 2026-11-27: this reproducer
    21.2 -> 13.0 s, the masked-store one 40.2 -> 28.5 s, batchnorm's 26.7 ->
    17.3 s). Returns the value it replaced, for restore_compile()."""
    from torch._inductor import config

    saved = config.compile_threads
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        config.compile_threads = 1
    return saved


def chunk_errors(reference) -> list[float]:
    import torch

    torch._dynamo.reset()
    got = table_grad(compiled=True)
    return [float((got[0, i] - reference[0, i]).norm() / reference[0, i].norm()) for i in range(4)]


def reproduce() -> ReproResult:
    try:
        import torch
        from torch._inductor import config
    except ImportError as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch with Inductor: {err}", needs="a CUDA GPU with Triton")
    if not torch.cuda.is_available():
        return ReproResult(Verdict.SKIPPED, "no CUDA GPU here: mix-order reduction is a Triton GPU fusion",
                           needs="a CUDA GPU with Triton")
    from . import hotfix

    label = f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}"
    if not hasattr(config.triton, "mix_order_reduction"):
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: no mix-order reduction in this torch (before 2.10)")
    saved = (config.fx_graph_cache, config.triton.mix_order_reduction, in_process_compile())
    config.fx_graph_cache, config.triton.mix_order_reduction = False, True  # code generated here, not reused
    try:
        reference = table_grad(compiled=False)
        before = chunk_errors(reference)
        message = hotfix.enable()
        try:
            after = chunk_errors(reference)
        finally:
            hotfix.disable()
    finally:
        config.fx_graph_cache, config.triton.mix_order_reduction, config.compile_threads = saved
        torch._dynamo.reset()
    details = {"release": label, "hotfix": message, "unpatched_rel_error_per_chunk": before,
               "patched_rel_error_per_chunk": after}
    shown = ", ".join(f"{e:.2g}" for e in before)
    if max(after) > RIGHT:
        return ReproResult(Verdict.REPRODUCED, f"{label}: even with the fix the compiled gradient is wrong "
                                               f"(per chunk {', '.join(f'{e:.2g}' for e in after)})", details)
    if max(before) <= RIGHT:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: compiled gradient equals eager on every chunk "
                                                   f"(relative error {shown})", details)
    wrong = [i + 1 for i, e in enumerate(before) if e > WRONG]
    return ReproResult(Verdict.REPRODUCED,
                       f"{label}: compiled gradient of chunks {wrong} of the shared table is wrong (relative error "
                       f"per chunk {shown}: never written); with the fix every chunk equals eager "
                       f"(max {max(after):.1g})", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
