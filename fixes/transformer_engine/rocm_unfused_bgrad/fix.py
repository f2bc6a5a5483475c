"""TransformerEngine on ROCm: biased wgrad with fp32 output, bias grad computed outside hipBLASLt.

Declaration only: transformation in transform.py, runtime form in hotfix.py,
CPU doubles in double.py, reproducer in repro.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .transform import TRANSFORM

TARGET = "transformer_engine/pytorch/cpp_extensions/gemm.py"

# Inline cases: our own minimal functions shaped like general_gemm.
_HEAD = '''{imports}
def general_gemm(A, B, out_dtype=None, gelu=False, layout="NT", out=None, bias=None, grad=False, ub=None):
    workspace = make_workspace()
    args = (A, True, B, False, out, None, out_dtype, bias, None, gelu, None, grad, workspace, 8, False, False)
    kwargs = {{"comm_overlap": ub}}
'''
_CALL = '''    out, bias_grad, gelu_input, extra_output = tex.generic_gemm(*args, **kwargs)
'''
_RETURN = '''    return out, bias_grad, gelu_input, extra_output
'''
_INSERT = '''
    # ROCm: hipBLASLt has no algorithm for the fused bias-gradient epilogue (BGRADB)
    # with fp32 output ("Unable to find any suitable algorithms"). Run the GEMM
    # without it and compute the bias gradient separately (ROCm/TransformerEngine#634).
    rocm_unfused_bgrad = (
        {is_hip}
        and grad
        and bias is not None
        and not gelu
        and ub is None
        and type(B) is torch.Tensor
        and (out.dtype if out is not None else out_dtype) == torch.float32
    )
    if rocm_unfused_bgrad:
        args = args[:7] + (None,) + args[8:]  # no fused bias grad
'''
_BIAS_GRAD = '''
    if rocm_unfused_bgrad:
        # grad_output summed over tokens in fp32, the dtype the fused epilogue returns
        bias_grad = B.reshape(-1, B.shape[-1]).sum(dim=0, dtype=torch.float32)
'''
_NV = "import torch\n"
_ROCM = "import torch\nfrom torch.utils.cpp_extension import IS_HIP_EXTENSION\n"


def _before(imports=_NV):
    return _HEAD.format(imports=imports) + _CALL + _RETURN


def _after(imports=_NV, is_hip="torch.version.hip is not None"):
    return _HEAD.format(imports=imports) + _INSERT.format(is_hip=is_hip) + _CALL + _BIAS_GRAD + _RETURN


CASES = (
    Case("NVIDIA-shaped file: ROCm detected through torch.version.hip", before=_before(), after=_after()),
    Case("ROCm fork: IS_HIP_EXTENSION is imported, so it is used", before=_before(_ROCM),
         after=_after(_ROCM, "IS_HIP_EXTENSION")),
    Case("our patch already there", before=_after(), expect="already-applied"),
    Case("an upstream-style fix that sums grad_output itself", expect="already-applied",
         before=_before().replace(_RETURN, "    if IS_HIP_EXTENSION and grad and bias is not None:\n"
                                           "        bias_grad = B.float().sum(0)\n" + _RETURN)),
    Case("TE 1.x: no general_gemm", expect="not-applicable",
         before="def fp8_gemm(A, B, workspace, bias=None):\n    return tex.te_gemm(A, B, workspace, bias)\n"),
    Case("args reordered: bias no longer at index 7", expect="failed",
         before=_before().replace("out_dtype, bias, None, gelu", "bias, out_dtype, None, gelu")),
    Case("general_gemm no longer ends in the 4-tuple return", expect="failed",
         before=_before().replace(_RETURN, "    return out\n")),
    Case("two args tuples", expect="failed",
         before=_before().replace(_CALL, _CALL + "    args = (A, B)\n")),
)



FIX = Fix(
    id="te-rocm-unfused-bias-grad-fp32-wgrad",
    title="[ROCm] general_gemm: compute the bias grad outside hipBLASLt for fp32-output wgrad",
    upstream="transformer-engine",
    description="""\
On ROCm, hipBLASLt has no algorithm for a bf16 x bf16 -> fp32 weight-gradient
GEMM with the fused bias-gradient (BGRADB) epilogue, so training a biased
layer (e.g. Qwen2.5 QKV bias, Megatron --add-qkv-bias) with fp32 gradient
accumulation fails with "RuntimeError: Unable to find any suitable
algorithms".

In general_gemm, when running on ROCm with a bias grad requested, no gelu
(DGELU+BGRAD reduces dgelu(.), not grad_output), no userbuffers, and fp32
output, run the GEMM without the fused bias grad and compute it as
grad_output summed over tokens in fp32, the dtype the fused path returns.
Delayed-wgrad callers go through general_gemm and get the same result, so
the delay_wgrad_compute tests compare equal bitwise. CUDA is unchanged.""",
    dep3=Dep3(
        origin="other, reimplements https://github.com/ROCm/TransformerEngine/pull/634 (open)",
        bug="https://github.com/ROCm/TransformerEngine/pull/634",
        forwarded="no",
        last_update="2026-11-22",
    ),
    backends=("rocm",),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/gemm_rocm.py", mutate=("general_gemm",), edit="insert")),),
    references=("https://github.com/ROCm/TransformerEngine/pull/634",),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="transformer_engine.pytorch"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="rocm",
    validate=lazy(f"{__package__}.validate:check"),
)
