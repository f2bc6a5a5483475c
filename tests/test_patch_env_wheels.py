"""`fixmono patch-env` end to end on real published wheels (tag: network):
a venv per project with the published wheel pip installed, the fix's own
reproducer run in that venv before (reproduced), after patch-env (not
reproduced) and the undo compared file by file with the fresh install.

The venvs hold only the project under test; the libraries its reproducer
imports besides (torch, numpy, ...) come from the repository's .venv through
a .pth line, which Python reads after the venv's own site-packages, so the
venv's copy of the project is the one imported and patched.

The suite runs transformers and jaxlib; torch 2.13.0 (the longest: its reproducer
imports torch three times) runs with FIXMONO_FULL=1 (docs/testing.md). Its fix is
a Python fix patched by the same code as the transformers ones.
"""
import hashlib
import json
import os
import re
import site as site_module
import subprocess
import sys
from pathlib import Path

import pytest

from fixmono.runtime.child import child_env
from fixmono.testing import REPO_ROOT, full_only

pytestmark = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads wheels (tag: network)")

SENTINEL, PIN = "transformers-moe-sentinel-router-grad", "transformers-pin-moe-routing"


def venv(root: Path, requirement: str) -> tuple[Path, Path]:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                           "--disable-pip-version-check", "--no-cache-dir", requirement], capture_output=True,
                          text=True, env={**os.environ, "PIP_CONSTRAINT": ""}, timeout=900)
    assert proc.returncode == 0, proc.stderr
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz-fixmono-test-deps.pth").write_text("".join(f"{p}\n" for p in site_module.getsitepackages()))
    return python, site


def files(site: Path) -> dict[str, str]:
    """sha256 of every file the install holds (bytecode aside: it records the source's mtime)."""
    return {p.relative_to(site).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(site.rglob("*")) if p.is_file() and p.suffix != ".pyc"}


def fixmono(python: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "fixmono", "patch-env", "--python", str(python), *args],
                          capture_output=True, text=True, timeout=600, env=child_env())
    assert proc.returncode == 0, proc.stderr
    return proc


def reproduce(python: Path, fix_package: str) -> tuple[int, str]:
    proc = subprocess.run([str(python), "-m", f"fixmono.fixes.{fix_package}.repro", "--json"], capture_output=True,
                          text=True, timeout=600, env=child_env())
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout)["summary"]


def status(python: Path) -> dict:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "fixes"), "status", "--python", str(python),
                           "--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return {row["fix"]: row["installed_files"] for row in json.loads(proc.stdout)["fixes"]}


@pytest.mark.parametrize("requirement, fix, package", [
    ("transformers==5.17.0", SENTINEL, "transformers.moe_sentinel_router_grad"),
    full_only("torch==2.13.0", "pytorch-memory-budget-rng-recompute", "pytorch.memory_budget_rng",
              why="32 s of the target's 76 s; the same patch-env code as transformers' fixes"),
    ("jaxlib==0.10.2", "jaxlib-rocm-plugin-discovery", "jaxlib.rocm_plugin_discovery"),
])
def test_the_reproducer_goes_from_reproduced_to_not_and_undo_restores_every_byte(tmp_path, requirement, fix,
                                                                                  package):
    python, site = venv(tmp_path / "venv", requirement)
    fresh = files(site)
    code, before = reproduce(python, package)
    assert code == 1, before
    assert status(python)[fix] == "not fixed"
    fixmono(python, fix)
    code, after = reproduce(python, package)
    assert code == 0, after
    assert status(python)[fix] == "patched by fixmono"
    fixmono(python, "--undo", fix)
    assert files(site) == fresh
    assert reproduce(python, package)[0] == 1
    assert status(python)[fix] == "not fixed"


def test_two_fixes_in_one_file_and_undoing_one(tmp_path):
    """5.17.0's integrations/moe.py takes both transformers fixes: --all applies
    both; undoing the sentinel fix keeps the routing pin, in the same file."""
    python, site = venv(tmp_path / "venv", "transformers==5.17.0")
    fresh = files(site)
    proc = fixmono(python, "--all")
    # the status column is as wide as the widest status of the run
    assert re.search(rf"^patched +{SENTINEL}:", proc.stdout, re.M) and re.search(rf"^patched +{PIN}:", proc.stdout, re.M), \
        proc.stdout
    assert "skipped" in proc.stdout  # what is not transformers' (torch, jax, C++) is said, not refused
    assert {k: v for k, v in status(python).items() if k in (SENTINEL, PIN)} == \
        {SENTINEL: "patched by fixmono", PIN: "patched by fixmono"}
    fixmono(python, "--undo", SENTINEL)
    assert {k: v for k, v in status(python).items() if k in (SENTINEL, PIN)} == \
        {SENTINEL: "not fixed", PIN: "patched by fixmono"}
    assert reproduce(python, "transformers.moe_sentinel_router_grad")[0] == 1
    fixmono(python, "--undo")
    assert files(site) == fresh
