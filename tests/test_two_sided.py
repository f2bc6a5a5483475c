"""fixmono.runtime.repro.two_sided, the verdict of the usual two-sided reproducer, on each kind of pair of
sides. The sides come from a double standing in for measured_apart (the real one runs in a fresh interpreter:
tests/test_import.py runs it end to end on an imported fix)."""
import pytest

from fixmono.model.fix import Verdict
from fixmono.runtime import repro


def wrong(side):
    return f"loss {side['loss']} is NaN" if side["loss"] != side["loss"] else ""


NAN = float("nan")


@pytest.mark.parametrize("before, after, verdict, summary, fixed", [
    ({"loss": NAN}, {"loss": 1.0}, Verdict.REPRODUCED, "loss nan is NaN; nothing wrong with the hot-fix", True),
    ({"loss": NAN}, {"loss": NAN}, Verdict.REPRODUCED, "loss nan is NaN; with the hot-fix still: loss nan is NaN "
                                                       "(fix-x: swapped)", False),
    ({"loss": 1.0}, {"loss": 1.0}, Verdict.NOT_REPRODUCED, "nothing wrong without the fix: loss 1.0", True),
])
def test_the_verdict_follows_what_is_wrong_on_each_side(monkeypatch, before, after, verdict, summary, fixed):
    def measured_apart_double(module, fix_id=None):
        return {"hotfix": "fix-x: swapped", **after} if fix_id else {"hotfix": None, **before}
    monkeypatch.setattr(repro, "measured_apart", measured_apart_double)
    result = repro.two_sided("m.repro", "fix-x", wrong, needs="torch (CPU)")
    assert (result.verdict, result.summary, result.details["fixed"]) == (verdict, summary, fixed)
    assert result.details["unpatched"]["loss"] is before["loss"] and result.details["patched"]["loss"] is after["loss"]


def test_a_side_that_cannot_be_measured_is_skipped_with_what_it_needs(monkeypatch):
    def measured_apart_double(module, fix_id=None):
        raise repro.MeasureFailed("ModuleNotFoundError: No module named 'torch'")
    monkeypatch.setattr(repro, "measured_apart", measured_apart_double)
    result = repro.two_sided("m.repro", "fix-x", wrong, needs="torch (CPU)")
    assert result.verdict is Verdict.SKIPPED
    assert result.summary == "needs torch (CPU): ModuleNotFoundError: No module named 'torch'"
