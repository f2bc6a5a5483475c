"""The sentinel fix on the CPU, offline: our fixture shaped like the
affected releases (the bug two-sided through the real function's helpers),
the installed transformers 5.23.0 (has the fix: already-applied, not
reproduced), --validate and the hot-fix re-registering "batched_mm"."""
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from fixmono.apply.contract import apply_change  # noqa: E402
from fixmono.model.outcome import Status
from fixmono.runtime.define import module_source  # noqa: E402
from fixmono.fixes.transformers.moe_sentinel_router_grad import experts, hotfix, repro  # noqa: E402
from fixmono.fixes.transformers.moe_sentinel_router_grad.fix import FIX, TARGET  # noqa: E402
from fixmono.fixes.transformers.moe_sentinel_router_grad.validate import check  # noqa: E402

AFFECTED_SHAPE = (Path(__file__).parent / "fixtures" / "moe.py").read_text()


def test_affected_shape_leaks_gradient_and_the_patched_one_does_not():
    before = experts.run_case(experts.function_from(AFFECTED_SHAPE))
    after = experts.run_case(experts.fixed_function(AFFECTED_SHAPE))
    assert before["sentinel_grad_max"] > 0 and not before["right"]
    assert after["sentinel_grad_max"] == 0 and after["right"]
    assert after["routed_grad_min"] == before["routed_grad_min"]  # routed slots untouched


def test_installed_transformers_has_the_fix():
    outcome = apply_change(FIX.changes[0], module_source(experts.MODULE))
    assert outcome.status is Status.ALREADY_APPLIED, outcome.detail
    result = repro.reproduce()
    assert result.verdict.value == "not-reproduced", result.summary
    assert "--version 5.17.0" in result.summary


def test_validate_passes_the_fix_and_rejects_the_unfixed_text():
    fixed = apply_change(FIX.changes[0], AFFECTED_SHAPE).new_text
    assert check({TARGET: AFFECTED_SHAPE}, {TARGET: fixed}) is None
    assert "sentinel slots (must be 0)" in check({TARGET: AFFECTED_SHAPE}, {TARGET: AFFECTED_SHAPE})


def test_hotfix_reregisters_batched_mm_for_modules_built_before(monkeypatch):
    """On an affected transformers (the installed module's batched_mm swapped
    for the affected shape, a fault-injecting double): a module calling
    through the interface gets the fixed function after enable(), the
    affected one again after disable()."""
    moe = experts.module()
    affected = experts.function_from(AFFECTED_SHAPE)
    monkeypatch.setitem(moe.ExpertsInterface._global_mapping, "batched_mm", affected)
    monkeypatch.setattr(moe, "batched_mm_experts_forward", affected)
    monkeypatch.setattr("fixmono.runtime.define.module_source",
                        lambda module: AFFECTED_SHAPE if module is moe or module == experts.MODULE else "")

    def through_interface():
        return experts.run_case(moe.ALL_EXPERTS_FUNCTIONS.get_interface("batched_mm", None))

    assert not through_interface()["right"]
    assert hotfix.enable().startswith("enabled")
    try:
        assert hotfix.enable() == "already enabled"
        assert through_interface()["right"]
    finally:
        assert hotfix.disable().startswith("disabled")
    assert moe.ExpertsInterface._global_mapping["batched_mm"] is affected
    assert hotfix.disable().startswith("not enabled")


def test_hotfix_leaves_a_fixed_transformers_alone():
    moe = experts.module()
    before = moe.ExpertsInterface._global_mapping["batched_mm"]
    assert hotfix.enable().startswith("this transformers already")
    assert moe.ExpertsInterface._global_mapping["batched_mm"] is before
