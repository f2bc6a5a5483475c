#!/usr/bin/env python3
"""`fixmono status` of this interpreter's environment, this tree against an
earlier commit's code, side by side in one run: cold (an empty FIXMONO_CACHE,
so every installed file is parsed and checked) and warm (the cache of a run
before), RUNS interleaved runs each, medians and ratios. The statuses of the
two must be the same (exit 1 otherwise).

    .venv/bin/python tools/bench_status.py [--base b6c69d6] [--runs 5]

b6c69d6 is the code before status stopped importing torch, remembered the
diff engine's results and set aside the defs a transformation cannot read.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from fixmono.sources.git import run_git  # noqa: E402  (every git process goes through the one layer)


def status(tools: Path, cache: Path) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": str(tools), "FIXMONO_CACHE": str(cache)}
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "fixmono", "status", "--json"], env=env, capture_output=True,
                         text=True)
    took = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"bench_status: error: fixmono status under {tools} exited {run.returncode}: "
                 f"{run.stderr.strip()[-300:]}")
    rows = json.loads(run.stdout)["fixes"]
    return took, {r["fix"]: (r["installed_files"], r["detail"]) for r in rows}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", default="b6c69d6", help="the commit whose code is the baseline")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
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
                cache = Path(tmp) / f"cache-{n}-{i}"
                cold, statuses = status(tools, cache)
                warm, again = status(tools, cache)
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
    print(f"fixmono status, {len(seen[second])} fixes, median of {args.runs} interleaved runs "
          f"(Python {sys.version.split()[0]}, {os.cpu_count()} cores); same statuses: yes")
    for kind in ("cold", "warm"):
        old, new = (statistics.median(times[(name, kind)]) for name in trees)
        print(f"  {kind}: {first} {old:6.2f} s   {second} {new:6.2f} s   {old / new:5.1f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
