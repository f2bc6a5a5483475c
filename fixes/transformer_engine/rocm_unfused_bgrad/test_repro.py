"""The reproducer here: skipped (needs TE on ROCm), with the double-based check."""
from fixmono.model.fix import Verdict
from fixmono.fixes.transformer_engine.rocm_unfused_bgrad import repro


def test_skipped_with_reason_and_double_check(capsys):
    result = repro.reproduce()
    assert result.verdict is Verdict.SKIPPED
    assert "ROCm" in result.needs
    assert result.details["double_problems"] == []
    assert "unpatched fails with 'Unable to find any suitable algorithms'" in result.summary
    assert repro.main([]) == 77
    assert capsys.readouterr().out.startswith("skipped:")
