"""GPU check (NVIDIA, cuDNN >= 9.6): the cuDNN dot_product_attention with
packed sequences, 8 query heads and 2 KV heads, against a per-segment
reference (float32 attention of each segment alone), with three versions of
`_fix_seqlen_offsets`: the installed one, a fault-injected one that scales kv
offsets by the query heads (the bug, for a JAX that already has the fix),
and the fixed one.

    python -m fixmono.fixes.jax.cudnn_gqa_kv_offsets.gpu_check [--out result.json]
"""
from __future__ import annotations

import argparse
import json
import re
import sys

B, T, N, K, H = 2, 256, 8, 2, 64
SEGMENTS = [[(0, 96), (96, 256)], [(0, 160), (160, 256)]]  # (start, end) per sequence


def packed_inputs(jnp):
    offsets = jnp.asarray([[s for s, _ in segs] + [-1] for segs in SEGMENTS], jnp.int32)
    seqlen = jnp.asarray([[e - s for s, e in segs] for segs in SEGMENTS], jnp.int32)
    return seqlen, offsets


def reference(q, k, v, np):
    """Each segment attends only to itself; KV heads shared by N // K query heads."""
    out = np.zeros(q.shape, np.float32)
    for b, segs in enumerate(SEGMENTS):
        for s, e in segs:
            qs = q[b, s:e].astype(np.float32)  # [t, N, H]
            ks = np.repeat(k[b, s:e].astype(np.float32), N // K, axis=1)
            vs = np.repeat(v[b, s:e].astype(np.float32), N // K, axis=1)
            logits = np.einsum("tnh,snh->nts", qs, ks) / np.sqrt(H)
            weights = np.exp(logits - logits.max(-1, keepdims=True))
            weights /= weights.sum(-1, keepdims=True)
            out[b, s:e] = np.einsum("nts,snh->tnh", weights, vs)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out")
    args = p.parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np

    from . import offsets

    # The two variants by the same two-line edit as the transformation, made with
    # regular expressions here: the GPU image has no libcst.
    module = offsets.module()
    source = offsets.installed_source()
    scaling = re.search(r"kv_offsets = kv_offsets \* (\w+) \* H", source).group(1)
    has_fix = scaling != "N"
    buggy = re.sub(r"kv_offsets = kv_offsets \* \w+ \* H", "kv_offsets = kv_offsets * N * H", source)
    fixed = source if has_fix else re.sub(r"_, S, _, _ = key\.shape", "_, S, K, _ = key.shape", source).replace(
        "kv_offsets = kv_offsets * N * H", "kv_offsets = kv_offsets * K * H")
    variants = {"installed": module._fix_seqlen_offsets,
                "bug injected (kv offsets x query heads)": offsets.function_from(buggy, vars(module)),
                "fixed": offsets.function_from(fixed, vars(module))}
    keys = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(keys[0], (B, T, N, H), jnp.bfloat16)
    k = jax.random.normal(keys[1], (B, T, K, H), jnp.bfloat16)
    v = jax.random.normal(keys[2], (B, T, K, H), jnp.bfloat16)
    seqlen, offs = packed_inputs(jnp)
    ref = reference(np.asarray(q, np.float32), np.asarray(k, np.float32), np.asarray(v, np.float32), np)
    result = {"jax": jax.__version__, "device": str(jax.devices()[0]), "installed_has_fix": has_fix, "runs": {}}
    original = module._fix_seqlen_offsets
    try:
        for name, fn in variants.items():
            module._fix_seqlen_offsets = fn
            jax.clear_caches()
            try:
                out = module.dot_product_attention(q, k, v, q_seqlen=seqlen, kv_seqlen=seqlen, q_offsets=offs,
                                                   kv_offsets=offs, scale=1 / np.sqrt(H),
                                                   mask_type=module.MaskType.PADDING)
                err = float(np.nanmax(np.abs(np.asarray(out, np.float32) - ref)))
                result["runs"][name] = {"max_abs_error": err, "finite": bool(np.isfinite(np.asarray(out, np.float32)).all())}
            except Exception as e:  # a cuDNN that refuses the case is a result too
                result["runs"][name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
            print(name, result["runs"][name], flush=True)
    finally:
        module._fix_seqlen_offsets = original
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
