#!/usr/bin/env python3
"""`fixmono status` of this interpreter's environment, this tree against an
earlier commit's code, side by side in one run: cold (an empty FIXMONO_CACHE,
so every installed file is parsed and checked) and warm (the cache of a run
before), RUNS interleaved runs each, medians and ratios. The statuses of the
two must be the same (exit 1 otherwise). Then where a cold run's time goes,
per fix and per file (this tree, one process: status itself checks the fixes
on every core).

    .venv/bin/python tools/bench_status.py [--base b6c69d6] [--runs 5] [--no-bytecode]

Each tree has a bytecode folder of its own (PYTHONPYCACHEPREFIX), written by
a first round that is not counted, as an installed wheel has its bytecode;
--no-bytecode: none is read or written, every run compiles every module it
imports (the first run after `pip install --no-compile`, where its folder
cannot be written).

b6c69d6 is the code before status stopped importing torch, remembered the
diff engine's results and set aside the defs a transformation cannot read.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PYTHON_VARIABLES = ("PYTHONPATH", "FIXMONO_CACHE", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")


def environment(tools: Path, cache: Path, bytecode: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in PYTHON_VARIABLES}
    return {**env, "PYTHONPATH": str(tools), "FIXMONO_CACHE": str(cache),
            **({"PYTHONPYCACHEPREFIX": str(bytecode)} if bytecode else {"PYTHONDONTWRITEBYTECODE": "1",
                                                                           "PYTHONPYCACHEPREFIX": "/nonexistent"})}


def status(env: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "fixmono", "status", "--json"], env=env, capture_output=True,
                         text=True)
    took = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"bench_status: error: fixmono status under {env['PYTHONPATH']} exited {run.returncode}: "
                 f"{run.stderr.strip()[-300:]}")
    rows = json.loads(run.stdout)["fixes"]
    return took, {r["fix"]: (r["installed_files"], r["detail"]) for r in rows}


def where_child() -> None:
    """One cold status's checks in this process, timed per fix and per file (JSON on stdout), of the
    fixmono PYTHONPATH names (before this script's folder: an installed wheel's, bench_status_wheels.py)."""
    start = time.perf_counter()
    sys.path[:0] = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    from fixmono.analysis import remembered_status, status as analysis
    from fixmono.apply import contract
    from fixmono.sources.catalogue import listed
    from fixmono.sources.installed import Environment, InstalledFiles

    imported = time.perf_counter()
    spent: dict = collections.defaultdict(float)
    current = {"fix": ""}

    def timed(part: str, function, path_of):
        def wrapper(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[(current["fix"], path_of(*args, **kwargs), part)] += time.perf_counter() - began
        return wrapper

    contract.check_result = timed("fixed-point", contract.check_result, lambda change, *a, **k: change.path)
    contract.unresolved_uses = timed("uses", contract.unresolved_uses, lambda path, *a, **k: path)
    contract.apply_change = timed("transform", contract.apply_change, lambda change, *a, **k: change.path)
    InstalledFiles.read = timed("read", InstalledFiles.read, lambda self, path: path)
    remembered_status.available_cores = lambda: 1
    fixes = listed()
    env = Environment.current()
    listing = time.perf_counter()
    per_fix, files = {}, {}
    for fix in fixes:
        current["fix"] = fix.id
        began = time.perf_counter()
        analysis.check_installed(fix, None, env)
        per_fix[fix.id] = time.perf_counter() - began
        source = InstalledFiles(analysis.PROJECTS[fix.upstream], None, env)
        for change in fix.changes:
            path = source.path(change.path)
            files[change.path] = path.stat().st_size if path is not None and path.is_file() else None
    parts = collections.defaultdict(dict)
    for (fix_id, path, part), seconds in spent.items():
        parts[f"{fix_id}\0{path}"][part] = seconds
    json.dump({"imports": imported - start, "listing": listing - imported, "fixes": per_fix, "sizes": files,
               "parts": parts}, sys.stdout)


def where(env: dict) -> None:
    run = subprocess.run([sys.executable, __file__, "--where-child"], env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"bench_status: error: the timed run exited {run.returncode}: {run.stderr.strip()[-300:]}")
    data = json.loads(run.stdout)
    checks = sum(data["fixes"].values())
    print(f"where a cold status's time goes (this tree, one process, empty cache; status runs the checks on "
          f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()} cores here):")
    print(f"  imports {data['imports']:.2f} s; the catalogue listed {data['listing']:.2f} s (every fix loaded, "
          f"libcst with them); the checks {checks:.2f} s, of which:")
    for fix_id, seconds in sorted(data["fixes"].items(), key=lambda item: -item[1]):
        if seconds < 0.01:
            continue
        print(f"  {seconds:6.2f} s  {fix_id}")
        for key, parts in sorted(data["parts"].items()):
            owner, path = key.split("\0")
            if owner != fix_id:
                continue
            size = data["sizes"].get(path)
            transform = parts.get("transform", 0) - parts.get("fixed-point", 0)  # check_result runs inside it
            shown = ", ".join(f"{name} {value:.2f}" for name, value in (
                ("read", parts.get("read", 0)), ("transform", transform), ("fixed-point re-check",
                                                                           parts.get("fixed-point", 0)),
                ("uses check", parts.get("uses", 0))) if value >= 0.005)
            kb = f" ({size / 1000:.0f} kB)" if size else ""
            print(f"            {path}{kb}: {shown or 'read only'}")


def main() -> int:
    if sys.argv[1:] == ["--where-child"]:
        where_child()
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", default="b6c69d6", help="the commit whose code is the baseline")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--no-bytecode", action="store_true", help="no .pyc read or written: every run compiles")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "tools"))
    from fixmono.sources.git import run_git  # every git process goes through the one layer

    with tempfile.TemporaryDirectory(prefix="bench-status-") as tmp:
        base = Path(tmp) / "base"
        archive = run_git(ROOT, "archive", args.base, "tools", "fixes", binary=True)
        if archive.returncode != 0:
            sys.exit(f"bench_status: error: --base {args.base}: {archive.stderr.strip()}")
        base.mkdir()
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        trees = {f"base {args.base}": base / "tools", "this tree": ROOT / "tools"}
        times = {(name, kind): [] for name in trees for kind in ("cold", "warm")}
        seen = {}
        for n in range(args.runs + 1):  # the first round writes each tree's bytecode and is not counted
            for i, (name, tools) in enumerate(trees.items()):
                bytecode = None if args.no_bytecode else Path(tmp) / f"bytecode-{i}"
                env = environment(tools, Path(tmp) / f"cache-{n}-{i}", bytecode)
                cold, statuses = status(env)
                warm, again = status(env)
                if statuses != again or seen.setdefault(name, statuses) != statuses:
                    sys.exit(f"bench_status: error: {name} gave other statuses from one run to the next")
                if n:
                    times[(name, "cold")].append(cold)
                    times[(name, "warm")].append(warm)
        first, second = trees
        if seen[first] != seen[second]:
            differ = [fix for fix in seen[second] if seen[first].get(fix) != seen[second][fix]]
            print(f"the statuses differ: {', '.join(differ)}")
            return 1
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(f"fixmono status, {len(seen[second])} fixes, median of {args.runs} interleaved runs "
              f"(Python {sys.version.split()[0]}, {cores} cores, load {os.getloadavg()[0]:.2f}; bytecode "
              f"{'none: every run compiles' if args.no_bytecode else 'written by a first round'}); "
              "same statuses: yes")
        for kind in ("cold", "warm"):
            old, new = (statistics.median(times[(name, kind)]) for name in trees)
            print(f"  {kind}: {first} {old:6.2f} s   {second} {new:6.2f} s   {old / new:5.1f}x faster")
        bytecode = None if args.no_bytecode else Path(tmp) / "bytecode-1"
        where(environment(ROOT / "tools", Path(tmp) / "cache-where", bytecode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
