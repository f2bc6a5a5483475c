"""Reproducer: torch.compile's cu_seqlens prologue gives [n, n] instead of [0, n] (CUDA).

    python -m fixmono.fixes.pytorch.inductor_masked_store_cache.repro [--json]

`F.pad(torch.cumsum(mask.sum(-1, dtype=int32), 0, dtype=int32), (1, 0))`,
the prologue flash-attention varlen callers (transformers among them) use to
make cu_seqlens from an attention mask, compiled by Inductor for a (1, n)
all-True mask on a CUDA device, against eager. For n = 16384 Inductor makes a
split reduction whose second stage carries the pad; the pad's masked load is
served from the CSE store cache, and masked() then drops its fill value.
Compiled with a fresh Inductor cache, in a fresh interpreter without and with
the hot-fix (the two at once: each compiles on one core, in its own process).
Exit 1 reproduced, 0 not reproduced, 77 skipped (no CUDA).
"""
from __future__ import annotations

import os
import sys
import tempfile

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import MeasureFailed, cli, measured_apart

FIX_ID = "pytorch-inductor-masked-store-cache"
SIZES = (16384, 65536)


def measure() -> dict:
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        return {"torch": torch.__version__, "device": None}
    import torch._inductor.config as inductor

    inductor.force_disable_caches = True  # and a cache folder of its own: no kernel of an earlier run
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        inductor.compile_threads = 1  # two small graphs: see in_process_compile in ../inductor_mix_order_cat_grad
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="fixmono-inductor-")
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="fixmono-triton-")

    def cu_seqlens(mask):
        lengths = mask.sum(dim=-1, dtype=torch.int32)
        return F.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))

    cases = {}
    for n in SIZES:
        mask = torch.ones(1, n, dtype=torch.bool, device="cuda")
        torch._dynamo.reset()
        compiled = torch.compile(cu_seqlens, fullgraph=True, dynamic=False)(mask)
        cases[str(n)] = {"eager": cu_seqlens(mask).tolist(), "compiled": compiled.tolist()}
    return {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "cases": cases}


def wrong(side: dict) -> list[str]:
    return [n for n, case in side["cases"].items() if case["eager"] != case["compiled"]]


def reproduce() -> ReproResult:
    from concurrent.futures import ThreadPoolExecutor

    try:
        with ThreadPoolExecutor(2) as pool:  # correctness, not timing: the two sides may share the GPU
            sides = [pool.submit(measured_apart, f"{__package__}.repro", fix_id, timeout=900)
                     for fix_id in (None, FIX_ID)]
            before, after = (side.result() for side in sides)
        if before["device"] is None:
            return ReproResult(Verdict.SKIPPED, f"torch {before['torch']}: needs a CUDA device (Inductor's Triton "
                                                "code)", needs="cuda")
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch with CUDA: {err}", needs="cuda")
    label = f"{before['device']}, torch {before['torch']}"
    details = {"unpatched": before, "patched": after}
    if not wrong(before):
        return ReproResult(Verdict.NOT_REPRODUCED, f"{label}: compiled cu_seqlens equal eager for n in {SIZES}",
                           details)
    shown = "; ".join(f"n={n}: eager {before['cases'][n]['eager']}, compiled {before['cases'][n]['compiled']}"
                      for n in wrong(before))
    fixed = "equal with the hot-fix" if not wrong(after) else \
        f"with the hot-fix still wrong for n in {wrong(after)} ({after['hotfix']})"
    return ReproResult(Verdict.REPRODUCED, f"{label}: {shown}; {fixed}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
