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


def test_a_family_this_transformers_lacks_is_named_and_the_others_run(monkeypatch):
    """transformers 5.0.0 and 5.1.0 have no Qwen3_5MoeTextConfig: the run was a crash (exit 1, read as
    cannot-run-here by drift --run); the other families still show the mechanism."""
    real = repro.config

    def older(family):
        if family == "qwen3_5_moe":
            raise ImportError("cannot import name 'Qwen3_5MoeTextConfig' from 'transformers' (/x/__init__.py)")
        return real(family)

    monkeypatch.setattr(repro, "config", older)
    result = repro.reproduce(("qwen3_5_moe", "mixtral"))
    assert result.verdict is Verdict.REPRODUCED
    assert {r["family"] for r in result.details["rows"]} == {"mixtral"}
    assert result.details["families_absent"] == {"qwen3_5_moe": "Qwen3_5MoeTextConfig"}
    assert "qwen3_5_moe (no Qwen3_5MoeTextConfig)" in result.summary
    only_absent = repro.reproduce(("qwen3_5_moe",))
    assert only_absent.verdict is Verdict.SKIPPED and "Qwen3_5MoeTextConfig" in only_absent.summary
