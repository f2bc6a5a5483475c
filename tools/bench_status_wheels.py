#!/usr/bin/env python3
"""`fixmono status` of this interpreter's environment from two built wheels
(a base and this tree's), side by side in one run, the way a GPU machine
gets fixmono: each wheel installed with `pip install --no-compile --target`
(as the device tool's README installs carried wheels) into a folder of its
own, then, interleaved:

  first run after install   no bytecode yet (the run writes it), empty FIXMONO_CACHE
  cold                      bytecode there, empty FIXMONO_CACHE
  cold, install no bytecode a second install of each that never gets any (a read-only install,
                            PYTHONDONTWRITEBYTECODE); the Python's own library keeps its bytecode
  cold, no bytecode at all  none read or written, the standard library's included (PYTHONPYCACHEPREFIX
                            at a folder that does not exist): an upper bound, no real install is so
  warm                      the cache of the cold run before

medians and ratios; the statuses of the two must be the same. Then where a
cold run's time goes, per fix and per file (tools/bench_status.py's breakdown).
Nothing is fetched: the wheels and their dependencies' wheels are given.

    python3 tools/bench_status_wheels.py --base BASE.whl --wheel THIS.whl --deps DIR [--runs 3]

(`.venv/bin/python tools/build_wheel.py --out DIR` builds a wheel; the dependencies for another
Python with `pip download --no-deps --only-binary=:all: --python-version 3.12 ...`.)
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

HERE = Path(__file__).resolve().parent
DROP = ("PYTHONPATH", "FIXMONO_CACHE", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/nonexistent"}
READ_ONLY = {"PYTHONDONTWRITEBYTECODE": "1"}
KINDS = ("first run after install", "cold", "cold, install no bytecode", "cold, no bytecode at all", "warm")


def env_for(site: str, cache: Path, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in DROP}
    return {**env, "PYTHONPATH": site, "FIXMONO_CACHE": str(cache), **(extra or {})}


def status(site: str, cache: Path, extra: dict | None = None) -> tuple[float, dict]:
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "fixmono", "status", "--json"], env=env_for(site, cache, extra),
                         capture_output=True, text=True)
    took = time.perf_counter() - start
    if run.returncode:
        sys.exit(f"bench_status_wheels: error: status from {site} exited {run.returncode}: {run.stderr[-300:]}")
    return took, {r["fix"]: (r["installed_files"], r["detail"]) for r in json.loads(run.stdout)["fixes"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", type=Path, required=True, help="the baseline's wheel")
    p.add_argument("--wheel", type=Path, required=True, help="this tree's wheel")
    p.add_argument("--deps", type=Path, required=True, help="a folder of the wheels fixmono needs")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-status-wheels-") as tmp:
        tmp = Path(tmp)
        sites, read_only = {}, {}
        for name, wheel in (("base", args.base), ("this", args.wheel)):
            for into, folder in ((sites, f"site-{name}"), (read_only, f"site-{name}-read-only")):
                subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                "--no-compile", "--target", str(tmp / folder), str(wheel),
                                *map(str, args.deps.glob("*.whl"))], check=True)
                into[name] = str(tmp / folder)
        times: dict = {}
        seen: dict = {}
        for name, site in sites.items():
            took, seen[name] = status(site, tmp / f"cache-{name}-first")
            times.setdefault((name, KINDS[0]), []).append(took)
        for n in range(args.runs):
            for name, site in sites.items():
                cache = tmp / f"cache-{name}-{n}"
                took, found = status(site, cache)
                times.setdefault((name, "cold"), []).append(took)
                for _ in range(3):
                    times.setdefault((name, "warm"), []).append(status(site, cache)[0])
                times.setdefault((name, "cold, install no bytecode"), []).append(
                    status(read_only[name], tmp / f"cache-{name}-read-only-{n}", READ_ONLY)[0])
                times.setdefault((name, "cold, no bytecode at all"), []).append(
                    status(site, tmp / f"cache-{name}-none-{n}", NO_BYTECODE)[0])
                if found != seen[name]:
                    sys.exit(f"bench_status_wheels: error: {name} gave other statuses from one run to the next")
        if seen["base"] != seen["this"]:
            print("the statuses differ:", ", ".join(f for f in seen["this"] if seen["base"].get(f) != seen["this"][f]))
            return 1
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(f"fixmono status, {len(seen['this'])} fixes, wheels installed with --no-compile (Python "
              f"{sys.version.split()[0]}, {cores} cores); same statuses: yes")
        for kind in KINDS:
            base, this = (statistics.median(times[(name, kind)]) for name in sites)
            print(f"  {kind:<26} base {base:6.2f} s   this {this:6.2f} s   {base / this:4.1f}x   "
                  f"(median of {len(times[('this', kind)])})")
        sys.path.insert(0, sites["this"])
        sys.path.insert(0, str(HERE))
        import bench_status

        bench_status.where(env_for(sites["this"], tmp / "cache-where"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
