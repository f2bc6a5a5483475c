"""The reproducer two-sided on jax 0.8.1 (with its jaxlib, installed beside
this interpreter: tag network), the last minor release before the fix."""
from fixmono.testing import reproduce_on_release

REPRO = "fixmono.fixes.jax.vmap_dynamic_slice_grad.repro"


def test_reproduced_on_0_8_1_and_the_hot_fix_fixes_it():
    result = reproduce_on_release(REPRO, "jax", "0.8.1")
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert result["verdict"] == "reproduced" and before["jax"] == "0.8.1", result
    assert before["value"] == after["value"] == [3.0, 2.0, 1.0]  # the forward pass clamps the same way
    assert before["grad"] == [0.0, 1.0, 0.0] and after["grad"] == [1.0, 1.0, 1.0], result
    assert after["hotfix"].startswith("jax-vmap-dynamic-slice-grad: enabled: jax._src.lax.slicing."), after
