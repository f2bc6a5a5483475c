"""The tree transformation on our Blas.cpp fixture, and make_patch choosing
between git revert and the transformation from the checkout's history."""
import json
from pathlib import Path

from fixmono.apply.contract import apply_change
from fixmono.model.outcome import Status
from fixmono.testing import git, make_repo, snapshot
from fixmono.testing import make_patch
from fixmono.fixes.pytorch.addmm_cublaslt_gate_revert.fix import FIX, TARGET

BLAS = (Path(__file__).parent / "fixtures" / "Blas.cpp").read_text()
GATE_LINES = BLAS[BLAS.index("  // NOTE: See https://github.com/pytorch/pytorch/issues/172231"):
                  BLAS.index("  #ifdef USE_ROCM")]
UNGATED = BLAS.replace(GATE_LINES, "")
PR = "Pull Request resolved: https://github.com/pytorch/pytorch/pull/172340"


def test_fixture_loses_exactly_the_gate():
    out = apply_change(FIX.changes[0], BLAS)
    assert out.status is Status.APPLIED, out.detail
    assert out.new_text == UNGATED
    assert "isGloballyDisabledAddmmCudaLt(self.device())" in out.new_text  # env var, incl. the ROCm block
    assert apply_change(FIX.changes[0], out.new_text).status is Status.ALREADY_APPLIED


def history_repo(tmp: Path, later_edit: str | None = None) -> Path:
    """A PyTorch-shaped history: before the gate, the gate's commit (with a
    test change and the PR trailer), then an unrelated later commit."""
    repo = make_repo(tmp / "pytorch", {"torch/__init__.py": "", TARGET: UNGATED,
                                       "test/test_cuda.py": "def test_blas():\n    pass\n"})
    (repo / TARGET).write_text(BLAS)
    (repo / "test/test_cuda.py").write_text("def test_blas():\n    set_backend_default()\n")
    git(repo, "commit", "-qam", f"make addmm aware of cublas backend selection\n\n{PR}\n")
    (repo / "README").write_text(later_edit or "later\n")
    if later_edit:
        (repo / TARGET).write_text(BLAS.replace("preferred_cublas_backend == BlasBackend::Default",
                                                "preferred_cublas_backend == BlasBackend::Default  "))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "later work")
    return repo


def results(run):
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["runs"][0]["results"][0]


def test_history_with_the_commit_is_reverted_through_git(tmp_path):
    repo = history_repo(tmp_path)
    before = snapshot(repo)
    r = results(make_patch(FIX.id, "--upstream", str(repo), "--out", str(tmp_path / "o"), "--json"))
    assert r["status"] == "applied" and r["detail"].startswith("git revert of ")
    assert snapshot(repo) == before
    patch = (tmp_path / "o" / r["patch"]).read_text()
    assert "This reverts commit " in patch and "test/test_cuda.py" in patch  # the whole commit, tests too
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "am", str(tmp_path / "o" / r["patch"]))
    assert (clone / TARGET).read_text() == UNGATED
    assert (clone / "test/test_cuda.py").read_text() == "def test_blas():\n    pass\n"
    again = results(make_patch(FIX.id, "--upstream", str(clone), "--check", "--json"))
    assert again["status"] == "already-applied"


def test_no_history_falls_back_to_the_transformation(tmp_path):
    repo = make_repo(tmp_path / "pytorch", {"torch/__init__.py": "", TARGET: BLAS})
    r = results(make_patch(FIX.id, "--upstream", str(repo), "--check", "--json"))
    assert r["status"] == "applied"
    assert r["detail"].startswith("tree transformation (https://github.com/pytorch/pytorch/pull/172340 is not "
                                  "in this history)")


def test_conflicting_revert_falls_back_and_says_why(tmp_path):
    repo = history_repo(tmp_path, later_edit="reformatted the gate\n")
    r = results(make_patch(FIX.id, "--upstream", str(repo), "--out", str(tmp_path / "o"), "--json"))
    assert r["status"] == "applied" and "conflicts" in r["detail"] and "tree transformation" in r["detail"]
    patch = (tmp_path / "o" / r["patch"]).read_text()
    assert "This reverts commit" not in patch and "test/test_cuda.py" not in patch


def test_a_tree_older_than_the_gate_is_not_applicable_not_already_applied(tmp_path):
    repo = make_repo(tmp_path / "pytorch", {"torch/__init__.py": "", TARGET: UNGATED})
    r = results(make_patch(FIX.id, "--upstream", str(repo), "--check", "--json"))
    assert r["status"] == "not-applicable"
    assert r["detail"] == f"{TARGET}: no cuBLASLt gate here (predates #172340)"


def test_a_tree_where_upstream_reverted_the_gate_is_already_applied(tmp_path):
    repo = history_repo(tmp_path)
    (repo / TARGET).write_text(UNGATED)
    git(repo, "commit", "-qam", "Revert \"make addmm aware of cublas backend selection\"")
    assert results(make_patch(FIX.id, "--upstream", str(repo), "--check", "--json"))["status"] == "already-applied"
