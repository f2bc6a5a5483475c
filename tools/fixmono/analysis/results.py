"""What a behavioural run carries besides its verdict: where it ran (host,
Ray node, accelerator and driver), and a cache of verdicts so that a second
run with the same inputs reuses them. A verdict is kept under (what the
reproducer runs of the fix's folder, not its tests or README; the code that
runs reproducers; the release, the backend, the interpreters); only real
verdicts are kept, never `cannot-run-here` (pip's or the network's reason
may be gone next time)."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from fixmono.model.errors import UserError
from fixmono.model.fix import Fix
from fixmono.model.shapes import parsed
from fixmono.sources.processes import bounded
from fixmono.sources.upstream import cache_dir

FORMAT = 1


def reproducer_files(folder: Path) -> list[Path]:
    """What a fix's reproducer can run or read in its folder: its modules (repro.py, fix.py, the
    transform and hot-fix they import), fix.patch (an imported fix's hot-fix is made from it) and
    fixtures/; not its tests (test_*.py), README.md, BUILD.bazel or recorded results/."""
    modules = [p for p in folder.glob("*.py") if not p.name.startswith("test_")]
    return sorted([*modules, *folder.glob("fix.patch"), *(p for p in folder.glob("fixtures/**/*") if p.is_file())])


def fix_source(fix: Fix) -> str:
    """sha256 of reproducer_files() of the fix's folder: editing its tests or README keeps its verdicts."""
    spec = importlib.util.find_spec(fix.package)
    folder = Path(list(spec.submodule_search_locations)[0])
    digest = hashlib.sha256()
    for path in reproducer_files(folder):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def runner_source() -> str:
    """sha256 of what runs every reproducer (the runtime, the environments, the verdict's reading):
    a change there runs every cell again."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in [*sorted((package / "runtime").glob("*.py")), package / "analysis" / "envs.py",
                 package / "analysis" / "still_needed.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def key(fix: Fix, version: str, interpreters: list[str]) -> str:
    text = json.dumps([FORMAT, fix.id, fix_source(fix), runner_source(), version, fix.repro_needs, interpreters])
    return hashlib.sha256(text.encode()).hexdigest()


# a kept verdict (behaviour.Run's fields): anything else in the cache is a miss, never an internal error
KEPT = {"version": str, "static": str, "verdict": str, "detail": str, "finding": str, "seconds": float,
        "python?": str, "python_version?": str, "node?": dict, "attempts?": int, "reused?": bool,
        "figures?": dict}


def load(result_key: str) -> dict | None:
    try:
        data = parsed((cache_dir() / "results" / f"{result_key}.json").read_bytes(), KEPT, "a kept verdict")
    except (OSError, UserError):
        return None
    fields = {name.removesuffix("?") for name in KEPT}
    return {k: v for k, v in data.items() if k in fields}  # a key a newer fixmono added is left out


def store(result_key: str, run: dict) -> None:
    folder = cache_dir() / "results"
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{result_key}.{os.getpid()}"
    partial.write_text(json.dumps(run, sort_keys=True))
    partial.replace(folder / f"{result_key}.json")  # whole or absent


QUERY_TIMEOUT = 20.0  # nvidia-smi or amd-smi answering the accelerator's name


def _query(command: list[str]) -> str:
    if not shutil.which(command[0]):
        return ""
    try:
        proc = bounded(command, QUERY_TIMEOUT)  # a hung driver query: its whole process group killed
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


@functools.lru_cache(maxsize=1)
def accelerator() -> dict[str, str]:
    """The first GPU's name and driver, from nvidia-smi or amd-smi; {} on a CPU-only machine."""
    nvidia = _query(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if nvidia:
        name, _, driver = nvidia.splitlines()[0].partition(", ")
        return {"backend": "cuda", "accelerator": name.strip(), "driver": driver.strip()}
    amd = _query(["amd-smi", "static", "--asic", "--driver", "--json"])
    if amd:
        try:
            first = json.loads(amd)[0]
            return {"backend": "rocm", "accelerator": first["asic"]["market_name"],
                    "driver": str(first["driver"].get("version", ""))}
        except (ValueError, KeyError, IndexError, TypeError):
            return {"backend": "rocm", "accelerator": "unknown (amd-smi output not understood)", "driver": ""}
    return {}


def where() -> dict[str, str]:
    """Where this process runs: host, Ray node id (inside a Ray task), accelerator and driver."""
    out = {"host": platform.node(), **accelerator()}
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        out["ray_node"] = ray.get_runtime_context().get_node_id()
    return out
