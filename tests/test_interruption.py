"""SIGKILL at any point of a series run and of a --branch run: the checkout is
unchanged (a branch is either absent or complete), --out holds the old or the
new series, never half, and a rerun succeeds and cleans the leftovers.

The kills land at named points of the work (scratch.pause_point, a test hook:
the run says it reached the point and waits there), so each case is known to
have killed the run where it says; the timed kills below add points between."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT
from fixmono.sources.scratch import PAUSE_POINTS
from fixmono.testing import git, snapshot
from tests.helpers import BN_FIX, make_patch, pytorch_repo, run_killed_at

DELAYS = [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0]


def killed_run(*args, delay: float) -> int:
    proc = subprocess.Popen([sys.executable, "-m", "fixmono.cli.make_patch", *args],
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    return proc.wait()


def series_state(out):
    if not out.exists():
        return "none"
    names = sorted(p.name for p in out.iterdir())
    listed = (out / "series").read_text().split() if (out / "series").exists() else None
    assert listed is not None and sorted(listed + ["BASE", "series", ".make_patch-manifest"]) == names, \
        f"half a series: {names}"
    return "complete"


@pytest.mark.parametrize("point", PAUSE_POINTS)
def test_killed_at_each_point_of_a_series_and_branch_run(tmp_path, point):
    repo = pytorch_repo(tmp_path / "pytorch")
    out = tmp_path / "out"
    assert make_patch("--all", "--upstream", str(repo), "--out", str(out)).returncode == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    before = snapshot(repo)
    run_killed_at(point, tmp_path, BN_FIX, "--upstream", str(repo), "--out", str(out), "--branch", "fixes")
    after = snapshot(repo)
    assert series_state(out) == "complete"  # the old series, or the same new one
    branches = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads").split()
    if point in ("branch-created", "series-swapped", "written"):
        assert branches == ["refs/heads/fixes", "refs/heads/main"]  # SIGKILL cannot be undone: whole, though
        assert git(repo, "rev-parse", "fixes~1").strip() == before["head_commit"].strip()
    else:
        assert branches == ["refs/heads/main"] and after == before
    assert {k: v for k, v in after.items() if k != "refs"} == {k: v for k, v in before.items() if k != "refs"}
    assert not list((repo / ".git").rglob("*.lock"))
    rerun = make_patch("--all", "--upstream", str(repo), "--out", str(out))
    assert rerun.returncode == 0, rerun.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # the killed run's holder swept


@pytest.mark.parametrize("delay", DELAYS)
def test_killed_series_run(tmp_path, delay):
    repo = pytorch_repo(tmp_path / "pytorch")
    out = tmp_path / "out"
    assert make_patch("--all", "--upstream", str(repo), "--out", str(out)).returncode == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    before = snapshot(repo)
    killed_run(BN_FIX, "--upstream", str(repo), "--out", str(out), delay=delay)
    assert snapshot(repo) == before
    assert series_state(out) == "complete"  # the old series, or the same new one
    assert make_patch("--all", "--upstream", str(repo), "--out", str(out)).returncode == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # staging swept


@pytest.mark.parametrize("delay", DELAYS)
def test_killed_branch_run(tmp_path, delay):
    repo = pytorch_repo(tmp_path / "pytorch")
    before = snapshot(repo)
    killed_run("--all", "--upstream", str(repo), "--branch", "fixes", delay=delay)
    after = snapshot(repo)
    branches = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads").split()
    assert branches in (["refs/heads/main"], ["refs/heads/fixes", "refs/heads/main"])
    if "refs/heads/fixes" in branches:  # complete: the fix commit on top of HEAD
        assert git(repo, "rev-parse", "fixes~1").strip() == before["head_commit"].strip()
        assert ".abs()" in git(repo, "show", "fixes:test/test_jit_fuser_te.py")
    assert {k: v for k, v in after.items() if k != "refs"} == {k: v for k, v in before.items() if k != "refs"}
    assert git(repo, "worktree", "list").count("\n") == 1
    assert not list((repo / ".git").rglob("*.lock"))
    rerun = make_patch("--all", "--upstream", str(repo), "--branch", "fixes2")
    assert rerun.returncode == 0, rerun.stderr


def test_an_interrupted_git_is_stopped_with_the_processes_it_started(tmp_path):
    """run_git kills git's whole process group on Ctrl-C/SIGTERM: a process git started (here an alias's
    shell and its background sleep; in a run, a helper writing into the scratch repository) does not
    outlive the clean-up (a scratch folder was once left behind under load)."""
    import signal as signals

    from fixmono.sources.git import run_git
    pidfile = tmp_path / "pid"

    def interrupt(*_):
        raise KeyboardInterrupt
    previous = signals.signal(signals.SIGALRM, interrupt)
    signals.alarm(2)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_git(tmp_path, "-c", f"alias.slow=!sh -c 'sleep 60 & echo $! > {pidfile}; wait'", "slow")
    finally:
        signals.alarm(0)
        signals.signal(signals.SIGALRM, previous)
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
        except (FileNotFoundError, IndexError):
            return  # gone
        if state == "Z":
            return  # killed, waiting for init to reap it
        time.sleep(0.1)
    os.kill(pid, signals.SIGKILL)
    pytest.fail(f"git's child {pid} outlived the interrupt (state {state})")


def test_a_holder_left_empty_by_a_kill_before_its_claim_is_swept(tmp_path):
    """A SIGKILL between making the series' holder (or the run's scratch folder) and locking its marker
    left a folder no sweep would take: without a marker it looked like the user's (seen once in CI:
    test_killed_series_run[0.3]). An empty one is a killed run's: the next run removes it; anything else
    without a marker stays."""
    import tempfile

    repo = pytorch_repo(tmp_path / "pytorch")
    out = tmp_path / "out"
    empty = tmp_path / ".out.make_patch-deadbeef"
    empty.mkdir()
    kept = tmp_path / ".out.make_patch-usersown"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    dead_scratch = scratch_root / "make_patch-1-abcdef"
    dead_scratch.mkdir()
    run = subprocess.run([sys.executable, "-m", "fixmono.cli.make_patch", "--all", "--upstream", str(repo), "--out",
                          str(out)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"), "TMPDIR": str(scratch_root)})
    assert run.returncode == 0, run.stderr
    assert not empty.exists() and (kept / "notes.txt").read_text() == "mine"
    assert not dead_scratch.exists() and list(scratch_root.iterdir()) == []
    assert tempfile.gettempdir() != str(scratch_root)  # the child's TMPDIR, not this process's


def test_a_run_whose_fresh_holder_another_run_swept_makes_another(tmp_path, monkeypatch):
    from fixmono.sources import scratch

    made = []

    def make():
        folder = tmp_path / f"holder-{len(made)}"
        folder.mkdir()
        made.append(folder)
        if len(made) == 1:
            folder.rmdir()  # another run's sweep, in the instant between mkdtemp and claim
        return folder
    folder, fd = scratch.made_and_claimed(make, ".marker")
    assert folder == made[1] and (folder / ".marker").exists() and not scratch.abandoned(folder / ".marker")
    os.close(fd)


FINALISER_PROBE = """
import sys, time
from fixmono.cli import guard

class FreedAsTheSignalCame:  # what a Popen's __del__ meets when Ctrl-C lands in it
    def __del__(self):
        raise KeyboardInterrupt

def work(args):
    FreedAsTheSignalCame()
    for _ in range(500):  # the rest of the run, which the Ctrl-C must still stop
        time.sleep(0.01)
    return {}, 0

sys.exit(guard.run_command("probe", [], lambda argv: type("Args", (), {"json": False})(), work,
                           lambda payload, args: "finished\\n"))
"""


def test_a_ctrl_c_that_lands_in_a_finaliser_still_stops_the_run_in_one_line():
    """Python prints 'Exception ignored in: <function Popen.__del__ ...>' and drops the KeyboardInterrupt
    when it lands in a finaliser (seen under load in test_hostile): the run must still stop, in one line."""
    run = subprocess.run([sys.executable, "-c", FINALISER_PROBE], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")})
    assert run.returncode == 130 and run.stdout == "", (run.returncode, run.stdout, run.stderr)
    assert run.stderr == "probe: interrupted\n", run.stderr
