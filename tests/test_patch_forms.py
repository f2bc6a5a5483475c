"""Every form of patch teams carry, through the commands that take --diff
(issue 40 part 2): quilt/Debian `pkg.orig/` names, -p0, svn's `Index:`, git's
--no-prefix, CRLF-ended diffs, a diff made a folder up; the strip level decided
as patch and git apply decide it, or by --strip N; a path that is nowhere, a
`.git` path or a control character refused in one line; series (a quilt
folder, an mbox, a folder of NNNN-*.patch) taken in order. Our own
PyTorch-shaped files and diffs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from fixmono.testing import REPO_ROOT, git, make_patch, make_repo, snapshot, write_wheel

PATH = "torch/utils/cpp_extension.py"
MODULE = "import os\n\n\ndef include_paths(cuda):\n    paths = ['include']\n    if cuda:\n" \
         "        paths.append('cuda')\n    return paths\n"
FIXED = MODULE.replace("paths.append('cuda')", "paths.append('hip' if os.environ.get('ROCM') else 'cuda')")
HUNK = """@@ -5,4 +5,4 @@ def include_paths(cuda):
     paths = ['include']
     if cuda:
-        paths.append('cuda')
+        paths.append('hip' if os.environ.get('ROCM') else 'cuda')
     return paths
"""
FORMS = {  # name: the diff as a team carries it
    "quilt": f"--- pytorch-2.7.0.orig/{PATH}\t2025-04-01 10:00:00.000000000 +0000\n"
             f"+++ pytorch-2.7.0/{PATH}\t2025-04-02 10:00:00.000000000 +0000\n{HUNK}",
    "debian": f"Description: include paths for ROCm\nAuthor: A Packager <p@example.org>\n---\n"
              f"--- pkg.orig/{PATH}\n+++ pkg/{PATH}\n{HUNK}",
    "p0": f"--- {PATH}\n+++ {PATH}\n{HUNK}",
    "p0-orig": f"--- {PATH}.orig\n+++ {PATH}\n{HUNK}",
    "index": f"Index: {PATH}\n{'=' * 67}\n--- {PATH}\t(revision 41)\n+++ {PATH}\t(working copy)\n{HUNK}",
    "git-no-prefix": f"diff --git {PATH} {PATH}\nindex 1111111..2222222 100644\n--- {PATH}\n+++ {PATH}\n{HUNK}",
    "crlf": f"--- a/{PATH}\n+++ b/{PATH}\n{HUNK}".replace("\n", "\r\n"),
    "a-folder-up": f"--- a/pytorch/{PATH}\n+++ b/pytorch/{PATH}\n{HUNK}",
    "deeper": f"--- home/me/src/pytorch/{PATH}\n+++ home/me/src/pytorch/{PATH}\n{HUNK}",
}


def checkout(tmp_path, text: str = MODULE):
    return make_repo(tmp_path / "pytorch", {"torch/__init__.py": "", "torch/utils/__init__.py": "", PATH: text})


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_is_applied_where_its_files_are(tmp_path, form):
    repo = checkout(tmp_path)
    before = snapshot(repo)
    (tmp_path / "fix.patch").write_bytes(FORMS[form].encode())
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", str(repo), "--out", str(tmp_path / "out"),
                      "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in json.loads(proc.stdout)["runs"][0]["results"]] == ["applied"]
    assert snapshot(repo) == before
    (written,) = sorted((tmp_path / "out").glob("0001-*.patch"))
    git(repo, "am", "-q", str(written))
    assert (repo / PATH).read_text() == FIXED


@pytest.mark.parametrize("text, tried", [
    (f"--- src/torch/utils/other.py\n+++ src/torch/utils/other.py\n{HUNK}",
     "tried src/torch/utils/other.py, torch/utils/other.py, utils/other.py, other.py"),
    (f"--- vendor/lib/x.py\n+++ vendor/lib/x.py\n{HUNK}", "tried vendor/lib/x.py, lib/x.py, x.py"),
])
def test_a_path_that_is_nowhere_is_one_line_and_nothing_is_written(tmp_path, text, tried):
    """Never `not-applicable` for a path that was not understood (before: exit 0
    and an empty series: the patch lost without a word)."""
    repo = checkout(tmp_path)
    (tmp_path / "fix.patch").write_text(text)
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", str(repo), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and tried in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_added_files_only_need_a_prefix_convention_or_strip(tmp_path):
    repo = checkout(tmp_path)
    (tmp_path / "add.patch").write_text("--- /dev/null\n+++ torch/utils/rocm.py\n@@ -0,0 +1 @@\n+HIP = True\n")
    proc = make_patch("--diff", str(tmp_path / "add.patch"), "--upstream", str(repo), "--check")
    assert proc.returncode == 2 and "give --strip N" in proc.stderr, proc.stderr
    forced = make_patch("--diff", str(tmp_path / "add.patch"), "--upstream", str(repo), "--strip", "0",
                        "--branch", "rocm")
    assert forced.returncode == 0, forced.stderr
    assert git(repo, "show", "rocm:torch/utils/rocm.py").strip() == "HIP = True"


@pytest.mark.parametrize("strip, status", [(2, "applied"), (3, "not-applicable")])
def test_strip_n_decides_the_level(tmp_path, strip, status):
    repo = checkout(tmp_path)
    (tmp_path / "fix.patch").write_text(f"--- x/y/{PATH}\n+++ x/y/{PATH}\n{HUNK}")
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", str(repo), "--strip", str(strip),
                      "--check", "--json")
    assert json.loads(proc.stdout)["runs"][0]["results"][0]["status"] == status, proc.stderr


GIT_PATHS = [".git/hooks/post-checkout", ".GIT/hooks/post-checkout", ".git /config", ".git./config",
             "torch/.git/hooks/pre-commit", "GIT~1/hooks/post-checkout"]


def git_diff(name: str, form: str) -> str:
    return {"adds": f"diff --git a/{name} b/{name}\nnew file mode 100755\n--- /dev/null\n+++ b/{name}\n"
                    "@@ -0,0 +1,2 @@\n+#!/bin/sh\n+touch /tmp/owned\n",
            "modifies": f"--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-a\n+b\n",
            "deletes": f"--- a/{name}\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
            "renames onto": f"diff --git a/{PATH} b/{name}\nsimilarity index 100%\nrename from {PATH}\n"
                            f"rename to {name}\n"}[form]


@pytest.mark.parametrize("form", ["adds", "modifies", "deletes", "renames onto"])
@pytest.mark.parametrize("name", GIT_PATHS)
def test_a_git_directory_path_is_refused_before_any_branch(tmp_path, name, form):
    """Before: --branch committed a tree holding .git/hooks/post-checkout into the user's repository."""
    repo = checkout(tmp_path)
    before = snapshot(repo), git(repo, "for-each-ref")
    (tmp_path / "evil.patch").write_text(f"--- a/{PATH}\n+++ b/{PATH}\n{HUNK}" + git_diff(name, form))
    proc = make_patch("--diff", str(tmp_path / "evil.patch"), "--upstream", str(repo), "--branch", "fixed")
    assert proc.returncode == 2 and "inside a .git directory" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert (snapshot(repo), git(repo, "for-each-ref")) == before


@pytest.mark.parametrize("name", [".gitmodules", ".gitignore", "torch/.gitattributes"])
def test_git_named_files_of_the_project_are_taken(tmp_path, name):
    repo = checkout(tmp_path)
    (tmp_path / "ok.patch").write_text(f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+*.so\n")
    proc = make_patch("--diff", str(tmp_path / "ok.patch"), "--upstream", str(repo), "--branch", "fixed")
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "show", f"fixed:{name}").strip() == "*.so"


@pytest.mark.parametrize("raw", ["torch/utils/cpp\x00extension.py", "torch/utils/cpp\rextension.py",
                                 "torch/utils/cpp\x1bextension.py"])
def test_a_control_character_in_a_path_is_one_line(tmp_path, raw):
    """Before: a NUL byte was exit 3, an internal error."""
    repo = checkout(tmp_path)
    (tmp_path / "bad.patch").write_bytes(f"--- a/{raw}\n+++ b/{raw}\n{HUNK}".encode())
    proc = make_patch("--diff", str(tmp_path / "bad.patch"), "--upstream", str(repo), "--check")
    assert proc.returncode == 2 and "control character" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# A series: three patches, each its own file; given as a quilt folder, an mbox or a folder of NNNN-*.patch
FILES = [f"torch/utils/m{n}.py" for n in (1, 2, 3)]


def series(tmp_path, form: str) -> str:
    mails = [f"From {n:040x} Mon Sep 17 00:00:00 2001\nFrom: A <a@example.org>\nSubject: [PATCH {n}/3] step {n}\n\n"
             f"---\n--- a/{path}\n+++ b/{path}\n{HUNK}" for n, path in enumerate(FILES, 1)]
    folder = tmp_path / form
    folder.mkdir()
    if form == "mbox":
        (folder / "steps.mbox").write_text("".join(mails))
        return str(folder / "steps.mbox")
    if form == "quilt":
        for name, mail in zip(("c.diff", "a.diff", "b.diff"), mails):  # the series file's order, not the names'
            (folder / name).write_text(mail)
        (folder / "series").write_text("# carried\nc.diff -p1\na.diff\n\nb.diff # last\n")
    else:
        for n, mail in enumerate(mails, 1):
            (folder / f"{n:04d}-step-{n}.patch").write_text(mail)
    return str(folder)


def series_tree() -> dict:
    return {"torch/__init__.py": "", **{path: MODULE for path in FILES}}


@pytest.mark.parametrize("form", ["quilt", "mbox", "numbered"])
def test_make_patch_takes_a_series_in_order(tmp_path, form):
    repo = make_repo(tmp_path / "pytorch", series_tree())
    proc = make_patch("--diff", series(tmp_path, form), "--upstream", str(repo), "--out", str(tmp_path / "out"),
                      "--json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["runs"][0]["results"]
    assert [(r["fix"], r["status"]) for r in results] == [(f"diff-step-{n}", "applied") for n in (1, 2, 3)]
    assert (tmp_path / "out" / "series").read_text().split() == [r["patch"] for r in results]


@pytest.mark.parametrize("form", ["quilt", "mbox", "numbered"])
def test_patch_wheel_takes_a_series_in_order(tmp_path, form):
    wheel = write_wheel(tmp_path / "dist", "tinytorch", "99.0.0", series_tree())  # a wheel of no fix: any
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "patch_wheel"), str(wheel), "--diff",
                           series(tmp_path, form), "--out", str(tmp_path / "out"), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["fixes"] == [f"diff-step-{n}" for n in (1, 2, 3)]
    (built,) = (tmp_path / "out").glob("*.whl")
    with zipfile.ZipFile(built) as zf:
        assert [zf.read(path).decode() for path in FILES] == [FIXED] * 3


@pytest.mark.parametrize("form", ["quilt", "mbox", "numbered"])
def test_drift_takes_a_series_in_order(tmp_path, form):
    write_wheel(tmp_path / "links", "torch", "99.0.0", series_tree())
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "links"),
           "PIP_CONFIG_FILE": os.devnull, "FIXMONO_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "drift_matrix"), "--diff",
                           series(tmp_path, form), "--versions", "torch=99.0.0", "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    matrix = json.loads(proc.stdout)["matrix"]
    assert list(matrix) == [f"diff-step-{n}" for n in (1, 2, 3)]
    assert [cells[0]["status"] for cells in matrix.values()] == ["applied"] * 3


@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "fixmono.cli.make_patch", "--all", "--upstream", "default"],
    [sys.executable, str(REPO_ROOT / "tools" / "drift_matrix"), "--versions", "torch=2.5.0"],
    [sys.executable, str(REPO_ROOT / "tools" / "patch_wheel"), "x-1.0-py3-none-any.whl", "series"],
    [sys.executable, "-m", "fixmono", "patch-env", "--all"],
    [sys.executable, "-m", "fixmono", "status"],
])
def test_strip_is_for_diff(command):
    proc = subprocess.run([*command, "--strip", "1"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"), "PIP_NO_INDEX": "1"})
    assert proc.returncode == 2 and "--strip N is for --diff" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("form", ["deeper", "quilt", "numbered"])
def test_patch_env_and_status_take_every_form(tmp_path, form):
    """No upstream to ask: a diff without a prefix is read at the level under which its
    files are in a known project's package; a prefixed one at its prefix; a folder is a series."""
    import difflib

    from tests.test_patch_env import AFFECTED, MOE, fixed, fixmono, make_env

    python, site = make_env(tmp_path, AFFECTED.before)
    body = "".join(difflib.unified_diff(AFFECTED.before.splitlines(True), fixed(AFFECTED.before).splitlines(True),
                                        "x", "y")).split("\n", 2)[2]
    path = "src/" + MOE
    old, new = {"deeper": (f"home/me/transformers/{path}", f"home/me/transformers/{path}"),
                "quilt": (f"transformers-5.17.0.orig/{path}", f"transformers-5.17.0/{path}"),
                "numbered": (f"a/{path}", f"b/{path}")}[form]
    text = f"--- {old}\n+++ {new}\n{body}"
    if form == "numbered":
        (tmp_path / "series").mkdir()
        (tmp_path / "series" / "0001-moe.patch").write_text(text)
        patch = str(tmp_path / "series")
    else:
        (tmp_path / "fix.patch").write_text(text)
        patch = str(tmp_path / "fix.patch")

    def status() -> str:
        proc = fixmono("status", "--python", str(python), "--diff", patch, "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["fixes"][0]["installed_files"]

    assert status() == "not fixed"
    proc = fixmono("patch-env", "--python", str(python), "--diff", patch)
    assert proc.returncode == 0 and "patched" in proc.stdout, proc.stdout + proc.stderr
    assert (site / MOE).read_text() == fixed(AFFECTED.before)
    assert status() == "patched by fixmono"
