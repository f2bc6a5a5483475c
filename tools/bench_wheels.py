#!/usr/bin/env python3
"""Range reads against whole downloads of published wheels, side by side in one run.

    .venv/bin/python tools/bench_wheels.py [--torch 2.13.0] [--transformers 5.23.0]

The wheels are the ones pip picks on this machine (for torch the manylinux
CUDA wheel from PyPI: the largest the registry gives it), downloaded once
into .cache/bench-wheels/. They are then served by nginx on 127.0.0.1 as a
PEP 503 index (with PEP 658 metadata, as PyPI serves them), and for each
wheel, in fresh caches, the `pip:` source is built both ways through pip's
own configuration pointed at that index:

  range  the members the catalogue's fixes target, by HTTP range requests
  whole  `pip download` of the wheel, its sha256 and RECORD checked

Printed: the wheel's size, bytes the server sent (from nginx's log) and wall
time of each, and the ratios. Both give the same scratch repository (BASE).
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

from fixmono.model.projects import by_dist  # noqa: E402
from fixmono.testing import REPO_ROOT, nginx, served, simple_index  # noqa: E402

CACHE = REPO_ROOT / ".cache" / "bench-wheels"


def fetch(dist: str, version: str) -> Path:
    """The wheel pip downloads for this machine from the registry (PyPI: for
    torch the CUDA wheel), once; not a local mirror's copy."""
    folder = CACHE / f"{dist}-{version}"
    found = sorted(folder.glob("*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                    "--disable-pip-version-check", "--dest", str(folder), f"{dist}=={version}"], check=True,
                   env={**os.environ, "PIP_CONSTRAINT": "", "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "",
                        "PIP_EXTRA_INDEX_URL": ""})
    return sorted(folder.glob("*.whl"))[0]


def build(dist: str, version: str, full: bool, pip_env: dict, base: str, cache: Path) -> tuple[float, str]:
    """Build the pip: source in a child with a fresh cache; (seconds, BASE commit)."""
    code = ("import sys; from fixmono.model.projects import by_dist; from fixmono.sources.wheel import open_wheel;"
            f"u = open_wheel('pip:{dist}=={version}', full={full}); print(u.head)")
    env = {**os.environ, **pip_env, "PIP_INDEX_URL": f"{base}/simple", "FIXMONO_CACHE": str(cache),
           "PYTHONPATH": str(REPO_ROOT / "tools")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - start, proc.stdout.strip()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--torch", default="2.13.0")
    p.add_argument("--transformers", default="5.23.0")
    args = p.parse_args()
    wanted = [("torch", args.torch), ("transformers", args.transformers)]
    wheels = [fetch(dist, version) for dist, version in wanted]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-wheels-") as tmp:
        pip_env = simple_index(Path(tmp) / "www", wheels)
        with nginx(Path(tmp) / "www") as (base, log):
            for (dist, version), wheel in zip(wanted, wheels):
                assert by_dist(dist) is not None
                result = {}
                for how in ("range", "whole"):
                    before = len(served(log))
                    seconds, head = build(dist, version, how == "whole", pip_env, base, Path(tmp) / f"c-{dist}-{how}")
                    sent = sum(r[2] for r in served(log)[before:] if r[3].endswith(".whl"))
                    result[how] = (seconds, sent, head)
                assert result["range"][2] == result["whole"][2], "the two reads gave different BASE commits"
                rows.append((wheel.name, wheel.stat().st_size, result))
    print(f"{'wheel':<62} {'size MB':>9} {'range MB':>9} {'share':>7} {'range s':>8} {'whole MB':>9} "
          f"{'whole s':>8} {'speed-up':>8}")
    for name, size, r in rows:
        (rs, rb, _), (ws, wb, _) = r["range"], r["whole"]
        print(f"{name:<62} {size / 1e6:9.1f} {rb / 1e6:9.2f} {100 * rb / size:6.2f}% {rs:8.2f} {wb / 1e6:9.1f} "
              f"{ws:8.2f} {ws / rs:7.1f}x")
    print("same BASE commit from both reads: yes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
