"""--upstream URL@REF over a real git server on loopback (git daemon, started
and stopped here) serving a synthetic repository of 20k files and 2k commits
(tools/bench_remote.py builds it): the same statuses as a local checkout, the
transfer figures printed beside a full clone's, the cache reused, concurrent
runs and a SIGKILLed run survived; bad specs and dead servers are one line."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT
from fixmono.sources.remote import parse
from fixmono.model.errors import UserError

sys.path.insert(0, str(REPO_ROOT / "tools"))
import bench_remote  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("served")
    bench_remote.build_repo(base / "repo.git", files=2000, commits=200)
    with bench_remote.serve(base) as url:
        yield url + "repo.git"


def run(*args, cache: Path, env=None, **kw):
    full = {**os.environ, "FIXMONO_CACHE": str(cache), "PYTHONPATH": str(REPO_ROOT / "tools"), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "fixmono.cli.make_patch", *map(str, args)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full, **kw)


def finish(proc) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def statuses(proc) -> dict:
    return {r["fix"]: r["status"] for r in json.loads(proc.stdout)["runs"][0]["results"]}


def assert_carried_fixes_applied(found: dict) -> None:
    """The fixes whose fixtures the synthetic repository holds are applied; the
    others target files it lacks (the imported jax fixes): not-applicable."""
    carried = {"jax-cudnn-gqa-kv-offsets", "jaxlib-rocm-plugin-discovery"}
    assert {fix: found[fix] for fix in carried} == dict.fromkeys(carried, "applied")
    assert {status for fix, status in found.items() if fix not in carried} <= {"not-applicable"}


def test_figures_at_20k_files_and_2k_commits(tmp_path, capsys):
    """The issue's size, side by side in one run; bytes checked (< 2% of a
    full clone), time printed (a benchmark figure, not asserted)."""
    out = bench_remote.measure(tmp_path, files=20000, commits=2000)
    with capsys.disabled():
        print(f"\nremote run {out['remote']['bytes']} bytes in {out['remote']['seconds']} s; full clone "
              f"{out['full_clone']['bytes']} bytes in {out['full_clone']['seconds']} s "
              f"({100 * out['bytes_ratio']:.3f}%); local checkout run {out['local_checkout']['seconds']} s "
              f"(remote/local {out['time_vs_local']}x)")
    assert out["bytes_ratio"] < 0.02
    assert out["remote"]["statuses"] == out["local_checkout"]["statuses"]
    assert_carried_fixes_applied(out["remote"]["statuses"])
    assert out["remote_cached"]["bytes_added"] == 0  # the second run fetched nothing new


def test_series_written_and_branch_refused(served, tmp_path):
    done = finish(run("--all", "--upstream", f"{served}@main", "--out", tmp_path / "o", cache=tmp_path / "c"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "o" / "series").read_text().split() == ["0001-jax-cudnn-gqa-kv-offsets.patch",
                                                               "0002-jaxlib-rocm-plugin-discovery.patch"]
    assert "fetching main from" in done.stderr and "received" in done.stderr  # progress on stderr
    branch = finish(run("--all", "--upstream", f"{served}@main", "--branch", "b", cache=tmp_path / "c"))
    assert branch.returncode == 2 and "--branch needs a git checkout" in branch.stderr
    assert len(branch.stderr.strip().splitlines()) == 1


def test_concurrent_runs_and_a_sigkilled_one(served, tmp_path):
    cache = tmp_path / "c"
    pause = tmp_path / "paused"
    first = run("--all", "--upstream", f"{served}@main", "--check", cache=cache,
                env={"FIXMONO_PAUSE_AT": "remote-locked", "FIXMONO_PAUSE_FILE": str(pause)})
    deadline = time.monotonic() + 60
    while not pause.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pause.read_text() == "remote-locked"
    repo = next((cache / "remotes").glob("*.git"))
    (repo / "shallow.lock").write_text("")  # what a git killed mid-fetch leaves
    second = run("--all", "--upstream", f"{served}@main", "--check", "--json", cache=cache)
    time.sleep(1)
    assert second.poll() is None  # waiting for the first run's lock
    first.send_signal(signal.SIGKILL)
    first.wait()
    done = finish(second)
    assert done.returncode == 0, done.stderr
    assert_carried_fixes_applied(statuses(done))


@pytest.mark.parametrize("spec, message", [
    ("github:owner@main", "expected URL@REF"),
    ("https://example.com/repo.git", "expected URL@REF"),
    ("git://127.0.0.1:9/repo.git@-x", "is not a ref"),
])
def test_bad_specs(spec, message):
    with pytest.raises(UserError, match=message):
        parse(spec)


def test_github_shorthand():
    assert parse("github:pytorch/pytorch@v2.12.0") == ("https://github.com/pytorch/pytorch.git", "v2.12.0")
    assert parse("git@github.com:ROCm/xla.git@rocm-jaxlib-v0.10.2") == ("git@github.com:ROCm/xla.git",
                                                                       "rocm-jaxlib-v0.10.2")


def test_dead_server_and_unknown_ref_are_one_line(served, tmp_path):
    port = bench_remote.free_port()  # nothing listens there
    for spec, message in ((f"git://127.0.0.1:{port}/repo.git@main", "fetch failed"),
                          (f"{served}@no-such-branch", "fetch failed")):
        done = finish(run("--all", "--upstream", spec, "--check", cache=tmp_path / "c"))
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert [line for line in done.stderr.splitlines() if line.startswith("make_patch: error")] and \
            len([line for line in done.stderr.splitlines() if "error" in line]) == 1


@pytest.mark.parametrize("spec", ["https://example.com/repo.git", "github:owner", "git@host:repo.git"])
def test_a_url_without_ref_is_one_line_through_make_patch(spec, tmp_path):
    done = finish(run("--all", "--upstream", spec, "--check", cache=tmp_path / "c"))
    assert done.returncode == 2 and "expected URL@REF" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c" / "remotes").exists() or not list((tmp_path / "c" / "remotes").glob("*.git"))
