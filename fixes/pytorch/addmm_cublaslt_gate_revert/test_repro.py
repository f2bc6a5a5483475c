"""The benchmark's verdict logic on synthetic timings (the real run needs a
CUDA GPU: tag gpu/cuda on :repro), the kernel classifier, and the no-GPU answer."""
import pytest
import torch

from fixmono.model.fix import Verdict
from fixmono.fixes.pytorch.addmm_cublaslt_gate_revert import repro
from fixmono.fixes.pytorch.addmm_cublaslt_gate_revert.hotfix import classify_kernels


def run(mode, rows):
    return {"mode": mode, "torch": "x", "device": "GPU", "rows": rows}


def row(op, ms, path, m=16):
    return {"op": op, "dtype": "bfloat16", "m": m, "k": 4096, "n": 4096, "ms": ms, "path": path,
            "kernels": [path]}


def test_default_running_unfused_where_fused_wins_is_reproduced():
    runs = {"default": run("default", [row("linear", 1.3, "unfused"), row("linear", 2.0, "unfused", m=8192)]),
            "fused": run("fused", [row("linear", 1.0, "fused"), row("linear", 2.2, "fused", m=8192)]),
            "unfused": run("unfused", [row("linear", 1.3, "unfused"), row("linear", 2.0, "unfused", m=8192)])}
    a = repro.analyse(runs)
    result = repro.verdict(a, runs)
    assert result.verdict is Verdict.REPRODUCED
    assert [r["m"] for r in a["hurt"]] == [16]
    assert [r["m"] for r in a["epilogue_loses"]] == [8192]  # fused slower there: reported, not hidden
    assert [r["m"] for r in a["hotfix_slower"]] == [8192]


def test_default_path_is_judged_by_the_kernels_it_shares_with_a_forced_run():
    fp32_lt = ["sm80_xmma_gemm_f32", "cublasLt::epilogue::impl::globalKernel"]
    d, f = dict(row("linear", 1.0, "fused"), kernels=fp32_lt), dict(row("linear", 1.0, "fused"), kernels=fp32_lt)
    u = dict(row("linear", 1.5, "unfused"), kernels=["sm80_xmma_gemm_f32", "at::native::direct_copy"])
    assert repro.default_path(d, f, u) == "fused"
    assert repro.default_path(dict(d, kernels=u["kernels"]), f, u) == "unfused"


def test_default_fused_is_not_reproduced():
    rows = [row("linear", 1.0, "fused")]
    runs = {"default": run("default", rows), "fused": run("fused", rows),
            "unfused": run("unfused", [row("linear", 1.4, "unfused")])}
    result = repro.verdict(repro.analyse(runs), runs)
    assert result.verdict is Verdict.NOT_REPRODUCED and "1.40x" in result.summary


def test_one_trace_is_cut_into_each_call_s_kernels_at_the_markers():
    mark = "void at::cuda::(anonymous namespace)::spin_kernel(long)"
    names = ["gemm_bias", "gemm_bias", mark, "gemm_badd", "relu", mark, mark]
    assert repro.split_at_marks(names, 3) == [["gemm_bias"], ["gemm_badd", "relu"], []]
    with pytest.raises(RuntimeError):  # a call's markers missing: not guessed
        repro.split_at_marks(names[:-1], 3)
    with pytest.raises(RuntimeError):  # kernels after the last marker: not any call's
        repro.split_at_marks(names + ["stray"], 3)


@pytest.mark.parametrize("names,path", [
    (["nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_bias_TNT"], "fused"),
    (["nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_badd_TNT"], "unfused"),
    (["sm90_xmma_gemm_bf16bf16_bf16f32", "void at::native::vectorized_elementwise_kernel<4, relu>"], "unfused"),
    (["sm80_xmma_gemm_f32f32_f32f32_f32_tn_n", "void cublasLt::epilogue::impl::globalKernel<8, 32, float>"],
     "fused"),
    (["void at::native::reduce_kernel<512>"], "unknown"),
])
def test_kernel_classifier(names, path):
    assert classify_kernels(names) == path


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU answer")
def test_no_gpu_is_skipped():
    assert repro.reproduce().verdict is Verdict.SKIPPED
