"""make_patch end to end against a scratch git checkout holding our fixture."""
import json
import shutil

from tools.fixlib.testing import git, snapshot
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
    assert sorted(p.name for p in out.iterdir()) == sorted(["BASE", "series", f"0001-{BN_FIX}.patch"])
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


def test_validate_reports_and_passes(tmp_path):
    repo = pytorch_repo(tmp_path / "pytorch")
    run = make_patch("--all", "--upstream", str(repo), "--check", "--validate", "--json")
    result = result_for(json.loads(run.stdout), BN_FIX)
    assert run.returncode == 0 and result["status"] == "applied"


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
    assert (tmp_path / "o" / "series").read_text() == ""  # nothing emitted for a failed fix
