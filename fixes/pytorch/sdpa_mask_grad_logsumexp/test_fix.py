"""The SDPA fix without a GPU: the transformation on our fixture shaped like
attention.cpp, the --validate truth table, and the hot-fix's routing with a
fault-injecting double of the memory-efficient kernel (the real kernel needs
CUDA: repro.py, results/h100_torch2.11.json)."""
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fixmono.apply.contract import apply_change  # noqa: E402
from fixmono.model.fix import ValidationNote  # noqa: E402
from fixmono.model.outcome import Status
from fixmono.fixes.pytorch.sdpa_mask_grad_logsumexp import hotfix, repro  # noqa: E402
from fixmono.fixes.pytorch.sdpa_mask_grad_logsumexp.fix import FIX, TARGET  # noqa: E402
from fixmono.fixes.pytorch.sdpa_mask_grad_logsumexp.validate import check  # noqa: E402

FIXTURE = (Path(__file__).parent / "fixtures" / "attention.cpp").read_text()


def test_only_the_efficient_case_changes():
    outcome = apply_change(FIX.changes[0], FIXTURE)
    assert outcome.status is Status.APPLIED, outcome.detail
    old, new = FIXTURE.splitlines(), outcome.new_text.splitlines()
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    assert len(old) == len(new) and len(changed) == 1
    assert "efficient_attention" in old[changed[0] - 1]  # not the cudnn case's identical line
    assert new[changed[0]].endswith("attn_mask_.has_value() && attn_mask_->requires_grad());")


def test_validate_passes_the_fix_and_rejects_the_unfixed_text():
    fixed = apply_change(FIX.changes[0], FIXTURE).new_text
    passed = check({TARGET: FIXTURE}, {TARGET: fixed})  # a note: the compile check's result, or why it did not run
    assert isinstance(passed, ValidationNote) and ("compiles with torch" in passed or "not run" in passed), passed
    assert "qkv_grad=False mask_grad=True" in check({TARGET: FIXTURE}, {TARGET: FIXTURE})
    no_grad_mode = fixed.replace("at::GradMode::is_enabled() && attn_mask_", "attn_mask_")
    assert "grad_mode=False" in check({TARGET: FIXTURE}, {TARGET: no_grad_mode})  # LSE under no_grad: wrong too


class MemEfficientWithoutLogsumexpDouble:
    """Fault-injecting double of F.scaled_dot_product_attention on a GPU
    without the fix: while the memory-efficient backend is allowed and only
    the mask requires grad, the backward fails as the real kernel does."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __call__(self, q, k, v, attn_mask=None, *args, **kwargs):
        efficient = torch.backends.cuda.mem_efficient_sdp_enabled()
        self.calls.append(efficient)
        out = self.real(q, k, v, attn_mask, *args, **kwargs)
        if efficient and attn_mask is not None and attn_mask.requires_grad and not q.requires_grad:
            return _FailingBackward.apply(out)
        return out


class _FailingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("LSE is not correctly aligned (strideH)")


def test_hotfix_routes_only_the_broken_shape_to_math(monkeypatch):
    import torch.nn.functional as F

    double = MemEfficientWithoutLogsumexpDouble(F.scaled_dot_product_attention)
    monkeypatch.setattr(F, "scaled_dot_product_attention", double)
    monkeypatch.setattr(hotfix, "GPU_DEVICES", ("cpu",))  # the double stands in for the GPU kernel
    q, k, v, mask = (t.cpu() for t in repro.inputs("cpu"))
    m = mask.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="LSE is not correctly aligned"):
        F.scaled_dot_product_attention(q, k, v, m).sum().backward()
    assert hotfix.enable().startswith("enabled")
    try:
        m = mask.clone().requires_grad_()
        F.scaled_dot_product_attention(q, k, v, m).sum().backward()
        assert (m.grad.double() - repro.reference_grad(q, k, v, mask)).abs().max() < 1e-5
        assert double.calls[-1] is False  # ran with the memory-efficient backend off
        F.scaled_dot_product_attention(q.requires_grad_(), k, v, mask.clone().requires_grad_())
        assert double.calls[-1] is True  # q requires grad: untouched
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, mask.clone().requires_grad_())
        assert double.calls[-1] is True  # no grad mode: untouched
    finally:
        assert hotfix.disable().startswith("disabled")
    assert F.scaled_dot_product_attention is double


def test_reproducer_skips_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("has CUDA: the reproducer runs for real (tag gpu)")
    result = repro.reproduce()
    assert result.verdict.value == "skipped" and "CUDA" in result.summary
