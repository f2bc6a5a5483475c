"""Reproducer and benchmark: does the default addmm/F.linear path lose the fused
cuBLASLt bias epilogue, and what does that cost?

    python -m fixmono.fixes.pytorch.addmm_cublaslt_gate_revert.repro [--full|--quick] [--out DIR] [--json]

Three modes, in two subprocesses (DISABLE_ADDMM_CUDA_LT is read once per
process, the preference at every call):
  default  nothing set                                               } one process,
  fused    torch.backends.cuda.preferred_blas_library("cublaslt")  } in this order
           (= the hot-fix)
  unfused  DISABLE_ADDMM_CUDA_LT=1
each time F.linear, addmm, _addmm_activation (relu, gelu) with a 1-D bias, and
a plain mm (what the preference also changes), for bf16, fp16 and fp32, and
record which kernels ran (profiler names: `bias` in the GEMM = fused).
Verdict: reproduced when the default path runs unfused where the fused path is
faster. Needs a CUDA GPU (exit 77 elsewhere).

Grids: the default (what `status --run` and `drift --run` run) is a decode-like
M = 16 and a training-like M = 2048 by (K, N) = 1024x1024 and 4096x4096 in
the three dtypes: 60 points a mode, among them where the epilogue wins most
(bf16/fp16 at 1024x1024, 1.5-1.8x on an H200) and where it loses (fp32
16x4096x4096, 0.55x). `--full` is the grid of the published table (290
points, M = 1..32768, K and N to 16384: about two minutes on an H200);
`--quick` four shapes.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from fixmono.runtime.child import child_env, module_command
from fixmono.model.fix import ReproResult, Verdict
from fixmono.bench.gpu_timing import graph_ms
from fixmono.runtime.repro import report

MODES = ("default", "fused", "unfused")
OPS = ("linear", "addmm", "addmm_relu", "addmm_gelu", "mm")
DTYPES = ("bfloat16", "float16", "float32")
M_VALUES = (1, 16, 2048, 8192, 32768)
KN_VALUES = ((1024, 1024), (4096, 4096), (4096, 16384), (16384, 4096))
GRIDS = {
    "full": {"m": M_VALUES, "kn": KN_VALUES, "dtypes": DTYPES},
    "default": {"m": (16, 2048), "kn": ((1024, 1024), (4096, 4096)), "dtypes": DTYPES},
    "quick": {"m": (16, 8192), "kn": ((4096, 4096),), "dtypes": ("bfloat16", "float32")},
}
NOISE = 0.03  # relative differences below this are noise


# --- child: time one mode -----------------------------------------------------------
def op_call(op, x, w, b):
    import torch
    import torch.nn.functional as F

    wt = w.t()
    return {"linear": lambda: F.linear(x, w, b),
            "addmm": lambda: torch.addmm(b, x, wt),
            "addmm_relu": lambda: torch._addmm_activation(b, x, wt, use_gelu=False),
            "addmm_gelu": lambda: torch._addmm_activation(b, x, wt, use_gelu=True),
            "mm": lambda: torch.mm(x, wt)}[op]


MARK = "spin_kernel"  # torch.cuda._sleep's kernel: the boundary between two calls' kernels in one trace


def kernels(fns) -> list[list[str]]:
    """The CUDA kernels each of `fns` ran, from one profiler session (a session
    of its own per call cost more than the timings): the calls one after the
    other, each followed by a marker kernel, the trace cut at the markers. (One
    session for the whole grid was slower still: 128 s for the default grid on
    an H200, 2026-11-27, against 33 s for a session per shape.)"""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for fn in fns:
            fn()
            torch.cuda._sleep(1)
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
    return split_at_marks([e.name for e in events], len(fns))


def split_at_marks(names: list[str], calls: int) -> list[list[str]]:
    """Kernel names in the order they ran, each call's followed by a marker:
    the sorted names of each call's kernels. Anything else is an error, never a guess."""
    groups: list[set[str]] = [set()]
    for name in names:
        if MARK in name:
            groups.append(set())
        else:
            groups[-1].add(name)
    if len(groups) != calls + 1 or groups[-1]:
        raise RuntimeError(f"{len(groups) - 1} markers in the trace of {calls} calls")
    return [sorted(g) for g in groups[:-1]]


def child(mode: str, grid: str) -> dict:
    import torch

    from .hotfix import classify_kernels

    if mode == "fused":
        torch.backends.cuda.preferred_blas_library("cublaslt")
    torch.backends.cuda.matmul.allow_tf32 = False
    g = GRIDS[grid]
    rows = []
    for dtype_name in g["dtypes"]:
        dtype = getattr(torch, dtype_name)
        for m in g["m"]:
            for k, n in g["kn"]:
                if dtype == torch.float32 and m * k * n > 2 ** 40:
                    continue  # fp32 without TF32: seconds per call, skipped
                x = torch.randn(m, k, device="cuda", dtype=dtype)
                w = torch.randn(n, k, device="cuda", dtype=dtype)
                b = torch.randn(n, device="cuda", dtype=dtype)
                fns = [op_call(op, x, w, b) for op in OPS]
                for fn in fns:
                    fn()  # the first call of a shape picks its algorithm: not in the trace
                for op, fn, names in zip(OPS, fns, kernels(fns)):
                    rows.append({"op": op, "dtype": dtype_name, "m": m, "k": k, "n": n,
                                 "ms": graph_ms(fn), "path": classify_kernels(names) if op != "mm" else "mm",
                                 "kernels": names})
                del x, w, b, fns
    return {"mode": mode, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
            "preferred_blas": str(torch.backends.cuda.preferred_blas_library()), "rows": rows}


PROCESSES = (("default", "fused"), ("unfused",))  # the preference is read at each call: default and fused share one


def run_modes(modes: tuple[str, ...], grid: str) -> dict[str, dict]:
    env = child_env({k: v for k, v in os.environ.items() if k != "DISABLE_ADDMM_CUDA_LT"})
    if "unfused" in modes:
        env["DISABLE_ADDMM_CUDA_LT"] = "1"
    cmd = module_command(f"{__package__}.repro", "--child", ",".join(modes))
    proc = subprocess.run(cmd + ["--grid", grid], env=env, capture_output=True, text=True)
    runs = [json.loads(l) for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode or [r.get("mode") for r in runs] != list(modes):
        raise RuntimeError(f"{'+'.join(modes)} run failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return {r["mode"]: r for r in runs}


# --- analysis -------------------------------------------------------------------------
def key(row) -> tuple:
    return row["op"], row["dtype"], row["m"], row["k"], row["n"]


def default_path(d: dict, f: dict, u: dict) -> str:
    """Which path the default run took: the kernels it ran compared with the
    forced-fused and forced-unfused runs (names alone can mislead: fp32 Lt runs
    a GEMM plus cuBLASLt's own epilogue kernel)."""
    if d["op"] == "mm":
        return "mm"
    if f["kernels"] != u["kernels"]:
        if d["kernels"] == f["kernels"]:
            return "fused"
        if d["kernels"] == u["kernels"]:
            return "unfused"
    return d["path"]


def analyse(runs: dict[str, dict]) -> dict:
    """Join the three modes per (op, dtype, shape) and decide the verdict."""
    by_mode = {mode: {key(r): r for r in run["rows"]} for mode, run in runs.items()}
    table = []
    for k, d in by_mode["default"].items():
        f, u = by_mode["fused"].get(k), by_mode["unfused"].get(k)
        if not f or not u:
            continue
        table.append({"op": k[0], "dtype": k[1], "m": k[2], "k": k[3], "n": k[4],
                      "default_ms": d["ms"], "fused_ms": f["ms"], "unfused_ms": u["ms"],
                      "default_path": default_path(d, f, u), "fused_path": f["path"], "unfused_path": u["path"],
                      "speedup_fused": u["ms"] / f["ms"], "hotfix_vs_default": f["ms"] / d["ms"]})
    epilogue = [r for r in table if r["op"] != "mm"]
    hurt = [r for r in epilogue if r["default_path"] == "unfused" and r["speedup_fused"] > 1 + NOISE]
    loses = [r for r in epilogue if r["speedup_fused"] < 1 - NOISE]
    hotfix_slower = [r for r in table if r["hotfix_vs_default"] > 1 + NOISE]
    return {"table": table, "hurt": hurt, "epilogue_loses": loses, "hotfix_slower": hotfix_slower,
            "geomean_speedup_fused": geomean([r["speedup_fused"] for r in epilogue]),
            "geomean_speedup_by_dtype": {dt: geomean([r["speedup_fused"] for r in epilogue if r["dtype"] == dt])
                                         for dt in sorted({r["dtype"] for r in epilogue})}}


def geomean(values) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def verdict(analysis: dict, runs: dict) -> ReproResult:
    a = analysis
    shape = lambda r: f"{r['op']} {r['dtype']} {r['m']}x{r['k']}x{r['n']}"
    summary = (f"fused epilogue vs unfused: geomean {a['geomean_speedup_fused']:.2f}x ("
               + ", ".join(f"{dt} {v:.2f}x" for dt, v in a["geomean_speedup_by_dtype"].items())
               + f"); epilogue slower at {len(a['epilogue_loses'])} of {len(a['table'])} points"
               + (f" (e.g. {shape(a['epilogue_loses'][0])}: {a['epilogue_loses'][0]['speedup_fused']:.2f}x)"
                  if a["epilogue_loses"] else ""))
    where = f"{runs['default']['device']}, torch {runs['default']['torch']}"
    if a["hurt"]:
        worst = max(a["hurt"], key=lambda r: r["speedup_fused"])
        return ReproResult(Verdict.REPRODUCED,
                           f"{where}: the default path runs unfused at {len(a['hurt'])} points where the fused "
                           f"epilogue is faster (worst {shape(worst)}: {worst['speedup_fused']:.2f}x); {summary}",
                           analysis)
    default_paths = sorted({r["default_path"] for r in a["table"] if r["op"] != "mm"})
    return ReproResult(Verdict.NOT_REPRODUCED,
                       f"{where}: the default path runs {'/'.join(default_paths)} (this build has no gate); "
                       f"{summary}", analysis)


def markdown(analysis: dict, runs: dict) -> str:
    head = (f"Device {runs['default']['device']}, torch {runs['default']['torch']}; GPU ms per call "
            "(CUDA graph replay, median of 5).\n\n| op | dtype | M x K x N | default | fused | unfused | "
            "fused speedup | default path | hot-fix / default |\n|" + "---|" * 9)
    rows = [f"| {r['op']} | {r['dtype']} | {r['m']}x{r['k']}x{r['n']} | {r['default_ms']:.4f} | "
            f"{r['fused_ms']:.4f} | {r['unfused_ms']:.4f} | {r['speedup_fused']:.2f}x | {r['default_path']} | "
            f"{r['hotfix_vs_default']:.2f} |" for r in sorted(analysis["table"], key=key)]
    return "\n".join([head, *rows])


def plot(analysis: dict, path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no matplotlib: plot skipped"
    rows = [r for r in analysis["table"] if r["op"] == "linear"]
    shapes = sorted({(r["m"], r["k"], r["n"]) for r in rows})
    dtypes = sorted({r["dtype"] for r in rows})
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(dtypes)
    for i, dt in enumerate(dtypes):
        sel = {(r["m"], r["k"], r["n"]): r["speedup_fused"] for r in rows if r["dtype"] == dt}
        xs = [j + width * i for j, s in enumerate(shapes) if s in sel]
        ax.bar(xs, [sel[s] for s in shapes if s in sel], width=width, label=dt)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))], [f"{m}x{k}x{n}" for m, k, n in shapes],
                  rotation=70, fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("unfused time / fused time")
    ax.set_title("F.linear with 1-D bias: speedup of the cuBLASLt bias epilogue (>1: fused faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"plot: {path}"


def reproduce(quick: bool = False, out: Path | None = None, full: bool = False) -> ReproResult:
    try:
        import torch

        gpu = torch.cuda.is_available() and not getattr(torch.version, "hip", None)
    except ImportError:
        gpu = False
    if not gpu:
        return ReproResult(Verdict.SKIPPED, "no CUDA GPU here: the benchmark times cuBLAS/cuBLASLt kernels",
                           needs="an NVIDIA GPU (the gate is in CUDA builds with #172340)")
    grid = "full" if full else "quick" if quick else "default"
    runs = {mode: run for modes in PROCESSES for mode, run in run_modes(modes, grid).items()}
    analysis = analyse(runs)
    result = verdict(analysis, runs)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "addmm.json").write_text(json.dumps({"runs": runs, "analysis": analysis}, indent=1))
        (out / "addmm.md").write_text(result.summary + "\n\n" + markdown(analysis, runs) + "\n")
        print(plot(analysis, out / "addmm_speedup.png"))
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="four shapes only")
    size.add_argument("--full", action="store_true", help="the published table's grid (290 points a mode)")
    p.add_argument("--out", type=Path, help="write addmm.json, addmm.md and addmm_speedup.png here")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)  # modes, comma-separated, run in this order
    p.add_argument("--grid", choices=tuple(GRIDS), default="default", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        for mode in args.child.split(","):
            if mode not in MODES or (mode == "unfused") != ("DISABLE_ADDMM_CUDA_LT" in os.environ):
                p.error(f"--child {args.child}: unfused alone, with DISABLE_ADDMM_CUDA_LT set")
            print(json.dumps(child(mode, args.grid)), flush=True)
        return 0
    result = reproduce(args.quick, args.out, args.full)
    summary_only = ReproResult(result.verdict, result.summary, {}, result.needs)
    return report(summary_only, args.json)


if __name__ == "__main__":
    sys.exit(main())
