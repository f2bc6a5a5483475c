"""The CPU reproducer: drift breaks (eager) or silently changes (grouped_mm)
routing for Qwen3.5-MoE, Mixtral and DeepSeek-V3; the pin fixes it bitwise."""
from fixmono.model.fix import Verdict
from fixmono.fixes.transformers.moe_determinism import repro


def test_every_family_and_experts_implementation():
    result = repro.reproduce()
    rows = result.details["rows"]
    assert {(r["family"], r["experts"]) for r in rows} == {
        (f, e) for f in ("qwen3_5_moe", "mixtral", "deepseek_v3") for e in ("eager", "grouped_mm")}
    for r in rows:
        if r["experts"] == "eager":
            assert r["drift_error"].startswith("torch.utils.checkpoint:")  # CheckpointError's message
        else:
            assert r["drift_error"] is None and r["drift_changed_calls"] > 0  # silent: only the recorder sees it
        assert r["pinned_grads_equal"] and r["grads_compared"] > 10
    assert result.verdict is Verdict.REPRODUCED and "fault-injecting double" in result.summary
