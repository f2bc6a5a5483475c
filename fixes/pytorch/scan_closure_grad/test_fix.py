"""Offline: --validate on our fixture (the fix passes; the unfixed text and one
that never restores requires_grad fail with the reason), the hot-fix on the
installed torch (2.13.0 in .venv: already fixed), and the recorded two-sided
run on torch 2.12.0."""
import json
from pathlib import Path

import pytest

from fixmono.fixes.pytorch.scan_closure_grad import hotfix, validate
from fixmono.fixes.pytorch.scan_closure_grad.fix import TARGET
from fixmono.fixes.pytorch.scan_closure_grad.transform import TRANSFORM

HERE = Path(__file__).resolve().parent
FIXTURE = (HERE / "fixtures" / "scan.py").read_text()


def test_validate_passes_the_fix_and_says_what_is_wrong_otherwise():
    pytest.importorskip("torch")
    fixed = TRANSFORM.rewrite(FIXTURE).source
    assert validate.check({TARGET: FIXTURE}, {TARGET: fixed}) is None
    assert "at trace time" in validate.check({TARGET: FIXTURE}, {TARGET: FIXTURE})
    never_restored = fixed.replace("t.requires_grad_(False)", "pass")
    assert "expected restored" in validate.check({TARGET: FIXTURE}, {TARGET: never_restored})


def test_hotfix_on_the_installed_torch():
    pytest.importorskip("torch._higher_order_ops.scan")
    message = hotfix.enable()
    try:
        assert message == "this torch already traces scan with init requiring grad; nothing to do", message
    finally:
        hotfix.disable()
    assert hotfix.disable() == "not enabled; nothing to do"


def test_recorded_run_on_torch_2_12_is_two_sided():
    run = json.loads((HERE / "results" / "torch_2.12.0_cpu.json").read_text())
    assert run["verdict"] == "reproduced" and run["details"]["release"].startswith("torch 2.12.0")
    assert run["details"]["unpatched_rel_error"] > 0.1 and run["details"]["patched_rel_error"] < 1e-5
