"""The JAX fix on the installed JAX (0.10.2, in the affected range; its text
is read from site-packages at test time), on the CPU: the transformation,
the reproducer both ways, the hot-fix and the --validate check."""
import pytest

jax = pytest.importorskip("jax")

from fixmono.apply.contract import apply_change  # noqa: E402
from fixmono.model.outcome import Status
from fixmono.testing import only_insertions  # noqa: E402
from fixmono.fixes.jax.cudnn_gqa_kv_offsets import hotfix, offsets, repro  # noqa: E402
from fixmono.fixes.jax.cudnn_gqa_kv_offsets.fix import FIX, TARGET  # noqa: E402
from fixmono.fixes.jax.cudnn_gqa_kv_offsets.validate import check  # noqa: E402


def test_installed_jax_gets_exactly_two_lines_changed():
    source = offsets.installed_source()
    outcome = apply_change(FIX.changes[0], source)
    assert outcome.status is Status.APPLIED, outcome.detail
    old, new = source.splitlines(), outcome.new_text.splitlines()
    assert len(old) == len(new)
    changed = [(a.strip(), b.strip()) for a, b in zip(old, new) if a != b]
    assert changed == [("_, S, _, _ = key.shape", "_, S, K, _ = key.shape"),
                       ("kv_offsets = kv_offsets * N * H", "kv_offsets = kv_offsets * K * H")]


def test_reproducer_is_two_sided_on_the_cpu():
    result = repro.reproduce()
    assert result.verdict.value == "reproduced", result.summary
    assert not result.details["unpatched"]["kv_right"] and result.details["unpatched"]["q_right"]
    assert result.details["patched"]["kv_right"] and result.details["patched"]["q_right"]


def test_multi_head_attention_was_never_affected():
    case = offsets.run_case(offsets.module()._fix_seqlen_offsets, kv_heads=offsets.N)
    assert case["kv_right"] and case["q_right"]


def test_validate_passes_the_fix_and_rejects_the_unfixed_text():
    source = offsets.installed_source()
    fixed = apply_change(FIX.changes[0], source).new_text
    assert check({TARGET: source}, {TARGET: fixed}) is None
    assert "kv offsets" in check({TARGET: source}, {TARGET: source})


def test_hotfix_round_trip():
    module = offsets.module()
    original = module._fix_seqlen_offsets
    assert hotfix.enable().startswith("enabled")
    try:
        assert hotfix.enable() == "already enabled"
        assert offsets.run_case(module._fix_seqlen_offsets)["kv_right"]
    finally:
        assert hotfix.disable().startswith("disabled")
    assert module._fix_seqlen_offsets is original
    assert hotfix.disable().startswith("not enabled")
