"""`status --python PATH`: another interpreter's environment, read from that
interpreter (its installed files read, nothing imported), tag network: real
environments made here from published wheels. transformers 5.8.0 (affected
by the sentinel-router fix) and 5.18.0 (fixed upstream) in two venvs, a
Python 3.12 without torch, and interpreters that are not a readable Python 3."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT

pytestmark = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads wheels (tag: network)")

SENTINEL = "transformers-moe-sentinel-router-grad"
OTHER_PYTHON = Path("/root/.pyenv/versions/3.12.1/bin/python3")  # another Python version on this machine kind


def venv(path: Path, *packages: str, python: str = sys.executable) -> Path:
    subprocess.run([python, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True)
    interpreter = path / "bin" / "python"
    if packages:
        proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(interpreter), "install", "--quiet",
                               "--no-deps", "--disable-pip-version-check", *packages], capture_output=True, text=True,
                              env={**os.environ, "PIP_CONSTRAINT": ""})
        assert proc.returncode == 0, proc.stderr
    return interpreter


def status(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MAKE_PATCH_DEBUG"}
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "fixes"), "status", *args],
                          capture_output=True, text=True, env=env, timeout=600)


def report(python: Path) -> dict:
    proc = status("--python", str(python), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def rows(data: dict) -> dict:
    return {row["fix"]: row for row in data["fixes"]}


@pytest.fixture(scope="module")
def envs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("envs")
    return {"affected": venv(root / "tf-5.8.0", "transformers==5.8.0"),
            "fixed": venv(root / "tf-5.18.0", "transformers==5.18.0")}


def test_an_affected_and_a_fixed_transformers(envs):
    affected, fixed = rows(report(envs["affected"])), rows(report(envs["fixed"]))
    assert affected[SENTINEL]["version"] == "5.8.0" and affected[SENTINEL]["installed_files"] == "not fixed"
    assert str(envs["affected"].parent.parent) in affected[SENTINEL]["detail"]  # that venv's file, not ours
    assert fixed[SENTINEL]["version"] == "5.18.0" and fixed[SENTINEL]["installed_files"] == "already fixed"
    for env in (affected, fixed):  # nothing else is installed there
        assert env["pytorch-memory-budget-rng-recompute"]["installed_files"] == "not installed"


def test_the_report_names_that_interpreter(envs):
    data = report(envs["affected"])
    assert Path(data["python"]) == envs["affected"].parent.parent
    assert data["python_version"] == "%d.%d.%d" % sys.version_info[:3]
    assert data["backend"]["name"] is None and "torch not installed" in data["backend"]["detail"]


@pytest.mark.skipif(not OTHER_PYTHON.exists(), reason=f"no {OTHER_PYTHON} on this machine")
def test_another_python_version_without_torch(tmp_path):
    data = report(venv(tmp_path / "py312", python=str(OTHER_PYTHON)))
    assert data["python_version"].startswith("3.12.")
    assert {row["installed_files"] for row in data["fixes"]} <= {"not installed", "not in the installed package "
                                                                 "(C++/tests: built into the binary)"}


def test_the_torch_build_is_read_not_imported(tmp_path):
    """A torch whose version.py says ROCm and whose __init__ would fail if run."""
    env = venv(tmp_path / "fake-torch")
    site = Path(subprocess.run([env, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise SystemExit('torch was imported')\n")
    (site / "torch" / "version.py").write_text("__version__ = '2.11.0+rocm7.2'\nhip: Optional[str] = '7.2.0'\n"
                                               "cuda: Optional[str] = None\n")
    info = site / "torch-2.11.0+rocm7.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+rocm7.2\n")
    data = report(env)
    assert data["backend"]["name"] == "rocm" and "torch 2.11.0+rocm7.2 built for rocm" in data["backend"]["detail"]
    assert rows(data)["pytorch-memory-budget-rng-recompute"]["version"] == "2.11.0+rocm7.2"


@pytest.mark.parametrize("python, message", [
    ("/no/such/python", "--python /no/such/python: no such file"),
    ("/etc", "--python /etc: not an executable"),
    ("/bin/false", "--python /bin/false: not a Python 3 interpreter fixmono can read"),
    ("/root/.pyenv/versions/2.7.18/bin/python", "not a Python 3 interpreter fixmono can read"),
])
def test_what_is_not_a_readable_python_is_one_line(python, message):
    if not Path(python).exists() and "no such" not in message:
        pytest.skip(f"no {python} here")
    proc = status("--python", python)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""


def test_run_runs_the_reproducers_under_that_interpreter(envs):
    """--run in a venv without torch or jax: every reproducer runs there (this
    fixmono on its path) and cannot run; a crash is never taken for a
    reproduced bug."""
    proc = status("--python", str(envs["affected"]), "--run", "--timeout", "120", "--json")
    assert proc.returncode == 0, proc.stderr
    found = {row["fix"]: row["reproducer"] for row in json.loads(proc.stdout)["fixes"]}
    assert {r["status"] for r in found.values()} == {"cannot-run-here"}, found
    assert not [r for r in found.values() if "reproducer failed" in r["detail"]], found  # none crashed: a missing
    assert "needs torch" in found["pytorch-batchnorm-negative-running-var"]["detail"]  # library is named
