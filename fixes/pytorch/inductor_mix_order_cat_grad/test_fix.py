"""Offline: --validate on our fixture (the fix passes, the unfixed and a wrongly
fixed text fail with the reason), and the hot-fix on the installed torch
(2.13.0 in .venv: affected) swapping the class's method and back. The GPU
reproducer's run is in results/ (an H100 through the device tool)."""
import json
from pathlib import Path

import pytest

from fixmono.fixes.pytorch.inductor_mix_order_cat_grad import hotfix, validate
from fixmono.fixes.pytorch.inductor_mix_order_cat_grad.fix import TARGET
from fixmono.fixes.pytorch.inductor_mix_order_cat_grad.transform import TRANSFORM

HERE = Path(__file__).resolve().parent
FIXTURE = (HERE / "fixtures" / "simd.py").read_text()


def test_validate_passes_the_fix_and_says_what_is_wrong_otherwise():
    fixed = TRANSFORM.rewrite(FIXTURE).source
    assert validate.check({TARGET: FIXTURE}, {TARGET: fixed}) is None
    assert "not written through it" in validate.check({TARGET: FIXTURE}, {TARGET: FIXTURE})
    # written through, but every buffer (its own ones too) by copy_: the name of a new buffer is never bound
    everything = fixed.replace("if written_through is not None and isinstance(", "if True or isinstance(")
    assert "no longer bound" in validate.check({TARGET: FIXTURE}, {TARGET: everything})
    assert "does not run" in validate.check({TARGET: FIXTURE}, {TARGET: fixed.replace("ws_name", "undefined_name")})


def test_the_double_emits_what_inductor_would():
    lines = validate.emitted(TRANSFORM.rewrite(FIXTURE).source)
    assert lines == ["allocate buf_view", "buf_view.copy_(ws[0 * 4 * 1024 : (0 + 1) * 4 * 1024].view(4, 1024).sum(dim=0))",
                     "buf_own = ws[1 * 4 * 1024 : (1 + 1) * 4 * 1024].view(4, 1024).sum(dim=0)"]


def test_hotfix_on_the_installed_torch():
    simd = pytest.importorskip("torch._inductor.codegen.simd")
    original = simd.SIMDScheduling.__dict__["_codegen_mix_order_reduction"]
    message = hotfix.enable()
    try:
        if message.startswith("this torch already"):
            pytest.skip(message)
        assert message.startswith("enabled"), message
        patched = simd.SIMDScheduling.__dict__["_codegen_mix_order_reduction"]
        assert patched is not original and "written_through" in patched.__code__.co_varnames
        assert hotfix.enable() == "already enabled"
    finally:
        hotfix.disable()
    assert simd.SIMDScheduling.__dict__["_codegen_mix_order_reduction"] is original
    assert hotfix.disable() == "not enabled; nothing to do"


def test_recorded_gpu_run_is_two_sided():
    run = json.loads((HERE / "results" / "h100_torch_2.11.json").read_text())
    assert run["verdict"] == "reproduced"
    assert max(run["details"]["unpatched_rel_error_per_chunk"]) > 0.5
    assert max(run["details"]["patched_rel_error_per_chunk"]) < 1e-4
