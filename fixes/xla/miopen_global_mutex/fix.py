"""XLA on ROCm: serialise MIOpen compilation across GPUs with a process-wide mutex (ROCm/xla#777).

Declaration only: the C++ transformations are in transform.py, the JAX
reproducer in repro.py and the warm-up mitigation in mitigation.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, lazy

from .transform import AUTOTUNER, ROCM_DNN

ROCM_DNN_CC = "xla/stream_executor/rocm/rocm_dnn.cc"
AUTOTUNER_CC = "xla/backends/gpu/autotuner/miopen.cc"

# Inline cases: small C++ of our own, shaped like the real functions.
_ACCESS = "class MIOpenAccess {\n absl::Mutex mutex_;\n};\n"
_FUNCS = '''
absl::Status MIOpenSupport::PopulateMIOpenFindDb(Stream* stream, ScratchAllocator* alloc) {
  auto miopen = miopen_->GetHandle(parent_, stream);
  auto allocated = alloc->AllocateBytes(size);
  if (!allocated.ok()) {
    LOG(FATAL) << "Failed to allocate scratch memory - " << allocated.status().message();
    return absl::InternalError("Out of memory");
  }
  return ToStatus(miopenFindConvolutionForwardAlgorithm(miopen.handle()));
}
absl::Status MIOpenSupport::GetMIOpenConvolveAlgorithmsImmediateMode(Stream* stream) {
  auto miopen = miopen_->GetHandle(parent_, stream);
  return ToStatus(miopenConvolutionForwardGetSolution(miopen.handle()));
}
absl::Status MIOpenSupport::ConvolveRunnerFromDesc(Stream* stream) {
  auto miopen = miopen_->GetHandle(parent_, stream);
  return ToStatus(miopenConvolutionForwardCompileSolution(miopen.handle()));
}
absl::Status RocmFusedConvRunner::Create(Stream* stream) {
  auto miopen = miopen_->GetHandle(parent, stream);
  return ScopedFusionPlanConvolutionBiasActivation::Create(miopen.handle());
}
'''
_LOCK = "  absl::MutexLock global_lock(&miopen_global_mutex);\n"
_DECL = (
    "\n\n// Serialises MIOpen's Find, GetSolution, CompileSolution and CompileFusionPlan\n"
    "// across all GPUs of the process. MIOpenAccess only locks per device handle,\n"
    "// and MIOpen's kernel cache is not safe when devices compile concurrently\n"
    "// (segfault in miopen::kernels() with 8 GPUs, ROCm/xla#777).\n"
    "ABSL_CONST_INIT static absl::Mutex miopen_global_mutex(absl::kConstInit);")
_FIXED_FUNCS = (_FUNCS.replace("  auto miopen = miopen_->GetHandle(", _LOCK + "  auto miopen = miopen_->GetHandle(")
                .replace('''    LOG(FATAL) << "Failed to allocate scratch memory - " << allocated.status().message();
    return absl::InternalError("Out of memory");''', '''    return absl::ResourceExhaustedError(absl::StrCat(
        "Failed to allocate scratch memory for MIOpen autotuning (",
        size, " bytes): ", allocated.status().message()));'''))
_AUTOTUNE = '''#include "absl/log/check.h"
absl::StatusOr<Configs> MIOpenBackend::GetSupportedConfigs(const HloInstruction& instr) {
  if (IsFused(instr)) {
    return GetFusedConvolutionCustomCallConfigs(&instr);
  }
  if (do_not_autotune_) {
    return Defaults(instr);
  }
  return GetConvolutionCustomCallConfigs(&instr);
}
'''
_AUTOTUNE_FIXED = '''#include "absl/log/check.h"
#include "absl/log/log.h"
absl::StatusOr<Configs> MIOpenBackend::GetSupportedConfigs(const HloInstruction& instr) {
  if (do_not_autotune_) {
    return Defaults(instr);
  }

  if (IsFused(instr)) {
    auto fused_configs = GetFusedConvolutionCustomCallConfigs(&instr);
    if (!fused_configs.ok()) {
      LOG(WARNING) << "MIOpen autotuning failed (" << fused_configs.status()
                   << "); falling back to the default config";
      return Defaults(instr);
    }
    return fused_configs;
  }
  auto conv_configs = GetConvolutionCustomCallConfigs(&instr);
  if (!conv_configs.ok()) {
    LOG(WARNING) << "MIOpen autotuning failed (" << conv_configs.status()
                 << "); falling back to the default config";
    return Defaults(instr);
  }
  return conv_configs;
}
'''

CASES = (
    Case("mutex, four locks and the scratch error", path=ROCM_DNN_CC,
         before=_ACCESS + _FUNCS, after=_ACCESS.rstrip("\n") + _DECL + "\n" + _FIXED_FUNCS),
    Case("wrap::-prefixed MIOpen calls (before rocm-jaxlib-v0.9.1's #804)", path=ROCM_DNN_CC,
         before=_ACCESS + _FUNCS.replace("(miopen", "(wrap::miopen"),
         after=_ACCESS.rstrip("\n") + _DECL + "\n" + _FIXED_FUNCS.replace("(miopen", "(wrap::miopen")),
    Case("already fixed", path=ROCM_DNN_CC, expect="already-applied",
         before=_ACCESS.rstrip("\n") + _DECL + "\n" + _FIXED_FUNCS),
    Case("no MIOpenAccess: not a ROCm DNN file", path=ROCM_DNN_CC, expect="not-applicable",
         before="absl::Status CudnnSupport::DoConvolve() { return absl::OkStatus(); }\n"),
    Case("a locked function calling another would deadlock", path=ROCM_DNN_CC, expect="failed",
         before=_ACCESS + _FUNCS.replace(
             "  return ToStatus(miopenConvolutionForwardCompileSolution(miopen.handle()));",
             "  GetMIOpenConvolveAlgorithmsImmediateMode(stream);\n"
             "  return ToStatus(miopenConvolutionForwardCompileSolution(miopen.handle()));")),
    Case("CompileSolution before the handle: the lock would not cover it", path=ROCM_DNN_CC,
         expect="failed", before=_ACCESS + _FUNCS.replace(
             "  auto miopen = miopen_->GetHandle(parent_, stream);\n  return ToStatus(miopenConvolutionForward"
             "CompileSolution(miopen.handle()));",
             "  miopenConvolutionForwardCompileSolution(h);\n  auto miopen = miopen_->GetHandle(parent_, stream);\n"
             "  return ToStatus(miopenConvolutionForwardCompileSolution(miopen.handle()));")),
    Case("batch-norm fusion plans in use", path=ROCM_DNN_CC, expect="failed",
         before=_ACCESS + _FUNCS + "void F() {\n  ScopedFusionPlanBatchNormActivationForward plan(h);\n}\n"),
    Case("autotuner: check first, fall back on failure", path=AUTOTUNER_CC,
         before=_AUTOTUNE, after=_AUTOTUNE_FIXED),
    Case("autotuner already fixed", path=AUTOTUNER_CC, before=_AUTOTUNE_FIXED, expect="already-applied"),
)

FIX = Fix(
    id="xla-rocm-miopen-global-mutex",
    title="[ROCm] Serialise MIOpen compilation across GPUs with a process-wide mutex",
    upstream="xla",
    description="""\
With JAX on 8x MI300X, every device creates its convolution runners lazily
on its own execution thread at first use, holding only its per-device
MIOpenAccess lock, and MIOpen segfaults in miopen::kernels() when several
devices compile at once (ROCm/xla#777).

Add one process-wide absl::Mutex in rocm_dnn.cc and take it around MIOpen's
Find (PopulateMIOpenFindDb), GetSolution
(GetMIOpenConvolveAlgorithmsImmediateMode, also reached from
ConvolveRunnerFromDesc's algo_id==0 path, which #777 left unlocked),
CompileSolution (ConvolveRunnerFromDesc) and CompileFusionPlan
(RocmFusedConvRunner::Create). The global lock is always taken before the
per-device one and no locked function calls another. A failed scratch
allocation for Find returns ResourceExhaustedError instead of LOG(FATAL).

In the autotuner, MIOpenBackend::GetSupportedConfigs checks do_not_autotune_
before any MIOpen call and falls back to the default config when autotuning
fails.""",
    dep3=Dep3(
        origin="other, reworks https://github.com/ROCm/xla/pull/777 (open)",
        bug="https://github.com/ROCm/xla/pull/777",
        forwarded="no",
        last_update="2026-11-22",
    ),
    backends=("rocm",),
    changes=(FileChange(ROCM_DNN_CC, ROCM_DNN, sites=6, fixture=Fixture(
                 "fixtures/rocm_dnn.cc", edit="replace",
                 mutate=("MIOpenSupport::PopulateMIOpenFindDb",
                         "MIOpenSupport::GetMIOpenConvolveAlgorithmsImmediateMode",
                         "MIOpenSupport::ConvolveRunnerFromDesc", "RocmFusedConvRunner::Create"))),
             FileChange(AUTOTUNER_CC, AUTOTUNER, sites=3, optional=True, fixture=Fixture(
                 "fixtures/autotuner_miopen.cc", mutate=("MIOpenBackend::GetSupportedConfigs",), edit="move"))),
    references=("https://github.com/ROCm/xla/pull/777", "https://github.com/ROCm/MIOpen/issues/3955"),
    cases=CASES,
    # No runtime switch: the fix is C++ inside jaxlib. The user-side mitigation
    # is a call, mitigation.warm_up_one_device_at_a_time (see README.md).
    hotfix=None,
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="rocm",
    repro_alone=True,  # every GPU at once, their first calls timed and their overlap counted
    validate=lazy(f"{__package__}.validate:check"),
)
