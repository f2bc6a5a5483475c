"""PyTorch: revert the gating of addmm's cuBLASLt bias epilogue on the preferred BLAS backend (#172340).

Declaration only: the tree transformation is in transform.py (used when the
checkout's history lacks #172340; otherwise make_patch reverts the commit
through git), the runtime preference in hotfix.py, the GPU benchmark in repro.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, UpstreamCommit, lazy

from . import hotfix
from .transform import TRANSFORM

TARGET = "aten/src/ATen/native/cuda/Blas.cpp"

_HEAD = '''Tensor& addmm_out_cuda_impl(Tensor& result, const Tensor& self, bool disable_addmm_cuda_lt_override) {
  static bool persistent_disable_addmm_cuda_lt = isGloballyDisabledAddmmCudaLt(self.device());
  bool disable_addmm_cuda_lt = persistent_disable_addmm_cuda_lt || disable_addmm_cuda_lt_override;
'''
_GATE = '''  // NOTE: See https://github.com/pytorch/pytorch/issues/172231
  const auto preferred_cublas_backend = at::globalContext().blasPreferredBackend();
  disable_addmm_cuda_lt = !(preferred_cublas_backend == BlasBackend::Cublaslt ||
                            preferred_cublas_backend == BlasBackend::Default) || disable_addmm_cuda_lt;
'''
_TAIL = '''#ifdef USE_ROCM
  disable_addmm_cuda_lt = disable_addmm_cuda_lt || isGloballyDisabledAddmmCudaLt(self.device());
#endif
  disable_addmm_cuda_lt = disable_addmm_cuda_lt || !isInputCompliesAddmmCudaLt(result, self);
  return run(result, disable_addmm_cuda_lt);
}
'''

CASES = (
    Case("gate removed, env-var and eligibility logic kept", before=_HEAD + _GATE + _TAIL, after=_HEAD + _TAIL),
    Case("gate written inline, without the variable", before=_HEAD + _GATE.replace(
        "preferred_cublas_backend ==", "at::globalContext().blasPreferredBackend() ==").replace(
        "  const auto preferred_cublas_backend = at::globalContext().blasPreferredBackend();\n", "") + _TAIL,
         after=_HEAD + _TAIL),
    Case("a blank line between the NOTE comment and the gate", before=_HEAD + _GATE.replace(
        "172231\n", "172231\n\n") + _TAIL, after=_HEAD + _TAIL),
    Case("no gate: already reverted (or never had it)", before=_HEAD + _TAIL, expect="already-applied"),
    Case("no addmm_out_cuda_impl", before="Tensor& mm_out_cuda(Tensor& r) { return r; }\n", expect="not-applicable"),
    Case("the preferred backend drives something else: not this gate", expect="failed",
         before=_HEAD + "  const auto backend = at::globalContext().blasPreferredBackend();\n"
                        "  select_kernel(backend);\n" + _TAIL),
    Case("eligibility check gone: the decision changed shape", expect="failed",
         before=_HEAD + _GATE + _TAIL.replace(" || !isInputCompliesAddmmCudaLt(result, self)", "")),
)

FIX = Fix(
    id="pytorch-revert-addmm-cublaslt-gate",
    title="Revert \"make addmm aware of cublas backend selection\" (#172340)",
    upstream="pytorch",
    description="""\
#172340 made addmm_out_cuda_impl disable the cuBLASLt path unless the
preferred BLAS backend is cuBLASLt or Default. On CUDA the default preference
resolves to cuBLAS, so every F.linear/addmm with a 1-D bias lost the fused
cuBLASLt bias (and relu/gelu) epilogue: the bias became an expand+copy into
the output and a beta=1 GEMM, plus a separate activation kernel. Upstream
reverted it on trunk (#179151) and release/2.12 (#181364) after a slowdown;
#170571 is the intended long-term change.

Remove the preferred-backend gate; DISABLE_ADDMM_CUDA_LT and the eligibility
check (isInputCompliesAddmmCudaLt) still decide the Lt path.""",
    dep3=Dep3(
        origin="upstream, https://github.com/pytorch/pytorch/pull/179151",
        bug="https://github.com/pytorch/pytorch/issues/172231",
        forwarded="not-needed",
        applied_upstream="https://github.com/pytorch/pytorch/pull/181364",
        last_update="2026-11-22",
    ),
    backends=("cuda",),
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/Blas.cpp", mutate=("addmm_out_cuda_impl",), edit="replace")),),
    references=("https://github.com/pytorch/pytorch/pull/172340", "https://github.com/pytorch/pytorch/pull/179151",
                "https://github.com/pytorch/pytorch/pull/181364", "https://github.com/pytorch/pytorch/pull/170571"),
    reverts=UpstreamCommit(pull_request="https://github.com/pytorch/pytorch/pull/172340",
                           subject="make addmm aware of cublas backend selection", absent="no cuBLASLt gate here"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="torch"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cuda",
    repro_alone=True,  # it times cuBLAS/cuBLASLt kernels: other reproducers on the machine would disturb them
    validate=lazy(f"{__package__}.validate:check"),
)
