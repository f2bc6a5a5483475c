"""The reproducer two-sided on jax 0.8.1 (with its jaxlib, installed beside
this interpreter: tag network), the last release before the fix."""
from fixmono.testing import reproduce_on_release

REPRO = "fixmono.fixes.jax.local_window_ignored.repro"


def test_reproduced_on_0_8_1_and_the_hot_fix_fixes_it():
    result = reproduce_on_release(REPRO, "jax", "0.8.1")
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert result["verdict"] == "reproduced" and before["jax"] == "0.8.1", result
    assert before["vs_full"] < 1e-6 < 0.1 < before["vs_band"], before  # the window ignored: full attention
    assert after["vs_band"] < 1e-5 < 0.1 < after["vs_full"], after
