"""The whole catalogue, per upstream, on trees holding every target: two runs
give byte-identical series; with the series applied (git am), every fix
reports already-applied."""
import json
import shutil
from pathlib import Path

import pytest
import transformers

from tools.fixlib.registry import REPO_ROOT, discover
from tools.fixlib.testing import git, make_repo
from tests.helpers import make_patch

FIXTURES = REPO_ROOT / "fixes"


def tree(project: str) -> dict:
    """A tree of `project` holding every target of its fixes (our fixtures; for
    transformers, the installed 5.23.0 files, which are that release's text)."""
    if project == "pytorch":
        return {"torch/__init__.py": "",
                "test/test_jit_fuser_te.py": (FIXTURES / "pytorch/batchnorm_negative_running_var/fixtures/"
                                              "test_jit_fuser_te.py").read_text(),
                "aten/src/ATen/native/cuda/Blas.cpp": (FIXTURES / "pytorch/addmm_cublaslt_gate_revert/fixtures/"
                                                       "Blas.cpp").read_text()}
    if project == "transformer-engine":
        return {"transformer_engine/__init__.py": "",
                "transformer_engine/pytorch/cpp_extensions/gemm.py":
                    (FIXTURES / "transformer_engine/rocm_unfused_bgrad/fixtures/gemm_rocm.py").read_text()}
    if project == "xla":
        xla = FIXTURES / "xla/miopen_global_mutex/fixtures"
        return {"xla/stream_executor/BUILD": "",
                "xla/stream_executor/rocm/rocm_dnn.cc": (xla / "rocm_dnn.cc").read_text(),
                "xla/backends/gpu/autotuner/miopen.cc": (xla / "autotuner_miopen.cc").read_text()}
    package = Path(transformers.__file__).parent
    return {f"src/transformers/{rel}": (package / rel).read_text()
            for rel in ("__init__.py", "integrations/moe.py", "modeling_utils.py")}


PROJECTS = sorted({f.upstream for f in discover()})


@pytest.mark.parametrize("project", PROJECTS)
def test_deterministic_then_idempotent(tmp_path, project):
    repo = make_repo(tmp_path / project, tree(project))
    outs = []
    for name in ("o1", "o2"):
        run = make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / name), "--json")
        assert run.returncode == 0, run.stderr
        outs.append({p.name: p.read_bytes() for p in (tmp_path / name).iterdir()})
        statuses = {r["fix"]: r["status"] for r in json.loads(run.stdout)["runs"][0]["results"]}
        assert set(statuses.values()) == {"applied"}, statuses
    assert outs[0] == outs[1]
    clone = tmp_path / "applied"
    shutil.copytree(repo, clone)
    series = (tmp_path / "o1" / "series").read_text().split()
    git(clone, "am", *(str(tmp_path / "o1" / name) for name in series))
    again = make_patch("--all", "--upstream", str(clone), "--check", "--json")
    statuses = {r["fix"]: r["status"] for r in json.loads(again.stdout)["runs"][0]["results"]}
    assert set(statuses.values()) == {"already-applied"}, statuses
    assert set(statuses) == {f.id for f in discover() if f.upstream == project}
