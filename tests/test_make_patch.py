"""make_patch end to end against a scratch git checkout holding our fixture."""
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from fixmono.testing import git, snapshot
from tests.helpers import BN_FIX, FIXTURE, make_patch, pytorch_repo


def result_for(report: dict, fix_id: str) -> dict:
    (result,) = [r for run in report["runs"] for r in run["results"] if r["fix"] == fix_id]
    return result


def test_patch_applies_with_git_am_and_second_run_is_already_applied(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    before = snapshot(repo)
    run = make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    assert BN_FIX in run.stdout and "applied" in run.stdout
    assert snapshot(repo) == before  # HEAD, refs, index and working tree untouched

    out = tmp_path / "out"
    assert (out / "series").read_text() == f"0001-{BN_FIX}.patch\n"
    assert (out / "BASE").read_text() == f"commit {git(repo, 'rev-parse', 'HEAD').strip()}\n"
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    git(copy, "am", str(out / f"0001-{BN_FIX}.patch"))
    assert ".abs()" in (copy / "test/test_jit_fuser_te.py").read_text()
    assert "Fix-Id: " + BN_FIX in git(copy, "log", "-1", "--format=%B")

    again = make_patch("--all", "--upstream", str(copy), "--out", str(tmp_path / "out2"), "--json")
    report = json.loads(again.stdout)
    assert again.returncode == 0
    assert result_for(report, BN_FIX)["status"] == "already-applied"
    assert {r["status"] for r in report["runs"][0]["results"]} <= {"already-applied", "not-applicable"}
    assert (tmp_path / "out2" / "series").read_text() == ""


def test_outputs_are_byte_identical_across_runs_and_clones(tmp_path):
    repo = pytorch_repo(tmp_path / "a")
    clone = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    outputs = []
    for src, name in ((repo, "o1"), (repo, "o2"), (clone, "o3")):
        assert make_patch(BN_FIX, "--upstream", str(src), "--out", str(tmp_path / name)).returncode == 0
        outputs.append({p.name: p.read_bytes() for p in (tmp_path / name).iterdir()})
    assert outputs[0] == outputs[1] == outputs[2]


def test_rerun_replaces_the_series_in_out(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    out = tmp_path / "out"
    assert make_patch("--all", "--upstream", str(repo), "--out", str(out)).returncode == 0
    first = (out / f"0001-{BN_FIX}.patch").read_bytes()
    assert make_patch("--all", "--upstream", str(repo), "--out", str(out)).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(["BASE", "series", f"0001-{BN_FIX}.patch",
                                                            ".make_patch-manifest"])
    assert (out / f"0001-{BN_FIX}.patch").read_bytes() == first
    assert not list(tmp_path.glob(".out*"))  # no staging leftovers


def test_branch_adds_commits_without_touching_the_checkout(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    (repo / "untracked.txt").write_text("mine\n")
    head = git(repo, "rev-parse", "HEAD").strip()
    before = snapshot(repo)
    run = make_patch("--all", "--upstream", str(repo), "--branch", "fixes", "--out", str(tmp_path / "o"))
    assert run.returncode == 0, run.stderr
    assert "created branch fixes" in run.stdout
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(repo, "rev-parse", "fixes~1").strip() == head
    after = snapshot(repo)
    assert {k: v for k, v in after.items() if k != "refs"} == {k: v for k, v in before.items() if k != "refs"}
    assert after["refs"].replace(git(repo, "for-each-ref", "refs/heads/fixes"), "") == before["refs"]
    assert ".abs()" in git(repo, "show", "fixes:test/test_jit_fuser_te.py")
    assert git(repo, "worktree", "list").count("\n") == 1  # no stray worktree
    # the branch commit is the patch's commit
    patch = (tmp_path / "o" / f"0001-{BN_FIX}.patch").read_text()
    assert patch.startswith("From " + git(repo, "rev-parse", "fixes").strip())


def test_check_writes_nothing(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    run = make_patch("--all", "--upstream", str(repo), "--check", cwd=tmp_path)
    assert run.returncode == 0 and "applied" in run.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pytorch"]


def test_json_report_shape(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    run = make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / "o"), "--json")
    report = json.loads(run.stdout)
    assert report["exit_code"] == 0
    (r,) = report["runs"]
    assert r["project"] == "pytorch" and len(r["base"]) == 40
    assert result_for(report, BN_FIX)["patch"] == f"0001-{BN_FIX}.patch"


def test_moved_code_is_not_applicable_with_where_it_looked(tmp_path):
    source = FIXTURE.read_text().replace("test_batch_norm", "test_bn_eval")
    repo = pytorch_repo(tmp_path / "pytorch", test_file=source)
    run = make_patch("--all", "--upstream", str(repo), "--check")
    assert run.returncode == 0
    assert "not-applicable" in run.stdout and "test/test_jit_fuser_te.py" in run.stdout


def test_contract_violation_fails_with_exit_1(tmp_path):
    text = FIXTURE.read_text()
    doubled = text + text.replace("class TestTEFuser(", "class TestTEFuserCopy(")
    repo = pytorch_repo(tmp_path / "pytorch", test_file=doubled)
    run = make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / "o"))
    assert run.returncode == 1
    assert "failed" in run.stdout and "match contract expects 1 site" in run.stdout
    assert not (tmp_path / "o").exists()  # a failed run writes nothing
    assert "wrote nothing" in run.stdout


def test_branch_without_out_writes_no_series(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    run = make_patch("--all", "--upstream", str(repo), "--branch", "fixes", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "created branch fixes" in run.stdout and "wrote" not in run.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pytorch"]


def test_branch_is_created_only_never_moved(tmp_path, monkeypatch):
    """Between the check and the creation a branch of that name may appear:
    git must refuse (create-only), not fast-forward it to our commits."""
    from fixmono.apply.contract import apply_fix
    from fixmono.model.errors import UserError
    from fixmono.model.registry import discover
    from fixmono.output.branch import create_branch
    from fixmono.output.series import Entry, build_commits
    from fixmono.sources.open import open_upstream
    repo = pytorch_repo(tmp_path / "pytorch")
    upstream = open_upstream(str(repo))
    (fix,) = [f for f in discover() if f.id == BN_FIX]
    entry = Entry(fix, apply_fix(fix, upstream.read).new_files)
    tip = build_commits(upstream, [entry])[-1]
    git(repo, "branch", "fixes")  # appears after the check
    with pytest.raises(UserError, match="git could not create it") as err:
        create_branch(upstream, tip, "fixes")
    assert "\n" not in str(err.value)
    assert git(repo, "rev-parse", "fixes") == git(repo, "rev-parse", "HEAD")


def test_non_ascii_sources_under_the_c_locale(tmp_path):
    text = FIXTURE.read_text().replace("for fn in variants:", "for fn in variants:  # café, naïve", 1)
    repo = pytorch_repo(tmp_path / "pytorch", test_file=text)
    env = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
    run = make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / "o"), "--branch", "fixes", env=env)
    assert run.returncode == 0, run.stderr
    assert "# café, naïve" in (tmp_path / "o" / f"0001-{BN_FIX}.patch").read_text(encoding="utf-8")
    assert "# café, naïve" in git(repo, "show", "fixes:test/test_jit_fuser_te.py")


def test_dirty_check_leaves_the_index_alone(tmp_path):
    """A tracked file touched (new mtime, same content) is clean, and looking
    must not refresh, i.e. rewrite, the user's .git/index."""
    repo = pytorch_repo(tmp_path / "pytorch")
    index = repo / ".git" / "index"
    os.utime(index, ns=(1_000_000_000, 1_000_000_000))
    os.utime(repo / "torch/__init__.py", ns=(2_000_000_000_000_000_000, 2_000_000_000_000_000_000))
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    run = make_patch("--all", "--upstream", str(repo), "--check")
    assert run.returncode == 0, run.stderr
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before


def test_symlinked_out_writes_into_its_target(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    for _ in range(2):  # new, then replacing a series
        assert make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / "link")).returncode == 0
        assert (tmp_path / "link").is_symlink() and os.readlink(tmp_path / "link") == "real"
        assert (tmp_path / "real" / "series").read_text() == f"0001-{BN_FIX}.patch\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "pytorch", "real"]


def test_series_directory_mode_follows_the_umask(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    old = os.umask(0o022)
    try:
        for _ in range(2):
            assert make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / "o")).returncode == 0
            assert stat.S_IMODE((tmp_path / "o").stat().st_mode) == 0o755
    finally:
        os.umask(old)


def killed_holder(parent: Path, name: str, old_series: str | None = None, live: bool = False) -> Path:
    """The holder directory a run killed mid-write leaves beside --out (its
    marker unlocked), or that a live run is using (`live`: locked)."""
    from fixmono.sources.scratch import claim
    holder = parent / f".{name}.make_patch-k2x8abc"
    (holder / "new").mkdir(parents=True)
    (holder / "new" / "series").write_text("half\n")
    if live:
        LIVE_LOCKS.append(claim(holder / ".make_patch-staging"))
    else:
        (holder / ".make_patch-staging").write_text("12345\n")
    if old_series is not None:
        (holder / "old").mkdir()
        (holder / "old" / "series").write_text(old_series)
    return holder


LIVE_LOCKS: list[int] = []  # held for the test process's lifetime, like a live run's
USERS_LOOKALIKES = [".out.old-backup", ".out.new-2024", ".out.new-123", ".out.old-99999", ".out.make_patch-mine"]


def test_a_run_killed_between_its_renames_is_repaired(tmp_path):
    """Without an atomic exchange, replacing a series is two renames; if the
    run is killed between them, `out` is missing and the old series is in the
    holder. The next run puts it back, then replaces it, leaving nothing of
    its own, and directories of the user that look alike stay untouched."""
    repo = pytorch_repo(tmp_path / "pytorch")
    out = tmp_path / "out"
    assert make_patch("--all", "--upstream", str(repo), "--out", str(out)).returncode == 0
    holder = killed_holder(tmp_path, "out")
    shutil.rmtree(holder / "new")
    out.rename(holder / "old")
    for name in USERS_LOOKALIKES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "series").write_text("mine\n")
    assert make_patch("--all", "--upstream", str(repo), "--out", str(out)).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", "pytorch", *USERS_LOOKALIKES])
    assert (out / "series").read_text() == f"0001-{BN_FIX}.patch\n"
    assert all((tmp_path / name / "series").read_text() == "mine\n" for name in USERS_LOOKALIKES)


def test_sweep_restores_the_old_series_when_out_is_missing(tmp_path):
    from fixmono.output.out_dir import sweep_staging
    killed_holder(tmp_path, "out", old_series="old\n")
    live = killed_holder(tmp_path / "live", "out", live=True)  # a live run's holder stays
    sweep_staging(tmp_path / "out")
    sweep_staging(tmp_path / "live" / "out")
    assert (tmp_path / "out" / "series").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live", "out"]
    assert live.is_dir()


@pytest.mark.parametrize("atomic", [True, False])
@pytest.mark.parametrize("had_series", [True, False])
def test_series_write_commits_and_rolls_back(tmp_path, monkeypatch, atomic, had_series):
    from fixmono.output import out_dir as patches
    out = tmp_path / "out"
    if had_series:
        out.mkdir()
        (out / "series").write_text("old\n")
    if not atomic:
        monkeypatch.setattr(patches, "exchange", lambda a, b: False)
    write = patches.SeriesWrite(out)
    write.stage({"series": b"new\n"})
    write.commit()
    assert (out / "series").read_text() == "new\n"
    write.rollback()
    assert (out / "series").read_text() == "old\n" if had_series else not out.exists()
    write.finish()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out"] if had_series else [])


def test_exchange_is_atomic_where_the_system_has_it(tmp_path):
    from fixmono.output.out_dir import exchange
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    if not exchange(tmp_path / "a", tmp_path / "b"):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here")
    assert (tmp_path / "b" / "x").read_text() == "a" and not (tmp_path / "a" / "x").exists()


def test_scratch_of_dead_runs_is_swept_and_of_live_ones_kept_whatever_their_pid(tmp_path):
    """Runs in other PID namespaces (containers, Bazel sandboxes) share $TMPDIR:
    a pid means nothing across them, the marker's lock does."""
    from fixmono.sources.scratch import MARKER, claim
    repo = pytorch_repo(tmp_path / "pytorch")
    tmp = tmp_path / "tmp"
    live, dead = tmp / "make_patch-1-live", tmp / f"make_patch-{os.getpid()}-dead"
    for path in (live, dead):
        path.mkdir(parents=True)
    LIVE_LOCKS.append(claim(live / MARKER))  # pid 1's run, alive in its own namespace
    (dead / MARKER).write_text(f"{os.getpid()}\n")  # a pid alive here, but nobody holds the lock
    run = make_patch("--all", "--upstream", str(repo), "--check", env={"TMPDIR": str(tmp)})
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in tmp.iterdir()) == [live.name]
