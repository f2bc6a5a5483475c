"""Reproducer: SDPA backward when only the attention mask requires grad.

    python -m fixmono.fixes.pytorch.sdpa_mask_grad_logsumexp.repro [--json]

On a CUDA GPU: query/key/value (2 x 4 heads x 64 x 64, float32) that do not
require grad and a float mask that does, through
`F.scaled_dot_product_attention` (the dispatcher picks the memory-efficient
kernel: flash takes no mask, cuDNN no mask that requires grad), then backward.
Unpatched, the forward computed no logsumexp and the backward fails ("LSE is
not correctly aligned (strideH)"; with one head, an illegal memory access).
Then the two fixed paths: the kernel called with compute_log_sumexp=True (what
the patched C++ passes) and the hot-fix (math backend); both mask gradients
are compared with a float64 math reference.
Exit 1 reproduced, 0 not reproduced (this torch has the fix), 77 skipped (no CUDA).
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import cli

B, H, L, D = 2, 4, 64, 64
TOLERANCE = 1e-4


def inputs(device: str = "cuda"):
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(B, H, L, D, device=device, generator=g) for _ in range(3))
    mask = torch.randn(B, H, L, L, device=device, generator=g)
    return q, k, v, mask


def reference_grad(q, k, v, mask):
    """d(sum out)/d(mask) in float64, by the math definition."""
    import torch

    m = mask.double().requires_grad_()
    scores = q.double() @ k.double().transpose(-1, -2) / D ** 0.5 + m
    (torch.softmax(scores, -1) @ v.double()).sum().backward()
    return m.grad


def mask_grad(attention, q, k, v, mask):
    m = mask.clone().requires_grad_()
    attention(q, k, v, m).sum().backward()
    import torch

    torch.cuda.synchronize()
    return m.grad


def reproduce() -> ReproResult:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as err:
        return ReproResult(Verdict.SKIPPED, f"needs torch: {err}")
    if not torch.cuda.is_available():
        return ReproResult(Verdict.SKIPPED, "needs a CUDA GPU (the memory-efficient kernel); on the CPU the math "
                                            "path is used and works", needs="cuda")
    from . import hotfix

    q, k, v, mask = inputs()
    want = reference_grad(q, k, v, mask)
    details = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "shape": [B, H, L, D],
               "chosen_backend": int(torch._fused_sdp_choice(q, k, v, attn_mask=mask))}
    try:
        got = mask_grad(F.scaled_dot_product_attention, q, k, v, mask)
        details["unpatched"] = {"error": None, "max_err": float((got.double() - want).abs().max())}
    except RuntimeError as err:
        details["unpatched"] = {"error": str(err).splitlines()[0]}

    def kernel_with_lse(q, k, v, m):  # the patched C++'s call: same kernel, logsumexp asked for
        out = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, m, True)[0]
        return out

    patched = mask_grad(kernel_with_lse, q, k, v, mask)
    details["kernel_with_logsumexp"] = {"max_err": float((patched.double() - want).abs().max())}
    hotfix.enable()
    try:
        routed = mask_grad(F.scaled_dot_product_attention, q, k, v, mask)
    finally:
        hotfix.disable()
    details["hotfix_math"] = {"max_err": float((routed.double() - want).abs().max())}
    fixed_ok = max(details["kernel_with_logsumexp"]["max_err"], details["hotfix_math"]["max_err"]) < TOLERANCE
    where = f"torch {torch.__version__}, {details['gpu']}"
    if not fixed_ok:
        return ReproResult(Verdict.REPRODUCED, f"{where}: even the fixed paths give a wrong mask gradient", details)
    if details["unpatched"]["error"] is None and details["unpatched"]["max_err"] < TOLERANCE:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{where}: mask gradient right without the fix", details)
    return ReproResult(Verdict.REPRODUCED,
                       f"{where}: backward fails ({details['unpatched'].get('error') or 'wrong gradient'}); with "
                       f"logsumexp computed: mask grad error {details['kernel_with_logsumexp']['max_err']:.1e}, "
                       f"hot-fix (math) {details['hotfix_math']['max_err']:.1e}", details)


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
