"""drift_matrix --git on a history made here (no network): the commits that
touched the fix's target, a branch tip, make_patch's status at each, whether
its own patch and the static patch from BASE apply, the CSV and the PNG, and
the checkout left exactly as it was. Bad input: one line, exit 2. The fixes
are throwaway ones, in a copy of the package whose catalogue holds only them."""
import csv
import io
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT, git, snapshot
from tests.helpers import throwaway_fix

FIX = "transformers-throwaway-fill-value"
OTHER = "jax-throwaway-fill-value"  # a fix for another project
TARGET = "src/transformers/_throwaway.py"
SHAPE = "".join(f"def before_{i}():\n    return {i}\n\n\n" for i in range(4)) + \
    "def fill_value():\n    x = 1\n    return None\n\n\n" + \
    "".join(f"def after_{i}():\n    return {i}\n\n\n" for i in range(4))


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """tools/ (the package and the launcher) beside a catalogue of two throwaway fixes."""
    root = tmp_path_factory.mktemp("package")
    shutil.copytree(REPO_ROOT / "tools" / "fixmono", root / "tools" / "fixmono",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "tools" / "drift_matrix", root / "tools")
    for upstream, fix_id, target in (("transformers", FIX, TARGET), ("jax", OTHER, "jax/_throwaway.py")):
        (root / "fixes" / upstream).mkdir(parents=True)
        for name, text in {"../__init__.py": "", "__init__.py": "", **throwaway_fix(upstream, fix_id, target)}.items():
            path = root / "fixes" / upstream / "throwaway_fill_value" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    (root / "fixes" / "__init__.py").write_text("")
    return root


@pytest.fixture()
def run(package):
    def drift_matrix(*args):
        return subprocess.run([sys.executable, str(package / "tools" / "drift_matrix"), *map(str, args)],
                              capture_output=True, text=True, timeout=300)
    return drift_matrix


def commit(repo: Path, files: dict, message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    repo = tmp_path_factory.mktemp("hist") / "transformers"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    c = {"root": commit(repo, {"README.md": "x\n"}, "root"),
         "marker": commit(repo, {"src/transformers/__init__.py": ""}, "package")}
    c["buggy"] = commit(repo, {TARGET: SHAPE}, "fill_value")
    c["far"] = commit(repo, {TARGET: SHAPE + "def later():\n    return 1\n"}, "unrelated, far from the fix")
    near = SHAPE.replace("    x = 1\n", "    x = 2\n")
    assert near != SHAPE
    c["near"] = commit(repo, {TARGET: near + "def later():\n    return 1\n"}, "change the line above the fix")
    fixed = near.replace("    return None\n", "    return 0.0\n")
    c["fixed"] = commit(repo, {TARGET: fixed + "def later():\n    return 1\n"}, "upstream fix")
    git(repo, "branch", "release-old", c["marker"])
    git(repo, "branch", "release-new", c["far"])
    return repo, c


def test_history_statuses_patches_csv_png(history, run, tmp_path):
    repo, c = history
    before = snapshot(repo)
    out = tmp_path / "r.md"
    proc = run("--git", repo, "--fix", FIX, "--base", c["buggy"], "--range", f"{c['root']}..main",
               "--tips", "release-*", "--csv", tmp_path / "p.csv", "--png", tmp_path / "p.png", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert snapshot(repo) == before  # nothing written to the checkout
    rows = list(csv.DictReader(io.StringIO((tmp_path / "p.csv").read_text())))
    got = [(r["commit"], r["ref"], r["status"], r["patch"], r["static"]) for r in rows]
    assert got == [(c["buggy"], "", "applied", "applies", "applies"),
                   (c["far"], "", "applied", "applies", "applies"),
                   (c["near"], "", "applied", "applies", "fails"),
                   (c["fixed"], "", "already-applied", "n/a", "fails"),
                   (c["far"], "release-new", "applied", "applies", "applies"),
                   (c["marker"], "release-old", "not-applicable", "n/a", "fails")]
    report = out.read_text()
    assert report == proc.stdout
    assert f"first commit where it stops applying: {c['near'][:12]}" in report
    assert "6 commits: 4 applied, 1 already-applied, 1 not-applicable\n" in report
    png = (tmp_path / "p.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == ((4 + 2 + 2) * 4, 3 * 24 + 2 * 4)  # 4 commits, a gap, 2 tips
    raw = zlib.decompress(png[png.index(b"IDAT") + 4:png.index(b"IEND") - 8])
    assert len(raw) == height * (1 + 3 * width)


def test_sample_keeps_the_first_and_the_last(history, run, tmp_path):
    repo, c = history
    proc = run("--git", repo, "--fix", FIX, "--base", c["buggy"], "--range", f"{c['root']}..main", "--sample", "2",
               "--csv", tmp_path / "p.csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO((tmp_path / "p.csv").read_text())))
    assert [r["commit"] for r in rows] == [c["buggy"], c["fixed"]]
    everything = run("--git", repo, "--fix", FIX, "--base", c["buggy"], "--csv", tmp_path / "q.csv")
    assert everything.returncode == 0, everything.stderr
    rows = list(csv.DictReader(io.StringIO((tmp_path / "q.csv").read_text())))
    assert [r["commit"] for r in rows] == [c["buggy"]]  # no --range: the history of BASE


@pytest.mark.parametrize("args, message", [
    (["--fix", FIX, "--fix", OTHER], "--git takes exactly one --fix"),
    (["--fix", "no-such-fix"], "unknown fix id: no-such-fix"),
    (["--fix", FIX, "--base", "no-such-rev"], "--base no-such-rev: no such commit"),
    (["--fix", FIX, "--range", "main"], "--range main: expected A..B"),
    (["--fix", FIX, "--tips", "nothing-*"], "--tips nothing-*: no branch matches"),
    (["--fix", FIX, "--sample", "0"], "--sample 0: must be 1 or more"),
    (["--fix", OTHER], "targets jax"),
])
def test_bad_input_is_one_line(history, run, args, message):
    repo, _ = history
    proc = run("--git", repo, *args)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
        proc.stderr


@pytest.mark.parametrize("where, message", [("missing", "not a directory"), ("plain", "not a git repository")])
def test_bad_repository_is_one_line(run, tmp_path, where, message):
    (tmp_path / "plain").mkdir()
    proc = run("--git", tmp_path / where, "--fix", FIX)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
        proc.stderr
