"""Reproducer and benchmark: does the default addmm/F.linear path lose the fused
cuBLASLt bias epilogue, and what does that cost?

    python -m fixmono.fixes.pytorch.addmm_cublaslt_gate_revert.repro [--quick] [--out DIR] [--json]

Three subprocesses (DISABLE_ADDMM_CUDA_LT is read once per process):
  default  nothing set
  fused    torch.backends.cuda.preferred_blas_library("cublaslt")  (= the hot-fix)
  unfused  DISABLE_ADDMM_CUDA_LT=1
each time F.linear, addmm, _addmm_activation (relu, gelu) with a 1-D bias, and
a plain mm (what the preference also changes), for bf16, fp16 and fp32 over a
grid of decode-like (M = 1..16) and training-like (M = 2k..32k) shapes, and
record which kernels ran (profiler names: `bias` in the GEMM = fused).
Verdict: reproduced when the default path runs unfused where the fused path is
faster. Needs a CUDA GPU (exit 77 elsewhere).
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
QUICK = {"m": (16, 8192), "kn": ((4096, 4096),), "dtypes": ("bfloat16", "float32")}
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


def kernels(fn) -> list[str]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def child(mode: str, quick: bool) -> dict:
    import torch

    from .hotfix import classify_kernels

    if mode == "fused":
        torch.backends.cuda.preferred_blas_library("cublaslt")
    torch.backends.cuda.matmul.allow_tf32 = False
    m_values = QUICK["m"] if quick else M_VALUES
    kn_values = QUICK["kn"] if quick else KN_VALUES
    dtypes = QUICK["dtypes"] if quick else DTYPES
    rows = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for m in m_values:
            for k, n in kn_values:
                if dtype == torch.float32 and m * k * n > 2 ** 40:
                    continue  # fp32 without TF32: seconds per call, skipped
                x = torch.randn(m, k, device="cuda", dtype=dtype)
                w = torch.randn(n, k, device="cuda", dtype=dtype)
                b = torch.randn(n, device="cuda", dtype=dtype)
                for op in OPS:
                    fn = op_call(op, x, w, b)
                    names = kernels(fn)
                    rows.append({"op": op, "dtype": dtype_name, "m": m, "k": k, "n": n,
                                 "ms": graph_ms(fn), "path": classify_kernels(names) if op != "mm" else "mm",
                                 "kernels": names})
                del x, w, b
    return {"mode": mode, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
            "preferred_blas": str(torch.backends.cuda.preferred_blas_library()), "rows": rows}


def run_mode(mode: str, quick: bool) -> dict:
    env = child_env({k: v for k, v in os.environ.items() if k != "DISABLE_ADDMM_CUDA_LT"})
    if mode == "unfused":
        env["DISABLE_ADDMM_CUDA_LT"] = "1"
    cmd = module_command(f"{__package__}.repro", "--child", mode)
    proc = subprocess.run(cmd + (["--quick"] if quick else []), env=env, capture_output=True, text=True)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{mode} run failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(lines[-1])


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


def reproduce(quick: bool = False, out: Path | None = None) -> ReproResult:
    try:
        import torch

        gpu = torch.cuda.is_available() and not getattr(torch.version, "hip", None)
    except ImportError:
        gpu = False
    if not gpu:
        return ReproResult(Verdict.SKIPPED, "no CUDA GPU here: the benchmark times cuBLAS/cuBLASLt kernels",
                           needs="an NVIDIA GPU (the gate is in CUDA builds with #172340)")
    runs = {mode: run_mode(mode, quick) for mode in MODES}
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
    p.add_argument("--quick", action="store_true", help="a few shapes only")
    p.add_argument("--out", type=Path, help="write addmm.json, addmm.md and addmm_speedup.png here")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.quick)))
        return 0
    result = reproduce(args.quick, args.out)
    summary_only = ReproResult(result.verdict, result.summary, {}, result.needs)
    return report(summary_only, args.json)


if __name__ == "__main__":
    sys.exit(main())
