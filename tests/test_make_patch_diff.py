"""`make_patch --diff FILE`: a patch file of the user's is a fix, ported onto a
checkout by the port engine, with the outputs a fix id gives (statuses, a
series with the mail's identity, --json). Our own PyTorch-shaped files."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fixmono.runtime.child import child_env
from fixmono.testing import git, make_patch, make_repo, snapshot

BASE = """import os


class Module:
    def forward(self, x):
        y = x + 1
        return y


def helper():
    return 1
"""
FIXED = BASE.replace("y = x + 1", "y = x + 2")
LATER = "import sys\n" + BASE.replace("class Module:\n", "class Module:\n    def extra(self):\n        pass\n\n")


@pytest.fixture
def patch_file(tmp_path):
    """A git format-patch mail of the fix, made on a checkout of BASE."""
    repo = make_repo(tmp_path / "made", {"torch/__init__.py": "", "torch/nn/m.py": BASE})
    (repo / "torch/nn/m.py").write_text(FIXED)
    git(repo, "commit", "-qam", "Fix the offset in forward\n\nforward added one too few.")
    out = git(repo, "format-patch", "-1", "-o", str(tmp_path / "mail"))
    return tmp_path / "mail" / out.strip().split("/")[-1]


def upstream(tmp_path, text: str, name: str = "up"):
    return make_repo(tmp_path / name, {"torch/__init__.py": "__version__ = '0.0'\n", "torch/nn/m.py": text})


@pytest.mark.parametrize("text, status", [(BASE, "applied"), (LATER, "applied"), (FIXED, "already-applied")])
def test_a_patch_is_ported_and_reported_like_a_fix(tmp_path, patch_file, text, status):
    repo = upstream(tmp_path, text)
    before = snapshot(repo)
    proc = make_patch("--diff", str(patch_file), "--upstream", str(repo), "--check", "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(proc.stdout)["runs"][0]["results"]
    assert (result["fix"], result["status"]) == ("diff-fix-the-offset-in-forward", status)
    assert snapshot(repo) == before


def test_the_series_carries_the_mail_and_applies_with_git_am(tmp_path, patch_file):
    repo = upstream(tmp_path, LATER)
    proc = make_patch("--diff", str(patch_file), "--upstream", str(repo), "--out", str(tmp_path / "series"))
    assert proc.returncode == 0, proc.stderr
    (written,) = sorted((tmp_path / "series").glob("0001-*.patch"))
    text = written.read_text()
    assert "Subject: [PATCH] Fix the offset in forward" in text and "forward added one too few." in text
    assert "Fix-Id: diff-fix-the-offset-in-forward" in text
    git(repo, "am", "-q", str(written))
    assert (repo / "torch/nn/m.py").read_text() == LATER.replace("y = x + 1", "y = x + 2")
    again = make_patch("--diff", str(patch_file), "--upstream", str(repo), "--check", "--json")
    assert json.loads(again.stdout)["runs"][0]["results"][0]["status"] == "already-applied"


def test_added_deleted_and_renamed_files_travel_in_the_series(tmp_path):
    """A fix that changes m.py, adds a helper module, deletes an old one and
    renames a third with a change: ported onto a later release (m.py moved,
    the renamed one has an import more), the series applies with git am and
    gives the diff's files; then the diff is already-applied there."""
    util = "".join(f"def u{i}(v):\n    return v * {i}\n\n\n" for i in range(5))
    made = make_repo(tmp_path / "made", {"torch/__init__.py": "", "torch/nn/m.py": BASE, "torch/nn/old.py": "x = 1\n",
                                         "torch/nn/util.py": util})
    git(made, "mv", "torch/nn/util.py", "torch/nn/utils.py")
    (made / "torch/nn/utils.py").write_text(util.replace("v * 2", "v * -2"))
    (made / "torch/nn/m.py").write_text(FIXED)
    (made / "torch/nn/new.py").write_text("def clamp(v):\n    return max(v, 0)\n")
    git(made, "rm", "-q", "torch/nn/old.py")
    git(made, "add", "-A")
    git(made, "commit", "-qm", "Fix the offset, add clamp, drop old")
    (tmp_path / "files.patch").write_text(git(made, "format-patch", "-1", "--stdout"))
    repo = make_repo(tmp_path / "up", {"torch/__init__.py": "", "torch/nn/m.py": LATER, "torch/nn/old.py": "x = 1\n",
                                       "torch/nn/util.py": "import math\n" + util})
    proc = make_patch("--diff", str(tmp_path / "files.patch"), "--upstream", str(repo), "--out", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr
    (written,) = sorted((tmp_path / "s").glob("0001-*.patch"))
    git(repo, "am", "-q", str(written))
    assert (repo / "torch/nn/new.py").read_text() == "def clamp(v):\n    return max(v, 0)\n"
    assert not (repo / "torch/nn/old.py").exists() and not (repo / "torch/nn/util.py").exists()
    assert (repo / "torch/nn/utils.py").read_text() == "import math\n" + util.replace("v * 2", "v * -2")
    assert (repo / "torch/nn/m.py").read_text() == LATER.replace("y = x + 1", "y = x + 2")
    again = make_patch("--diff", str(tmp_path / "files.patch"), "--upstream", str(repo), "--check", "--json")
    assert json.loads(again.stdout)["runs"][0]["results"][0]["status"] == "already-applied"


def test_stdin_is_a_patch_too(tmp_path, patch_file):
    repo = upstream(tmp_path, BASE)
    proc = make_patch_stdin(patch_file.read_text(), "--diff", "-", "--upstream", str(repo), "--check")
    assert proc.returncode == 0 and "applied" in proc.stdout, proc.stderr


def make_patch_stdin(data: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fixmono.cli.make_patch", *args], input=data, capture_output=True,
                          text=True, env=child_env({**os.environ}))


def test_where_the_code_is_not_there_it_is_not_applicable_and_where_it_differs_failed(tmp_path, patch_file):
    other = upstream(tmp_path, "def unrelated():\n    return 0\n", "other")
    proc = make_patch("--diff", str(patch_file), "--upstream", str(other), "--check", "--json")
    assert json.loads(proc.stdout)["runs"][0]["results"][0]["status"] == "not-applicable"
    differs = upstream(tmp_path, BASE.replace("y = x + 1", "y = x * 3"), "differs")
    proc = make_patch("--diff", str(patch_file), "--upstream", str(differs), "--out", str(tmp_path / "none"))
    result = json.loads(make_patch("--diff", str(patch_file), "--upstream", str(differs), "--check",
                                   "--json").stdout)["runs"][0]["results"][0]
    assert proc.returncode == 1 and result["status"] == "failed" and "y = x + 1" in result["detail"], result
    assert not (tmp_path / "none").exists() or not any((tmp_path / "none").iterdir())


@pytest.mark.parametrize("make, words", [
    (lambda t: ["--diff", str(t / "missing.patch")], "No such file"),
    (lambda t: ["--diff", write(t / "bad.patch", "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n")],
     "not a well-formed diff"),
    (lambda t: ["--diff", write(t / "bin.patch", "diff --git a/x b/x\nindex 1..2 100644\n"
                                                 "Binary files a/x and b/x differ\n")], "binary"),
    (lambda t: ["--diff", write(t / "up.patch", "--- a/../x.py\n+++ b/../x.py\n@@ -1 +1 @@\n-a\n+b\n")],
     "climbs out"),
    (lambda t: ["torch-fix", "--diff", write(t / "ok.patch", "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n")],
     "not both"),
])
def test_bad_patches_are_one_line_and_nothing_is_written(tmp_path, make, words):
    repo = upstream(tmp_path, BASE)
    before = snapshot(repo)
    proc = make_patch(*make(tmp_path), "--upstream", str(repo), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists() and snapshot(repo) == before


def write(path, text: str) -> str:
    path.write_text(text)
    return str(path)
