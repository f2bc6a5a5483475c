"""make_patch never imports or runs code from the upstream, never hands user
paths to a shell, and writes only inside --out (and the new branch)."""
import re
from pathlib import Path

from fixmono.testing import REPO_ROOT
from fixmono.testing import git, make_repo, snapshot
from tests.helpers import FIXTURE, make_patch

HOSTILE = ["-rf", "--upstream=/", "$(touch PWNED)", "`touch PWNED`", "a b; touch PWNED", "new\nline.py",
           "ünïcode ✓.py", "'quote\".py", "*", "..hidden", "back\\slash.py"]


def evil_checkout(root: Path, marker: Path) -> Path:
    """A PyTorch-shaped checkout whose Python files write `marker` if imported or run,
    with hooks that would too, and hostile file names."""
    payload = f"open({str(marker)!r}, 'w').write('executed')\n"
    files = {"torch/__init__.py": payload, "setup.py": payload, "conftest.py": payload,
             "test/test_jit_fuser_te.py": payload + FIXTURE.read_text(),
             **{f"weird/{name}": payload for name in HOSTILE}}
    repo = make_repo(root, files)
    for hook in ("post-checkout", "post-commit", "pre-commit", "reference-transaction", "post-rewrite"):
        path = repo / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {marker}\n")
        path.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(repo / ".git" / "hooks" / "post-commit"))  # runs on `git status`
    return repo


def test_hostile_checkout_is_read_not_run(tmp_path):
    marker = tmp_path / "PWNED"
    repo = evil_checkout(tmp_path / "checkout", marker)
    before = snapshot(repo)
    listing = sorted(p.name for p in tmp_path.iterdir())
    for extra in ([], ["--branch", "fixes"]):
        run = make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / "out"), *extra, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
    assert not marker.exists() and not (tmp_path / "checkout" / "PWNED").exists()
    assert not list(tmp_path.rglob("PWNED"))
    after = snapshot(repo)
    assert {k: v for k, v in after.items() if k != "refs"} == {k: v for k, v in before.items() if k != "refs"}
    assert after["refs"].replace(git(repo, "for-each-ref", "refs/heads/fixes"), "") == before["refs"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(listing + ["out"])  # nothing else written


def test_hostile_out_names_stay_names(tmp_path):
    repo = make_repo(tmp_path / "checkout", {"torch/__init__.py": "", "test/test_jit_fuser_te.py": FIXTURE.read_text()})
    for name in ("$(touch PWNED)", "-rf", "a b", "ünï ✓"):
        run = make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / name), cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        assert (tmp_path / name / "series").is_file()
    assert not list(tmp_path.rglob("PWNED"))


def tool_sources() -> list[Path]:
    """Every Python file of tools/: modules, and the scripts without a .py name."""
    scripts = [p for p in (REPO_ROOT / "tools").iterdir() if p.is_file() and p.suffix == ""
               and p.read_bytes().startswith(b"#!/usr/bin/env python3")]
    return sorted((REPO_ROOT / "tools").rglob("*.py")) + scripts


def test_no_shell_in_the_tools():
    sources = tool_sources()
    assert {"make_patch", "fixes", "patch_wheel", "drift_matrix", "compare_weights"} <= {p.name for p in sources}
    offenders = [f"{p.name}: {line.strip()}" for p in sources for line in p.read_text().splitlines()
                 if re.search(r"shell\s*=\s*True|os\.system\(|os\.popen\(", line)]
    assert offenders == []


def test_git_starts_only_in_the_one_layer():
    """Every git process of the tools goes through tools/fixmono/sources/git.py
    (hardened environment, no transport, allow-listed commands in a checkout),
    and no library runs git behind its back (GitPython is not a dependency)."""
    sources = tool_sources()
    starts_git = re.compile(r"""(subprocess\.\w+|Popen|os\.exec\w*|os\.spawn\w*)\(\s*\[?\s*["']git["']""")
    layer = REPO_ROOT / "tools" / "fixmono" / "sources" / "git.py"
    server = REPO_ROOT / "tools" / "bench_remote.py"  # starts `git daemon`, the server its benchmark fetches from
    offenders = [f"{p.relative_to(REPO_ROOT)}: {line.strip()}" for p in sources
                 if p not in (layer, server) for line in p.read_text().splitlines()
                 if starts_git.search(line) or re.match(r"\s*(import git\b|from git\b)", line)]
    assert offenders == []
    assert "GitPython" not in (REPO_ROOT / "requirements.txt").read_text()


def test_the_checkout_layer_refuses_other_commands(tmp_path):
    from fixmono.sources.git import Checkout
    repo = make_repo(tmp_path / "r", {"a.py": ""})
    for command in ("fetch", "log", "diff", "checkout", "gc", "am", "commit", "cat-file"):
        try:
            Checkout(repo).git(command)
        except AssertionError as err:
            assert command in str(err)
        else:
            raise AssertionError(f"git {command} ran in a checkout")
