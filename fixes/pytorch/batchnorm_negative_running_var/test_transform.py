"""The transformation against a whole file shaped like test/test_jit_fuser_te.py
(our fixture), and against variants of it."""
import difflib
from pathlib import Path

import libcst as cst
import pytest

from fixmono.apply.contract import apply_change
from fixmono.model.outcome import Status
from fixmono.fixes.pytorch.batchnorm_negative_running_var.fix import FIX

FIXTURE = (Path(__file__).parent / "fixtures" / "test_jit_fuser_te.py").read_text()
CHANGE = FIX.changes[0]


def changed_lines(before: str, after: str) -> list[str]:
    return [l for l in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if l[:1] in "+-" and not l.startswith(("+++", "---"))]


def test_fixture_is_patched_with_one_data_change():
    out = apply_change(CHANGE, FIXTURE)
    assert out.status is Status.APPLIED, out.detail
    assert changed_lines(FIXTURE, out.new_text) == [
        "-            x = torch.randn(16, device=device)",
        "+            # running_var must be >= 0: where var + eps < 0 eager gives NaN, fused kernels may not (#177665)",
        "+            x = torch.randn(16, device=device).abs()",
    ]
    cst.parse_module(out.new_text)  # parses


def test_everything_else_is_byte_identical():
    out = apply_change(CHANGE, FIXTURE)
    fixed_line = "            x = torch.randn(16, device=device).abs()\n"
    restored = out.new_text.replace(fixed_line, "            x = torch.randn(16, device=device)\n")
    restored = "".join(l for l in restored.splitlines(keepends=True) if "(#177665)" not in l)
    assert restored == FIXTURE


def test_second_run_reports_already_applied():
    once = apply_change(CHANGE, FIXTURE).new_text
    again = apply_change(CHANGE, once)
    assert again.status is Status.ALREADY_APPLIED and again.new_text is None


@pytest.mark.parametrize("variant", [
    ("1e-4", "0.0001"),  # a reformatted literal
    ("x = torch.randn(16, device=device)", "x = torch.randn(\n                16, device=device\n            )"),
    ("def bn_full(i, x):", "def bn_full(i, x):  # comment on the def"),
    ("\r\n", "\r\n"),
])
def test_tolerates_formatting(variant):
    old, new = variant
    source = FIXTURE.replace(old, new)
    if variant[0] == "\r\n":
        source = FIXTURE.replace("\n", "\r\n")  # CRLF file
    out = apply_change(CHANGE, source)
    assert out.status is Status.APPLIED, out.detail
    assert ".abs()" in out.new_text
    assert len(changed_lines(source, out.new_text)) in (3, 5)


def test_crlf_line_endings_are_kept():
    source = FIXTURE.replace("\n", "\r\n")
    out = apply_change(CHANGE, source)
    assert "\n" not in out.new_text.replace("\r\n", "")


def test_renamed_test_is_not_applicable():
    out = apply_change(CHANGE, FIXTURE.replace("def test_batch_norm", "def test_batchnorm_eval"))
    assert out.status is Status.NOT_APPLICABLE
    assert "test_batch_norm" in out.detail


def test_syntax_error_fails_with_line():
    out = apply_change(CHANGE, FIXTURE.replace("def test_add_mul(self):", "def test_add_mul(self)"))
    assert out.status is Status.FAILED and "line" in out.detail
