"""The hot-fix's answers where it cannot act (no CUDA here)."""
import pytest
import torch

from fixmono.fixes.pytorch.addmm_cublaslt_gate_revert.fix import FIX


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU answer")
def test_no_cuda_does_nothing_and_says_so():
    assert "no CUDA device" in FIX.hotfix.apply()
    assert "was not enabled" in FIX.hotfix.remove()
