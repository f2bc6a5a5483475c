"""The bias-grad reductions and the benchmark's CPU behaviour."""
import pytest
import torch

from fixmono.fixes.transformer_engine.rocm_unfused_bgrad import bench
from fixmono.fixes.transformer_engine.rocm_unfused_bgrad.reduce import column_sum, torch_column_sum


def test_column_sum_is_the_fp32_sum_on_cpu():
    dy = torch.randn(3, 50, 24).bfloat16()  # leading dims are tokens too
    assert torch.equal(column_sum(dy), dy.reshape(-1, 24).sum(dim=0, dtype=torch.float32))
    assert column_sum(dy).dtype == torch.float32


@pytest.mark.parametrize("tokens", [256, 1000, 7])  # whole blocks, a remainder, fewer than a block
def test_two_stage_matches_the_sum(tokens):
    dy = torch.randn(tokens, 33).bfloat16()
    assert torch.allclose(bench.two_stage(dy), torch_column_sum(dy), rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU answer")
def test_benchmark_says_it_needs_a_gpu(capsys):
    assert bench.main([]) == 77
    assert "needs a GPU" in capsys.readouterr().out
