#!/usr/bin/env python3
"""Build the fixmono wheel: .venv/bin/python tools/build_wheel.py [--out DIR]
(or `bazel run //tools:wheel -- --out DIR`). Builds from a copy of the files
the wheel is made of (pyproject.toml, setup.py, README.md, tools/fixmono,
fixes/), so the checkout gets no build/ or egg-info; default --out dist/.
Prints the wheel's path."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(os.environ.get("BUILD_WORKSPACE_DIRECTORY") or Path(__file__).resolve().parents[1])
PARTS = ("pyproject.toml", "setup.py", "README.md", "tools/fixmono", "fixes")


def build(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fixmono-build-") as tmp:
        for part in PARTS:
            src, dst = ROOT / part, Path(tmp) / part
            if src.is_dir():
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                               "--disable-pip-version-check", "--no-cache-dir", "--wheel-dir", str(out), tmp],
                              capture_output=True, text=True)
        if proc.returncode:  # the build backend's own error, not pip's summary of it
            lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
            reasons = [line for line in lines if ("error" in line.lower() or "failed" in line.lower())
                       and "failed to build one or more" not in line.lower()]
            sys.exit(f"build_wheel: pip wheel failed: {(reasons or lines or ['?'])[-1]}")
    return max(out.glob("fixmono-*.whl"), key=lambda p: p.stat().st_mtime)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "dist", help="where the wheel goes (default: dist/)")
    args = p.parse_args()
    here = Path(os.environ.get("BUILD_WORKING_DIRECTORY") or Path.cwd())  # the user's, also under `bazel run`
    print(build((here / args.out).resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
