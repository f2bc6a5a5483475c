"""The compile check of --validate on a machine with a CUDA torch
(fixes/pytorch/sdpa_mask_grad_logsumexp/results/compile_check_h100_torch2.11.txt):

    python tools/compile_check_probe.py [FILE.cpp ...]

Prints the headers torch_headers(cuda=True) finds (torch/include and the CUDA
include folders), compiles our own CUDA-side translation unit unpatched, then
with a valid edit and with a broken one; each FILE (real upstream texts you
have: attention.cpp or Blas.cpp, by name) unpatched; and runs make_patch
--validate of the two PyTorch C++ fixes on a checkout of our fixtures.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fixmono.engines.compile_check import compile_check, syntax_error, torch_headers  # noqa: E402
from fixmono.testing import catalogue_tree, make_repo  # noqa: E402

UNIT = """#include <ATen/ATen.h>
#include <ATen/cuda/CUDABlas.h>
#include <ATen/cuda/CUDAContext.h>
namespace at::native {{
bool probe_lt(const Tensor& self) {{
  cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  return {body};
}}
}}
"""


def main(files: list[str]) -> int:
    headers = torch_headers(cuda=True)
    if headers is None:
        print("no torch with headers here")
        return 77
    print("HEADERS", headers.label)
    for folder in headers.dirs:
        print("  -I", folder)
    before = UNIT.format(body="handle != nullptr && self.dim() == 1")
    for name, body in (("after", "handle != nullptr && self.dim() == 1 && self.is_cuda()"),
                       ("broken", "handle != nullptr && self.is_cudaa()")):
        started = time.monotonic()
        result = compile_check(before, UNIT.format(body=body), "aten/src/ATen/native/cuda/Probe.cpp", headers)
        print("OWN", name, "->", result, f"{time.monotonic() - started:.0f}s", flush=True)
    for file in files:
        blas = "Blas" in Path(file).name
        target = "aten/src/ATen/native/cuda/Blas.cpp" if blas else "aten/src/ATen/native/transformers/attention.cpp"
        error = syntax_error(Path(file).read_text(), target, headers if blas else torch_headers())
        print("REAL", Path(file).name[:50], "unpatched ->", error, flush=True)
    with tempfile.TemporaryDirectory() as folder:
        repo = make_repo(Path(folder) / "pytorch", catalogue_tree("pytorch"))
        run = subprocess.run([sys.executable, "-m", "fixmono", "make-patch", "pytorch-sdpa-mask-grad-logsumexp",
                              "pytorch-revert-addmm-cublaslt-gate", "--upstream", str(repo), "--check", "--validate"],
                             capture_output=True, text=True)
    print("MAKE_PATCH exit", run.returncode)
    print(run.stdout[-3000:], run.stderr[-2000:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
