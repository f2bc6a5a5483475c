"""--validate: define the patched `_fix_seqlen_offsets` (with the installed
JAX module's globals) and run it on the grouped-query case: every kv offset
must be the numpy-computed one, query offsets and multi-head attention
(as many KV heads as query heads) unchanged."""
from __future__ import annotations

from typing import Mapping

from .transform import FUNCTION

TARGET = "jax/_src/cudnn/fused_attention_stablehlo.py"


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    from . import offsets

    try:
        namespace = vars(offsets.module())
    except ImportError as err:
        return f"cannot validate: jax is not importable here ({err})"
    function = offsets.function_from(after[TARGET], namespace)
    gqa, mha = offsets.run_case(function), offsets.run_case(function, kv_heads=offsets.N)
    if not gqa["kv_right"]:
        return (f"{FUNCTION} gives kv offsets {gqa['kv_offsets']} for {offsets.N} query / {offsets.K} KV heads, "
                f"not {gqa['expected_kv_offsets']}")
    if not (gqa["q_right"] and mha["q_right"] and mha["kv_right"]):
        return f"{FUNCTION} changed the query offsets or multi-head attention"
    return None
