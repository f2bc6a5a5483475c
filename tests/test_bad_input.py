"""Bad input: one clear line and exit code 2 (or the documented status), never
a traceback, and the checkout byte-identical afterwards."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixmono.output.progress import STEP_LINE
from fixmono.runtime.child import child_env
from fixmono.testing import git, make_repo, snapshot
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


def fix_branch(tmp):
    r = repo(tmp)
    git(r, "branch", "fix")
    return r


def fix_x_branch(tmp):
    r = repo(tmp)
    git(r, "branch", "fix/x")
    return r


def dangling_out(tmp):
    os.symlink(tmp / "nowhere", tmp / "o")
    return repo(tmp)


def series_dir_out(tmp):
    (tmp / "o" / "series").mkdir(parents=True)  # a directory named like our file is not ours
    return repo(tmp)


def checkout_named_series(tmp):
    return pytorch_repo(tmp / "x" / "series")


def deep_target(terms):
    """A target whose expression nests `terms` deep (libcst crashed on these)."""
    return lambda t: repo(t, test_file=FIXTURE.read_text() + "x = " + "+".join(["1"] * terms) + "\n")


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
    ("empty --upstream", None, ["--all", "--upstream", ""], 2, "--upstream is empty"),
    ("--upstream of an unknown user", None, ["--all", "--upstream", "~no_such_user_mp/x"], 2, "no such user"),
    ("empty --out", repo, ["--all", "--upstream", UP, "--out", ""], 2, "--out is empty"),
    ("empty --branch", repo, ["--all", "--upstream", UP, "--branch", ""], 2, "--branch is empty"),
    ("--out a dangling symlink", dangling_out, ["--all", "--upstream", UP, "--out", "{tmp}/o"], 2,
     "dangling symlink"),
    ("--out holds a directory named series", series_dir_out, ["--all", "--upstream", UP, "--out", "{tmp}/o"],
     2, "did not write (series"),
    ("--out contains the checkout", checkout_named_series, ["--all", "--upstream", UP, "--out", "{tmp}/x"], 2,
     "contains the upstream checkout"),
    ("--branch under an existing branch", fix_branch,
     ["--all", "--upstream", UP, "--branch", "fix/x", "--out", "{tmp}/o"], 2, "clashes with the existing branch fix"),
    ("--branch above an existing branch", fix_x_branch,
     ["--all", "--upstream", UP, "--branch", "fix", "--out", "{tmp}/o"], 2, "clashes with the existing branch fix/x"),
    ("--branch @{-1}", repo, ["--all", "--upstream", UP, "--branch", "@{{-1}}", "--out", "{tmp}/o"], 2,
     "not a valid branch name"),
    ("missing --upstream", None, ["--all"], 2, "--upstream"),
    # documented statuses rather than exit 2
    ("target not UTF-8", lambda t: repo(t, test_file=b"x = '\xff'\n"), ["--all", "--upstream", UP], 1,
     "not UTF-8"),
    ("target syntax error", lambda t: repo(t, test_file="def broken(:\n"), ["--all", "--upstream", UP], 1,
     "syntax error at line 1"),
    ("symlinked target", symlinked_target, ["--all", "--upstream", UP], 1, "is a symlink"),
    ("target with a UTF-8 BOM", lambda t: repo(t, test_file=b"\xef\xbb\xbf" + FIXTURE.read_bytes()),
     ["--all", "--upstream", UP, "--check"], 0, "1 site(s) changed"),
    ("target nested too deeply to parse", deep_target(10000), ["--all", "--upstream", UP, "--check"], 1,
     "nested too deeply to parse"),
    ("target nested too deeply to transform", deep_target(600), ["--all", "--upstream", UP, "--check"], 1,
     "nested too deeply to transform"),
    ("target missing", lambda t: make_repo(t / "up", {"torch/__init__.py": ""}),
     ["--all", "--upstream", UP, "--check"], 0, "test_jit_fuser_te.py: not at HEAD"),
    ("target already patched", lambda t: repo(t, test_file=FIXTURE.read_text().replace(
        "x = torch.randn(16, device=device)", "x = torch.rand(16, device=device)")),
     ["--all", "--upstream", UP, "--check"], 0, "already-applied"),
    ("detached HEAD", detached, ["--all", "--upstream", UP, "--check"], 0, "detached HEAD"),
    ("--all on a tree without the targets", transformers_tree, ["--all", "--upstream", UP, "--check"], 0,
     "not-applicable"),
]


@pytest.mark.parametrize("name,setup,argv,code,message", CASES, ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, name, setup, argv, code, message):
    up = setup(tmp_path) if setup else None
    if name == "foreign_out" or name == "--out holds other files":
        foreign_before = (tmp_path / "o" / "notes.txt").read_text()
    before = snapshot(up) if up and (up / ".git").is_dir() else None
    args = [a.format(up=up, tmp=tmp_path) for a in argv]
    env = offline_pip_env(tmp_path)
    around = outside_upstream(tmp_path, up)
    run = make_patch(*args, cwd=tmp_path, env=env)
    assert run.returncode == code, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr + run.stdout
    if code == 2:
        if name == "--out not writable":  # found as the series is written: the steps of the run come before it
            assert all(STEP_LINE.match(line) for line in run.stderr.splitlines()[:-1]), run.stderr
            run.stderr = run.stderr.splitlines(keepends=True)[-1]
        assert run.stderr.startswith("make_patch: error: ") and run.stderr.count("\n") == 1, run.stderr
        assert message in run.stderr, run.stderr
        assert run.stdout == ""
        assert outside_upstream(tmp_path, up) == around  # nothing written (no series, no branch)
    else:
        assert message in run.stdout, run.stdout
    if before is not None:
        assert snapshot(up) == before
    if name == "--out holds other files":
        assert (tmp_path / "o" / "notes.txt").read_text() == foreign_before
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == [], leftovers


def outside_upstream(tmp: Path, up: Path | None) -> dict:
    """Every path under `tmp` but the upstream and the wheel cache, with its bytes."""
    skip = [p for p in (up, tmp / "cache") if p is not None]
    return {str(p): p.read_bytes() if p.is_file() and not p.is_symlink() else None
            for p in tmp.rglob("*") if not any(p == s or s in p.parents for s in skip)}


def run_in(cwd: Path, *argv: str):
    run = make_patch(*argv, cwd=cwd)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("make_patch: error: ") and run.stderr.count("\n") == 1, run.stderr
    return run.stderr


def test_out_dot_is_refused(tmp_path):
    up = repo(tmp_path)
    (tmp_path / "here").mkdir()
    assert "is the current directory" in run_in(tmp_path / "here", "--all", "--upstream", str(up), "--out", ".")
    assert list((tmp_path / "here").iterdir()) == []


def test_default_out_inside_the_checkout_suggests_out(tmp_path):
    up = repo(tmp_path)
    before = snapshot(up)
    assert "pass --out DIR" in run_in(up, "--all", "--upstream", ".")
    assert snapshot(up) == before


def test_head_git_cannot_read_is_not_called_no_commits(tmp_path):
    up = repo(tmp_path)
    (up / ".git/refs/heads/main").write_text("0" * 39 + "1\n")  # a branch whose commit is missing
    message = run_in(tmp_path, "--all", "--upstream", str(up), "--check")
    assert "git cannot read HEAD: fatal: bad object HEAD" in message


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the checkout another owner")
def test_dubious_ownership_is_reported_as_git_says(tmp_path):
    up = repo(tmp_path)
    try:
        for path in [up, *up.rglob("*")]:
            os.lchown(path, 65534, 65534)
    except OSError as err:  # not root, or a sandbox without that uid (Bazel's linux-sandbox)
        pytest.skip(f"cannot hand the repository to another user here: {err.strerror}")
    message = run_in(tmp_path, "--all", "--upstream", str(up), "--check")
    assert "dubious ownership" in message and "no commits" not in message


def test_unreadable_out_is_refused(tmp_path, monkeypatch, capsys):
    """As root every directory is readable, so the failing listing is simulated."""
    from fixmono.cli import make_patch as cli
    up = repo(tmp_path)
    (tmp_path / "locked").mkdir()
    real = Path.iterdir

    def iterdir(self):
        if self.name == "locked":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    assert cli.main(["--all", "--upstream", str(up), "--out", str(tmp_path / "locked")]) == 2
    err = capsys.readouterr().err
    assert "cannot read it: Permission denied" in err and err.count("\n") == 1, err


def test_os_errors_opening_the_upstream_are_one_line(tmp_path, monkeypatch, capsys):
    from fixmono.cli import make_patch as cli
    from fixmono.sources import upstream
    up = repo(tmp_path)

    def fail(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(up / ".git"))

    monkeypatch.setattr(upstream, "open_repository", fail)
    assert cli.main(["--all", "--upstream", str(up), "--check"]) == 2
    err = capsys.readouterr().err
    assert err == f"make_patch: error: --upstream {up}: cannot open it: Permission denied: {up / '.git'}\n"


def test_broken_fix_module_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    from fixmono.cli import make_patch as cli
    from fixmono.model import registry
    (tmp_path / "broken_fix_pkg").mkdir()
    (tmp_path / "broken_fix_pkg" / "fix.py").write_text("def oops(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "fix_packages", lambda: ["broken_fix_pkg"])
    assert cli.main(["--all", "--upstream", str(tmp_path), "--check"]) == 2
    err = capsys.readouterr().err
    assert "broken_fix_pkg/fix.py cannot be imported: SyntaxError" in err and err.count("\n") == 1, err


def test_at_least_25_bad_input_cases():
    assert sum(1 for c in CASES if c[3] == 2) >= 25



@pytest.mark.parametrize("command", ["status", "make-patch", "patch-wheel", "patch-env", "drift", "import",
                                     "compare-weights", "report"])
def test_a_fixmono_subcommand_names_itself_in_its_error(command):
    """`fixmono drift` said `drift_matrix: error:` (the tool's own name): each subcommand
    speaks as `fixmono COMMAND`; the tools in tools/ keep their own names."""
    run = subprocess.run([sys.executable, "-m", "fixmono", command, "--bogus"], capture_output=True, text=True,
                         env=child_env(), timeout=120)
    assert run.returncode == 2 and run.stderr.startswith(f"fixmono {command}: error: "), run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
