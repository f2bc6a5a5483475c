"""GPU benchmark of the separate bias-grad reduction (no TE needed).

    python -m fixmono.fixes.transformer_engine.rocm_unfused_bgrad.bench [--out DIR] [--quick]

For tokens x features shapes with bf16 grad_output and an fp32 result:
 (a) each reduction's time against the memory-bandwidth limit, i.e. the bytes
     of grad_output read divided by the device-to-device copy bandwidth
     measured in the same run;
 (b) the wall time it adds to the wgrad GEMM (bf16 inputs, fp32 output) when
     run after it on the same stream, and when run concurrently on a side
     stream (ordered by events, as the fix would do it).
Prints a markdown table; --out DIR also writes bench.json and bench.md.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import torch

from fixmono.bench.gpu_timing import graph_ms
from .reduce import triton_available, triton_column_sum

SHAPES = [(t, f) for t in (4096, 16384, 65536) for f in (1024, 4096, 8192, 16384)]
QUICK = [(4096, 1024), (16384, 4096)]


def timed(fn, budget_ms: float = 30.0) -> float:
    return graph_ms(fn, budget_ms)


def copy_bandwidth() -> float:
    """Bytes per ms of a 1 GiB device-to-device copy (read + write), the better
    of a copy-engine memcpy (eager) and an SM copy kernel (in a graph)."""
    src = torch.empty(1 << 29, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    eager = []
    for _ in range(10):
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        eager.append(start.elapsed_time(end))
    kernel = timed(lambda: torch.neg(src, out=dst))
    return 2 * src.numel() * src.element_size() / min(statistics.median(eager), kernel)


# --- reductions: grad_output [T, N] bf16 -> [N] fp32 ------------------------------------
def torch_sum(dy):
    return dy.sum(dim=0, dtype=torch.float32)


def two_stage(dy, rows: int = 256):
    """Sum blocks of `rows` tokens, then the block sums: more parallel work for
    narrow N, deterministic, plain torch."""
    t, n = dy.shape
    blocks = t // rows
    head = dy[: blocks * rows].view(blocks, rows, n).sum(dim=1, dtype=torch.float32).sum(dim=0)
    return head if blocks * rows == t else head + dy[blocks * rows:].sum(dim=0, dtype=torch.float32)


REDUCTIONS = {"torch.sum": torch_sum, "two-stage(256)": two_stage, "triton": triton_column_sum}


def wgrad_gemm(x, dy):
    """dy^T @ x with fp32 output, as the wgrad GEMM of a Linear layer."""
    try:
        return torch.mm(dy.t(), x, out_dtype=torch.float32)
    except TypeError:  # torch without out_dtype: same work, bf16 output
        return torch.mm(dy.t(), x)


def overlapped(x, dy, reduce, side: torch.cuda.Stream):
    """The reduction on a side stream, issued before the GEMM on the main one,
    joined by events (graph-capturable)."""
    main = torch.cuda.current_stream()
    side.wait_stream(main)  # grad_output is ready
    with torch.cuda.stream(side):
        bgrad = reduce(dy)
    out = wgrad_gemm(x, dy)
    main.wait_stream(side)  # bias grad is ready for whoever reads it on main
    if not torch.cuda.is_current_stream_capturing():
        dy.record_stream(side)
    return out, bgrad


def measure(t: int, f: int, bw: float) -> dict:
    x = torch.randn(t, f, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(t, f, device="cuda", dtype=torch.bfloat16)
    limit = dy.numel() * dy.element_size() / bw
    row = {"tokens": t, "features": f, "limit_ms": limit}
    names = [n for n in REDUCTIONS if n != "triton" or triton_available()]
    for name in names:
        row[f"{name}_ms"] = timed(lambda: REDUCTIONS[name](dy))
    best = min(names, key=lambda n: row[f"{n}_ms"])
    row["best"] = best
    reduce = torch_sum  # what the source patch and the default hot-fix run
    row["gemm_ms"] = timed(lambda: wgrad_gemm(x, dy))
    row["serial_ms"] = timed(lambda: (wgrad_gemm(x, dy), reduce(dy)))
    side = torch.cuda.Stream(priority=-1)
    row["side_ms"] = timed(lambda: overlapped(x, dy, reduce, side))
    if triton_available():  # a narrow grid (16 programs) leaves most SMs to the GEMM
        row["side_narrow_ms"] = timed(lambda: overlapped(x, dy, lambda d: triton_column_sum(d, 16), side))
    fastest = REDUCTIONS[best]
    row["deterministic"] = torch.equal(fastest(dy), fastest(dy)) and torch.equal(reduce(dy), reduce(dy))
    row["max_abs_diff_vs_torch"] = float((fastest(dy) - torch_sum(dy)).abs().max())
    del x, dy
    torch.cuda.empty_cache()
    return row


def table(rows: list[dict], device: str) -> str:
    head = ("| tokens x features | limit | torch.sum | two-stage(256) | triton | torch.sum/limit | best/limit | "
            "GEMM | sum/GEMM | +serial | +side stream | +side, narrow grid |\n|" + "---|" * 12)
    lines = [f"Device: {device}, torch {torch.__version__}. Times in ms (medians); "
             "+X = added wall time as % of the GEMM.", "", head]
    for r in rows:
        best = r[f"{r['best']}_ms"]
        pct = lambda k: f"{100 * (r[k] - r['gemm_ms']) / r['gemm_ms']:+.1f}%"
        lines.append(
            f"| {r['tokens']} x {r['features']} | {r['limit_ms']:.3f} | {r['torch.sum_ms']:.3f} | "
            f"{r['two-stage(256)_ms']:.3f} | {r.get('triton_ms', float('nan')):.3f} | "
            f"{r['torch.sum_ms'] / r['limit_ms']:.2f}x | {best / r['limit_ms']:.2f}x ({r['best']}) | "
            f"{r['gemm_ms']:.3f} | {100 * r['torch.sum_ms'] / r['gemm_ms']:.1f}% | "
            f"{pct('serial_ms')} | {pct('side_ms')} | "
            f"{pct('side_narrow_ms') if 'side_narrow_ms' in r else 'n/a'} |")
    ratios = [r[f"{r['best']}_ms"] / r["limit_ms"] for r in rows]
    torch_ratios = [r["torch.sum_ms"] / r["limit_ms"] for r in rows]
    lines += ["", f"Reduction vs bandwidth limit: torch.sum geomean {geomean(torch_ratios):.2f}x "
              f"(max {max(torch_ratios):.2f}x); best geomean {geomean(ratios):.2f}x (max {max(ratios):.2f}x)."]
    return "\n".join(lines)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("skipped: the benchmark needs a GPU")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    bw = copy_bandwidth()
    rows = [measure(t, f, bw) for t, f in (QUICK if args.quick else SHAPES)]
    device = torch.cuda.get_device_name()
    text = table(rows, device) + f"\nDeterministic (bitwise, two runs of torch.sum and of the fastest): {all(r['deterministic'] for r in rows)}." \
        + f"\nCopy bandwidth: {bw / 1e6:.0f} GB/s (read + write)."
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench.json").write_text(json.dumps({"device": device, "rows": rows, "bw": bw}, indent=1))
        (args.out / "bench.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
