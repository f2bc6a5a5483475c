"""Runtime form, for a torch that cannot be rebuilt: the one call shape that
breaks (grad mode on, a mask that requires grad, query/key/value that do not,
on a GPU) is routed to the math backend; every other call goes through
unchanged. `torch.nn.functional.scaled_dot_product_attention` is replaced,
so callers that look it up there (transformers, torch.nn.MultiheadAttention
via F) are covered; a reference bound with `from ... import` before enable()
is not."""
from __future__ import annotations

import functools

_original = None
GPU_DEVICES = ("cuda",)  # where the memory-efficient kernel runs (ROCm reports "cuda" too)


def needs_math(query, key, value, attn_mask) -> bool:
    """The case the memory-efficient kernel gets wrong (pytorch/pytorch#148476)."""
    import torch

    return (isinstance(attn_mask, torch.Tensor) and attn_mask.requires_grad and torch.is_grad_enabled()
            and not (query.requires_grad or key.requires_grad or value.requires_grad)
            and query.device.type in GPU_DEVICES)


def _routed(original):
    @functools.wraps(original)
    def scaled_dot_product_attention(query, key, value, attn_mask=None, *args, **kwargs):
        if needs_math(query, key, value, attn_mask):
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel([SDPBackend.MATH]):
                return original(query, key, value, attn_mask, *args, **kwargs)
        return original(query, key, value, attn_mask, *args, **kwargs)

    scaled_dot_product_attention.__fixmono_original__ = original
    return scaled_dot_product_attention


def enable() -> str:
    global _original
    try:
        import torch.nn.functional as F
    except ImportError as err:
        return f"torch is not importable here ({err}); nothing to do"
    if _original is not None:
        return "already enabled"
    _original = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _routed(_original)
    return "enabled: SDPA with only the mask requiring grad runs on the math backend (GPU calls from now on)"


def disable() -> str:
    global _original
    if _original is None:
        return "not enabled; nothing to do"
    import torch.nn.functional as F

    F.scaled_dot_product_attention = _original
    _original = None
    return "disabled: torch's scaled_dot_product_attention is back"
