#!/usr/bin/env python3
"""make_patch, drift over history and the wheel drift matrix with remembered
rewrites (engines/remembered.py) against the same commands with them off
(FIXMONO_REWRITE_CACHE=off: every rewrite parsed, visited and printed by
libcst, as before), side by side in one run.

    .venv/bin/python tools/bench_speed.py [--commits 300] [--skip-matrix]

Every command runs with the wheel cache warm (the wheels were read once
before the timings). Per command: seconds with the cache off, seconds with
it on (warm: a second run), and the ratio; the outputs of both are compared
and must be equal.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fixmono.testing import REPO_ROOT, catalogue_tree, git, make_repo  # noqa: E402

TOOLS = REPO_ROOT / "tools"
SENTINEL = "transformers-moe-sentinel-router-grad"
TARGET = "src/transformers/integrations/moe.py"


def timed(command: list[str], cache: Path, remembered: bool) -> tuple[float, str]:
    env = {**os.environ, "FIXMONO_CACHE": str(cache), "FIXMONO_REWRITE_CACHE": "on" if remembered else "off"}
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return seconds, proc.stdout


def history_repo(root: Path, commits: int) -> Path:
    """A transformers-shaped repository whose moe.py changes in `commits`
    commits (a comment line each time), the fix applying at every one."""
    repo = make_repo(root / "history", catalogue_tree("transformers"))
    path = repo / TARGET
    base = path.read_text()
    for n in range(commits):
        path.write_text(base + f"# revision {n}\n")
        git(repo, "commit", "-q", "-am", f"revision {n}")
    return repo


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--commits", type=int, default=300)
    p.add_argument("--skip-matrix", action="store_true", help="leave out the whole wheel drift matrix (minutes off)")
    args = p.parse_args()
    cache = Path(os.environ.get("FIXMONO_CACHE") or REPO_ROOT / ".cache")
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-speed-") as tmp:
        repo = history_repo(Path(tmp), args.commits)
        runs = [
            ("make_patch --all --upstream default --check",
             [py, str(TOOLS / "make_patch"), "--all", "--upstream", "default", "--check"]),
            ("make_patch (transformers, 2 fixes) --check",
             [py, str(TOOLS / "make_patch"), "--all", "--upstream", "pip:transformers==5.23.0", "--check"]),
            (f"drift_matrix --git (moe.py, {args.commits} commits)",
             [py, str(TOOLS / "drift_matrix"), "--git", str(repo), "--fix", SENTINEL]),
        ]
        if not args.skip_matrix:
            runs.append(("drift_matrix (every wheel in range, statuses)", [py, str(TOOLS / "drift_matrix")]))
        rows = []
        for name, command in runs:
            timed(command, cache, True)  # wheels read, rewrites remembered: both caches warm
            off, off_out = timed(command, cache, False)
            on, on_out = timed(command, cache, True)
            if off_out != on_out:
                raise SystemExit(f"{name}: the output differs with the cache on")
            rows.append((name, off, on))
    print(f"{'command':<52} {'off s':>8} {'on s':>8} {'speed-up':>9}")
    for name, off, on in rows:
        print(f"{name:<52} {off:8.2f} {on:8.2f} {off / on:8.1f}x")
    print("outputs equal with the cache off and on: yes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
