"""The runtime hot-fix around the extension's generic_gemm, with the double as
the extension and the fixture's general_gemm calling it."""
import types
from pathlib import Path

import pytest
import torch

from fixmono.fixes.transformer_engine.rocm_unfused_bgrad import hotfix
from fixmono.fixes.transformer_engine.rocm_unfused_bgrad.double import (
    HipblasltGemmDouble, WgradCase, load_general_gemm, wgrad_call)
from fixmono.fixes.transformer_engine.rocm_unfused_bgrad.fix import FIX

FIXTURE = (Path(__file__).parent / "fixtures" / "gemm_rocm.py").read_text()


def fake_extension(rocm: bool):
    """A module object like transformer_engine_torch, backed by the double."""
    double = HipblasltGemmDouble(rocm)
    module = types.ModuleType("transformer_engine_torch")
    module.generic_gemm = double.generic_gemm
    module.CommOverlap, module.CommOverlapP2P = double.CommOverlap, double.CommOverlapP2P
    module.CommOverlapType = double.CommOverlapType
    return module, double


def test_unchanged_te_fails_and_hotfix_makes_it_work():
    tex, double = fake_extension(rocm=True)
    general_gemm, _ = load_general_gemm(FIXTURE, rocm=True, tex=tex)  # unpatched source
    x, dy, bias, main_grad = WgradCase().tensors()
    with pytest.raises(RuntimeError, match="Unable to find any suitable algorithms"):
        wgrad_call(general_gemm, x, dy, bias, main_grad.clone())
    assert "enabled" in hotfix.enable(tex=tex, rocm=True)
    try:
        grad = main_grad.clone()
        wgrad, bgrad, _, _ = wgrad_call(general_gemm, x, dy, bias, grad)
        assert torch.equal(bgrad, dy.sum(dim=0, dtype=torch.float32))
        assert torch.allclose(wgrad, main_grad + dy.float().t() @ x.float(), rtol=1e-5, atol=1e-4)
        assert double.calls[-1]["bias"] is None  # the GEMM ran without the fused bias grad
    finally:
        assert "disabled" in hotfix.disable(tex=tex)
    with pytest.raises(RuntimeError):
        wgrad_call(general_gemm, x, dy, bias, main_grad.clone())  # removed again


def test_other_gemms_pass_through_untouched():
    tex, double = fake_extension(rocm=True)
    general_gemm, _ = load_general_gemm(FIXTURE, rocm=True, tex=tex)
    x, dy, bias, main_grad = WgradCase().tensors()
    hotfix.enable(tex=tex, rocm=True)
    try:
        general_gemm(x[:8], x, out_dtype=torch.bfloat16, layout="TN", bias=bias[:8])  # forward + bias
        general_gemm(x, dy, out_dtype=torch.bfloat16, layout="NT", grad=True, bias=bias)  # bf16 wgrad
    finally:
        hotfix.disable(tex=tex)
    assert [c["bias"] is not None for c in double.calls] == [True, True]


def test_idempotent_and_platform_messages():
    tex, _ = fake_extension(rocm=True)
    assert "enabled" in hotfix.enable(tex=tex, rocm=True)
    assert "already enabled" in hotfix.enable(tex=tex, rocm=True)
    assert "disabled" in hotfix.disable(tex=tex)
    assert "was not enabled" in hotfix.disable(tex=tex)
    assert "not a ROCm build" in hotfix.enable(tex=tex, rocm=False)


def test_without_te_installed_it_says_so():
    try:
        import transformer_engine_torch  # noqa: F401
        pytest.skip("TransformerEngine is installed here")
    except ImportError:
        pass
    assert "not installed" in FIX.hotfix.apply()
    assert "not installed" in FIX.hotfix.remove()
