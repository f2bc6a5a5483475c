"""The reproducer two-sided on jax 0.8.1 (with its jaxlib, installed beside
this interpreter: tag network), the last release before the fix."""
from fixmono.testing import reproduce_on_release

REPRO = "fixmono.fixes.jax.standardize_nan.repro"


def test_reproduced_on_0_8_1_and_the_hot_fix_fixes_it():
    result = reproduce_on_release(REPRO, "jax", "0.8.1")
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert result["verdict"] == "reproduced" and before["jax"] == "0.8.1", result
    assert before["negative_variances"] > 0 and before["nan"] > 0 and after["nan"] == 0, result
