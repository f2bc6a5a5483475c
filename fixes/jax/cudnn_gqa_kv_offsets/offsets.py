"""The function the fix is about, run for real: `_fix_seqlen_offsets` of the
installed JAX (pure jnp, so it runs on the CPU), the same function with the
transformation applied, and a grouped-query case whose right answer is
computed here with numpy, independently of JAX."""
from __future__ import annotations

import numpy as np

FUNCTION = "_fix_seqlen_offsets"
MODULE = "jax._src.cudnn.fused_attention_stablehlo"
# 2 sequences of 8 tokens, each packed with 2 segments; 8 query heads, 2 KV heads (GQA), head dim 4
B, T, S, N, K, H = 2, 8, 8, 8, 2, 4
Q_OFFSETS = [[0, 4, -1], [0, 3, -1]]
KV_OFFSETS = [[0, 5, -1], [0, 2, -1]]
SEQLENS = [[4, 4, -1], [3, 5, -1]]


def module():
    import importlib

    return importlib.import_module(MODULE)


def function_from(source: str, namespace: dict):
    """`_fix_seqlen_offsets` defined from `source`, with the module's globals."""
    from fixmono.runtime.define import define

    return define(source, FUNCTION, namespace)


def installed_source() -> str:
    from fixmono.runtime.define import module_source

    return module_source(MODULE)


def fixed_function():
    """The installed function with the transformation applied (or as it is,
    when the installed JAX already has the fix)."""
    from .transform import TRANSFORM  # libcst: not needed by the rest

    rewrite = TRANSFORM.rewrite(installed_source())
    return function_from(rewrite.source, vars(module()))


def expected_offsets(offsets, seq: int, heads: int) -> np.ndarray:
    """What cuDNN must get: segment starts counted from the first sequence,
    shifted left (padding filled with B * seq), in elements (x heads x H)."""
    o = np.asarray(offsets)
    cu = np.where(o >= 0, o + np.arange(o.shape[0])[:, None] * seq, o).flatten()
    kept = cu[cu >= 0]
    out = np.full(cu.size, o.shape[0] * seq)
    out[:kept.size] = kept
    return out.reshape(o.shape) * heads * H


def run_case(fix_seqlen_offsets, kv_heads: int = K) -> dict:
    """The GQA case through `fix_seqlen_offsets`: its kv offsets beside the right ones."""
    import jax.numpy as jnp

    query = jnp.zeros((B, T, N, H), jnp.float32)
    key = jnp.zeros((B, S, kv_heads, H), jnp.float32)
    as_int = lambda x: jnp.asarray(x, jnp.int32)  # noqa: E731
    _, _, q_off, kv_off = fix_seqlen_offsets(as_int(SEQLENS), as_int(SEQLENS), as_int(Q_OFFSETS),
                                             as_int(KV_OFFSETS), query, key)
    want_q, want_kv = expected_offsets(Q_OFFSETS, T, N), expected_offsets(KV_OFFSETS, S, kv_heads)
    got_q, got_kv = np.asarray(q_off), np.asarray(kv_off)
    return {"kv_offsets": got_kv.tolist(), "expected_kv_offsets": want_kv.tolist(),
            "kv_right": bool((got_kv == want_kv).all()), "q_right": bool((got_q == want_q).all()),
            "wrong_kv": int((got_kv != want_kv).sum()), "kv_total": int(got_kv.size)}
