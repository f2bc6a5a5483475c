"""Bad input: one clear line and exit code 2 (or the documented status), never
a traceback, and the checkout byte-identical afterwards."""
import os
import shutil
from pathlib import Path

import pytest

from tools.fixlib.testing import git, make_repo, snapshot
from tests.helpers import BN_FIX, FIXTURE, make_patch, pytorch_files, pytorch_repo


def repo(tmp: Path, **kw) -> Path:
    return pytorch_repo(tmp / "up", **kw)


def dirty_tracked(tmp):
    r = repo(tmp)
    (r / "torch/__init__.py").write_text("changed = 1\n")
    return r


def dirty_staged(tmp):
    r = repo(tmp)
    (r / "new.py").write_text("x = 1\n")
    git(r, "add", "new.py")
    return r


def bare(tmp):
    git(tmp, "init", "-q", "--bare", str(tmp / "up"))
    return tmp / "up"


def empty(tmp):
    git(tmp, "init", "-q", str(tmp / "up"))
    return tmp / "up"


def with_branch(tmp):
    r = repo(tmp)
    git(r, "branch", "fixes")
    return r


def symlinked_target(tmp):
    files = pytorch_files()
    files["test/real_test.py"] = files.pop("test/test_jit_fuser_te.py")
    r = make_repo(tmp / "up", files)
    os.symlink("real_test.py", r / "test/test_jit_fuser_te.py")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "link")
    return r


def detached(tmp):
    r = repo(tmp)
    git(r, "checkout", "-q", "--detach")
    return r


def transformers_tree(tmp):
    return make_repo(tmp / "up", {"src/transformers/__init__.py": "", "setup.py": ""})


def unknown_tree(tmp):
    return make_repo(tmp / "up", {"README.md": "hello\n"})


def no_repo(tmp):
    (tmp / "up").mkdir()
    (tmp / "up" / "file.py").write_text("")
    return tmp / "up"


def a_file(tmp):
    (tmp / "up").write_text("not a dir")
    return tmp / "up"


def foreign_out(tmp):
    (tmp / "o").mkdir()
    (tmp / "o" / "notes.txt").write_text("mine")
    return repo(tmp)


def file_out(tmp):
    (tmp / "o").write_text("a file")
    return repo(tmp)


def offline_pip_env(tmp):
    (tmp / "empty_index").mkdir(exist_ok=True)
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp / "empty_index"),
            "PIP_CONFIG_FILE": os.devnull, "FIXMONO_CACHE": str(tmp / "cache")}


UP = "{up}"
# (id, make the upstream, argv with {up}/{tmp}, exit code, message substring)
CASES = [
    ("missing path", None, ["--all", "--upstream", "{tmp}/nope"], 2, "no such file or directory"),
    ("not a directory", a_file, ["--all", "--upstream", UP], 2, "not a directory"),
    ("not a git repo", no_repo, ["--all", "--upstream", UP], 2, "not a git repository"),
    ("bare repo", bare, ["--all", "--upstream", UP], 2, "bare repository"),
    ("empty repo", empty, ["--all", "--upstream", UP], 2, "no commits"),
    ("dirty working tree", dirty_tracked, ["--all", "--upstream", UP], 2, "uncommitted changes"),
    ("dirty index", dirty_staged, ["--all", "--upstream", UP], 2, "uncommitted changes"),
    ("dirty with --branch", dirty_tracked, ["--all", "--upstream", UP, "--branch", "b"], 2,
     "uncommitted changes"),
    ("subdirectory", repo, ["--all", "--upstream", "{up}/test"], 2, "not the top level"),
    ("unknown upstream", unknown_tree, ["--all", "--upstream", UP], 2, "not a known upstream"),
    ("unknown fix id", repo, ["no-such-fix", "--upstream", UP], 2, "unknown fix id"),
    ("no fixes named", repo, ["--upstream", UP], 2, "name the fixes"),
    ("ids and --all", repo, [BN_FIX, "--all", "--upstream", UP], 2, "not both"),
    ("fix for another upstream", transformers_tree, [BN_FIX, "--upstream", UP], 2, "targets pytorch"),
    ("--check with --out", repo, ["--all", "--upstream", UP, "--check", "--out", "{tmp}/o"], 2,
     "cannot be combined"),
    ("--branch with pip", None, ["--all", "--upstream", "pip:torch==2.13.0", "--branch", "b"], 2,
     "needs a git checkout"),
    ("--branch with default", None, ["--all", "--upstream", "default", "--branch", "b"], 2,
     "needs a git checkout"),
    ("branch exists", with_branch, ["--all", "--upstream", UP, "--branch", "fixes"], 2, "already exists"),
    ("invalid branch name", repo, ["--all", "--upstream", UP, "--branch", "a..b"], 2,
     "not a valid branch name"),
    ("--out inside checkout", repo, ["--all", "--upstream", UP, "--out", "{up}/patches"], 2,
     "inside the upstream checkout"),
    ("--out is a file", file_out, ["--all", "--upstream", UP, "--out", "{tmp}/o"], 2, "not a directory"),
    ("--out holds other files", foreign_out, ["--all", "--upstream", UP, "--out", "{tmp}/o"], 2,
     "did not write"),
    ("--out not writable", repo, ["--all", "--upstream", UP, "--out", "/proc/make_patch_out"], 2,
     "--out /proc/make_patch_out"),
    ("malformed pip spec", None, ["--all", "--upstream", "pip:torch"], 2, "expected pip:NAME==VERSION"),
    ("pip spec of another project", None, ["--all", "--upstream", "pip:requests==2.0.0"], 2,
     "not an upstream of any fix"),
    ("unreachable pip version", None, ["--all", "--upstream", "pip:torch==0.0.1"], 2,
     "could not download"),
    ("unknown option", repo, ["--all", "--upstream", UP, "--frobnicate"], 2, "unrecognized arguments"),
    ("missing --upstream", None, ["--all"], 2, "--upstream"),
    # documented statuses rather than exit 2
    ("target not UTF-8", lambda t: repo(t, test_file=b"x = '\xff'\n"), ["--all", "--upstream", UP], 1,
     "not UTF-8"),
    ("target syntax error", lambda t: repo(t, test_file="def broken(:\n"), ["--all", "--upstream", UP], 1,
     "syntax error at line 1"),
    ("symlinked target", symlinked_target, ["--all", "--upstream", UP], 1, "is a symlink"),
    ("target missing", lambda t: make_repo(t / "up", {"torch/__init__.py": ""}),
     ["--all", "--upstream", UP, "--check"], 0, "test_jit_fuser_te.py: not at HEAD"),
    ("target already patched", lambda t: repo(t, test_file=FIXTURE.read_text().replace(
        "x = torch.randn(16, device=device)", "x = torch.rand(16, device=device)")),
     ["--all", "--upstream", UP, "--check"], 0, "already-applied"),
    ("detached HEAD", detached, ["--all", "--upstream", UP, "--check"], 0, "detached HEAD"),
    ("--all on an upstream with no fixes", transformers_tree, ["--all", "--upstream", UP, "--check"], 0,
     "no fixes for this upstream"),
]


@pytest.mark.parametrize("name,setup,argv,code,message", CASES, ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, name, setup, argv, code, message):
    up = setup(tmp_path) if setup else None
    if name == "foreign_out" or name == "--out holds other files":
        foreign_before = (tmp_path / "o" / "notes.txt").read_text()
    before = snapshot(up) if up and (up / ".git").is_dir() else None
    args = [a.format(up=up, tmp=tmp_path) for a in argv]
    run = make_patch(*args, cwd=tmp_path, env=offline_pip_env(tmp_path))
    assert run.returncode == code, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr + run.stdout
    if code == 2:
        assert run.stderr.startswith("make_patch: error: ") and run.stderr.count("\n") == 1, run.stderr
        assert message in run.stderr, run.stderr
        assert run.stdout == ""
    else:
        assert message in run.stdout, run.stdout
    if before is not None:
        assert snapshot(up) == before
    if name == "--out holds other files":
        assert (tmp_path / "o" / "notes.txt").read_text() == foreign_before
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == [], leftovers


def test_at_least_25_bad_input_cases():
    assert sum(1 for c in CASES if c[3] == 2) >= 25
