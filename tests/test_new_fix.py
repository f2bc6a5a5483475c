"""One folder is one fix: a throwaway sixth fix, written into a temporary copy
of the repository as its folder only (declaration, transformation, one
fixture, one inline case), is picked up by discovery, the inline-case test,
the catalogue test, the property tests and make_patch, with no other file of
the copy edited."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import copy_tree, throwaway_fix

FOLDER = Path("fixes/pytorch/throwaway_fill_value")
FIX_ID = "pytorch-throwaway-fill-value"
FILES = throwaway_fix("pytorch", FIX_ID, "torch/_throwaway.py")
def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def run(copy: Path, *argv: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{copy / 'tools'}{os.pathsep}{copy}", "PYTHONDONTWRITEBYTECODE": "1", **extra_env}
    env.pop("XML_OUTPUT_FILE", None)  # the inner pytest must not overwrite Bazel's report
    return subprocess.run([sys.executable, *argv], cwd=copy, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    root = copy_tree(tmp_path_factory.mktemp("tree") / "repo")
    before = digests(root)
    for name, text in FILES.items():
        path = root / FOLDER / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    after = digests(root)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {str(FOLDER / name) for name in FILES}  # the folder, nothing else
    return root


def test_discovery_finds_it(copy):
    proc = run(copy, "-c", "from fixmono.model.registry import discover; print([f.id for f in discover()])")
    assert proc.returncode == 0, proc.stderr
    assert FIX_ID in proc.stdout


def test_inline_cases_run(copy):
    proc = run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tools/fix_cases_test.py",
               FIX_PACKAGE="fixmono.fixes.pytorch.throwaway_fill_value")  # as its :cases_test target runs it
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout  # its two cases, the declares-cases and the distinct-cases checks


def test_catalogue_and_property_tests_include_it(copy):
    proc = run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
               "tests/test_catalogue.py", "tests/test_properties.py", "-k", "pytorch or throwaway")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"PASSED tests/test_properties.py::test_reformatted_target_gives_a_correct_edit_or_a_reason[{FIX_ID}" \
           in proc.stdout
    assert "PASSED tests/test_catalogue.py::test_deterministic_then_idempotent[pytorch]" in proc.stdout


def test_make_patch_applies_it(copy, tmp_path):
    repo = tmp_path / "pytorch"  # a checkout holding every pytorch fixture, built inside the copy
    made = run(copy, "-c", "import sys; from pathlib import Path; from fixmono.testing import catalogue_tree, "
                           "make_repo; make_repo(Path(sys.argv[1]), catalogue_tree('pytorch'))", str(repo))
    assert made.returncode == 0, made.stderr
    proc = run(copy, "-m", "fixmono.cli.make_patch", FIX_ID, "--upstream", str(repo), "--out", str(tmp_path / "o"),
               "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(proc.stdout)["runs"][0]["results"]
    assert result["status"] == "applied", result
    patch = (tmp_path / "o" / result["patch"]).read_text()
    assert "-    return None\n+    return 0.0\n" in patch and patch.count("+    return") == 1  # other() kept
