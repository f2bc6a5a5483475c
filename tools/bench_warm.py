#!/usr/bin/env python3
"""Warm calls beside `git apply --check` and `pip --version`, on the same
machine in one run: each command's wall time, the median of RUNS interleaved
runs, and its ratio to each of the two (how many times their time it takes).
The commands run under this tree's code and an earlier commit's (--base,
default 12c5624, main before issue 43's warm calls: a warm `--upstream pip:` call asked the index every
time),
each with a cache of its own, warmed by one run first (its time printed as
`first`), and a bytecode folder of its own (PYTHONPYCACHEPREFIX: written by
that first run, as an installed wheel has it; --no-bytecode: none, every run
compiles every module it imports).

    .venv/bin/python tools/bench_warm.py [--runs 10] [--base 12c5624]
        [--diff fixes/transformers/falcon_packed_mask/fix.patch] [--upstream pip:transformers==5.20.0]

The commands:
  make-patch         fixmono make-patch --diff DIFF --upstream SPEC --check
  make-patch offline the same with PIP_NO_INDEX=1 and every proxy variable set to a closed port (no network)
  status             fixmono status (this environment's installed files; the catalogue's fixes)
`git apply --check DIFF` runs in a folder holding the diff's files as the wheel has them; `pip --version` is
`python -m pip --version` of this interpreter. A command that fails is shown with its exit status, not timed.
"""
from __future__ import annotations

import argparse
import datetime
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from fixmono.model.patchfile import all_paths, read_patches  # noqa: E402
from fixmono.sources.git import run_git  # noqa: E402  (every git process goes through the one layer)

OFFLINE = {"PIP_NO_INDEX": "1", **{name: "http://127.0.0.1:9" for name in
                                   ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
                                    "ALL_PROXY")}, "no_proxy": "", "NO_PROXY": ""}


def code_of(commit: str, where: Path) -> Path:
    """tools/ and fixes/ of `commit`, extracted under `where`; its tools folder."""
    archive = run_git(ROOT, "archive", commit, "tools", "fixes", binary=True)
    if archive.returncode != 0:
        sys.exit(f"bench_warm: error: --base {commit}: {archive.stderr.strip()}")
    where.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    return where / "tools"


def timed(command: list[str], env: dict, cwd: Path | None = None) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    return time.perf_counter() - start, proc.returncode, (proc.stderr.strip().splitlines() or [""])[-1]


def pre_image_folder(diff: Path, cache: Path, into: Path) -> Path:
    """A folder holding the diff's files as the wheel's cache entry has them (git apply --check's tree)."""
    (patch,) = read_patches([str(diff)], sys.stdin.buffer, None)[:1]
    paths = all_paths(patch)
    for entry in sorted((cache / "upstreams").iterdir()):
        found = [p for p in paths if (entry / p).is_file()]
        if found:
            for path in found:
                (into / path).parent.mkdir(parents=True, exist_ok=True)
                (into / path).write_bytes((entry / path).read_bytes())
            return into
    sys.exit(f"bench_warm: error: no cache entry under {cache} holds the files of {diff}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--base", default="12c5624", help="the commit whose code is the baseline")
    p.add_argument("--diff", type=Path, default=ROOT / "fixes/transformers/falcon_packed_mask/fix.patch")
    p.add_argument("--upstream", default="pip:transformers==5.20.0")
    p.add_argument("--no-bytecode", action="store_true", help="no .pyc read or written: every run compiles")
    args = p.parse_args()
    diff = args.diff.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        tmp = Path(tmp)
        trees = {f"base {args.base}": code_of(args.base, tmp / "base"), "this tree": ROOT / "tools"}
        base_env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "FIXMONO_CACHE", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        commands: dict[str, tuple[list[str], dict, Path | None]] = {}
        first: dict[str, str] = {}
        for i, (name, tools) in enumerate(trees.items()):
            env = {**base_env, "PYTHONPATH": str(tools), "FIXMONO_CACHE": str(tmp / f"cache-{i}"),
                   "PYTHONPYCACHEPREFIX": str(tmp / f"pyc-{i}"),
                   **({"PYTHONDONTWRITEBYTECODE": "1"} if args.no_bytecode else {})}
            fixmono = [sys.executable, "-m", "fixmono"]
            make_patch = fixmono + ["make-patch", "--diff", str(diff), "--upstream", args.upstream, "--check"]
            commands[f"make-patch, {name}"] = (make_patch, env, None)
            commands[f"make-patch offline, {name}"] = (make_patch, {**env, **OFFLINE}, None)
            commands[f"status, {name}"] = (fixmono + ["status"], env, None)
            for what in ("make-patch", "make-patch offline", "status"):  # the first run: it fills the cache
                seconds, code, said = timed(*commands[f"{what}, {name}"][:2])
                first[f"{what}, {name}"] = f"{seconds:.2f} s" if code == 0 else f"exit {code}"
        folder = pre_image_folder(diff, tmp / "cache-1", tmp / "git-apply")
        baselines = {"git apply --check": (["git", "apply", "--check", str(diff)], dict(os.environ), folder),
                     "pip --version": ([sys.executable, "-m", "pip", "--version"], dict(os.environ), None)}
        everything = {**baselines, **commands}
        times: dict[str, list[float]] = {name: [] for name in everything}
        failed: dict[str, str] = {}
        for _ in range(args.runs):
            for name, (command, env, cwd) in everything.items():
                if name in failed:
                    continue
                seconds, code, said = timed(command, env, cwd)
                if code != 0:
                    failed[name] = f"exit {code}: {said}"[:120]
                else:
                    times[name].append(seconds)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    bytecode = "none: every run compiles" if args.no_bytecode else "written by the first run"
    print(f"warm calls, median of {args.runs} interleaved runs, {datetime.date.today()} (Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cores, load {load:.2f} at the end; bytecode {bytecode})")
    print(f"  diff: {args.diff}  upstream: {args.upstream}")
    medians = {name: statistics.median(samples) for name, samples in times.items() if samples}
    git_apply, pip = medians["git apply --check"], medians["pip --version"]
    width = max(map(len, everything))
    for name in everything:
        if name in failed:
            print(f"  {name:<{width}}  fails: {failed[name]}")
            continue
        ratio = "" if name in baselines else \
            f"   x{medians[name] / git_apply:6.1f} git apply   x{medians[name] / pip:5.2f} pip"
        print(f"  {name:<{width}}  {medians[name]:6.3f} s{ratio}")
    print("  first run (filling the cache): " + "; ".join(f"{k} {v}" for k, v in first.items()))
    this, base = "this tree", f"base {args.base}"
    for what in ("make-patch", "status"):
        if f"{what}, {this}" in medians and f"{what}, {base}" in medians:
            print(f"  {what}: {medians[f'{what}, {base}'] / medians[f'{what}, {this}']:.1f}x faster than the base")
    print(f"  command: {' '.join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
