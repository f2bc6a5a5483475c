"""Reproducer: packed-sequence kv offsets with grouped-query attention.

    python -m fixmono.fixes.jax.cudnn_gqa_kv_offsets.repro [--json]

Runs the installed JAX's `_fix_seqlen_offsets` (what dot_product_attention's
cuDNN path calls before the kernel) on 2 packed sequences, 8 query heads and
2 KV heads, and compares the kv offsets it hands cuDNN with the right ones
(computed here with numpy); then the same with the fix applied. Pure jnp:
the mechanism runs on the CPU. What cuDNN then does with wrong offsets
(attention over the wrong keys, values read past the buffer: outputs off by
1e28 in the report) needs an NVIDIA GPU with cuDNN.
Exit 1 reproduced, 0 not reproduced (this JAX has the fix), 77 skipped (no JAX).
"""
from __future__ import annotations

import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import cli


def reproduce() -> ReproResult:
    try:
        import jax
        from . import offsets
        installed = offsets.module()._fix_seqlen_offsets
    except (ImportError, AttributeError) as err:
        return ReproResult(Verdict.SKIPPED, f"needs jax with jax._src.cudnn.fused_attention_stablehlo: {err}")
    before = offsets.run_case(installed)
    after = offsets.run_case(offsets.fixed_function())
    details = {"jax": jax.__version__, "unpatched": before, "patched": after}
    where = f"jax {jax.__version__}, CPU, {offsets.N} query heads / {offsets.K} KV heads"
    if not after["kv_right"] or not after["q_right"]:
        return ReproResult(Verdict.REPRODUCED, f"{where}: even the patched function gives wrong offsets", details)
    if before["kv_right"]:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{where}: kv offsets right without the patch "
                                                   f"(this JAX has the fix)", details)
    return ReproResult(Verdict.REPRODUCED,
                       f"{where}: {before['wrong_kv']}/{before['kv_total']} kv offsets wrong "
                       f"({before['kv_offsets']} instead of {before['expected_kv_offsets']}: scaled by the "
                       f"query heads); patched: all right", details, needs="cuda (cuDNN) to see the attention output")


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
