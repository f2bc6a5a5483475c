"""Against the real gemm.py of published transformer-engine wheels, fetched at
test time (py3-none-any, about 1 MB each, cached). Tag: network."""
import json
import os
import shutil

import pytest

from fixmono.apply.contract import apply_change
from fixmono.model.outcome import Status
from fixmono.model.projects import PROJECTS
from fixmono.testing import git, only_insertions
from fixmono.sources.wheel import materialise_wheel
from fixmono.testing import make_patch
from fixmono.fixes.transformer_engine.rocm_unfused_bgrad.double import check_fix
from fixmono.fixes.transformer_engine.rocm_unfused_bgrad.fix import FIX, TARGET

TE = PROJECTS["transformer-engine"]
# first and last 2.x releases, and releases where general_gemm changed shape
# (workspace argument until 2.7, alpha/beta from 2.9, NVFP4 row-scaled branch by 2.16)
# TE_WHEEL_VERSIONS="2.1.0 2.2.0 ..." checks another list (the README's full range).
VERSIONS = os.environ.get("TE_WHEEL_VERSIONS", "2.1.0 2.5.0 2.8.0 2.12.0 2.16.1 2.20.2").split()


def real_gemm(version: str) -> str:
    return (materialise_wheel(TE, version) / TARGET).read_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_real_general_gemm_is_patched_and_works(version):
    source = real_gemm(version)
    out = apply_change(FIX.changes[0], source)
    assert out.status is Status.APPLIED, out.detail
    inserted = "".join(only_insertions(source, out.new_text))
    assert "torch.version.hip is not None" in inserted  # NVIDIA's file has no IS_HIP_EXTENSION
    assert apply_change(FIX.changes[0], out.new_text).status is Status.ALREADY_APPLIED
    res = check_fix(source, out.new_text)
    assert res.unpatched_error == "Unable to find any suitable algorithms"
    assert res.problems == []


def test_te_1x_has_no_general_gemm():
    out = apply_change(FIX.changes[0], real_gemm("1.13.0"))
    assert out.status is Status.NOT_APPLICABLE and "general_gemm" in out.detail


def test_make_patch_series_against_the_wheel_applies_with_git_am(tmp_path):
    run = make_patch(FIX.id, "--upstream", "pip:transformer-engine==2.20.2", "--out", str(tmp_path / "o"))
    assert run.returncode == 0, run.stderr
    repo = materialise_wheel(TE, "2.20.2")
    clone = tmp_path / "te"
    shutil.copytree(repo, clone)
    patch = tmp_path / "o" / f"0001-{FIX.id}.patch"
    git(clone, "am", str(patch))
    again = make_patch(FIX.id, "--upstream", str(clone), "--check", "--json")
    assert json.loads(again.stdout)["runs"][0]["results"][0]["status"] == "already-applied"
