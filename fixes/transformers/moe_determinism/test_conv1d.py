"""The deterministic causal conv1d and its installation in both call styles."""
import torch
import torch.nn.functional as F

from fixmono.fixes.transformers.moe_determinism import conv1d
from fixmono.fixes.transformers.moe_determinism.models import batch, tiny_model


def test_matches_the_reference_conv():
    x = torch.randn(2, 6, 11, dtype=torch.float64)
    w, b = torch.randn(6, 4, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    ref = F.conv1d(x, w.unsqueeze(1), b, padding=3, groups=6)[:, :, :11]
    assert torch.allclose(conv1d.shifted_causal_conv1d(x, w, b), ref)
    assert torch.allclose(conv1d.shifted_causal_conv1d(x, w.unsqueeze(1), b, "silu"), F.silu(ref))


def test_module_function_is_replaced_used_and_restored(monkeypatch):
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as module

    original = module.causal_conv1d_fn
    calls = []
    spy = lambda *a, **k: calls.append(1) or conv1d.shifted_causal_conv1d(*a[:2], **{
        key: v for key, v in k.items() if key in ("bias", "activation")})
    monkeypatch.setattr(conv1d, "deterministic_causal_conv1d", spy)
    model = tiny_model("qwen3_5_moe")
    assert "modeling_qwen3_5_moe" in conv1d.enable(model)
    try:
        model(**batch()).loss.backward()
        assert calls, "the GatedDeltaNet layers did not call the replacement"
    finally:
        conv1d.disable()
    assert module.causal_conv1d_fn is original


def test_layer_attribute_style_of_older_transformers():
    class Layer(torch.nn.Module):
        causal_conv1d_fn = None  # what 5.2-5.5 set when no kernel is installed

    model = torch.nn.Sequential(Layer(), Layer())
    assert "2 layer attribute(s) replaced" in conv1d.enable(model)
    conv1d.disable()
    assert all(m.causal_conv1d_fn is conv1d.deterministic_causal_conv1d for m in model)
