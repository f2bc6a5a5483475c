"""The transformation on our ROCm-shaped fixture, and the behavioural check of
the patched function against the hipBLASLt double."""
from pathlib import Path

import libcst as cst

from fixmono.apply.contract import apply_change
from fixmono.model.outcome import Status
from fixmono.testing import only_insertions
from fixmono.fixes.transformer_engine.rocm_unfused_bgrad.double import check_fix
from fixmono.fixes.transformer_engine.rocm_unfused_bgrad.fix import FIX

FIXTURE = (Path(__file__).parent / "fixtures" / "gemm_rocm.py").read_text()
CHANGE = FIX.changes[0]


def test_fixture_gets_the_rocm_branch_and_nothing_else_changes():
    out = apply_change(CHANGE, FIXTURE)
    assert out.status is Status.APPLIED, out.detail
    inserted = only_insertions(FIXTURE, out.new_text)
    assert "        IS_HIP_EXTENSION\n" in inserted  # the fork's own flag, no new import
    assert "import" not in "".join(inserted)
    assert len([l for l in inserted if l.strip()]) == 17  # 12 condition, 2 drop-bias, 3 bias-grad lines
    cst.parse_module(out.new_text)


def test_idempotent_and_already_applied():
    once = apply_change(CHANGE, FIXTURE).new_text
    assert apply_change(CHANGE, once).status is Status.ALREADY_APPLIED


def test_patched_fixture_passes_the_behavioural_check():
    patched = apply_change(CHANGE, FIXTURE).new_text
    res = check_fix(FIXTURE, patched)
    assert res.unpatched_error == "Unable to find any suitable algorithms"
    assert res.problems == []
    assert res.notes == ["CUDA path: 3 GEMM calls with identical arguments"]


def test_the_check_can_fail():
    """Fed the unpatched source as 'patched', the check reports the failure."""
    res = check_fix(FIXTURE, FIXTURE)
    assert res.problems == ["patched general_gemm failed on ROCm: Unable to find any suitable algorithms"]


def test_a_wrong_fix_is_caught():
    """A patch that forgets the fp32 cast condition and sums in bf16 is caught."""
    patched = apply_change(CHANGE, FIXTURE).new_text.replace("dtype=torch.float32)", "dtype=torch.bfloat16).float()")
    res = check_fix(FIXTURE, patched)
    assert "bias grad is not bitwise equal to dy.sum(0, dtype=float32)" in res.problems
