"""Runtime form: replace the installed JAX's `_fix_seqlen_offsets` with the
same function, transformed (kv offsets scaled by the key's heads). The cuDNN
attention impls look it up in their module at call time, so calls traced
after enable() use it; functions jitted before keep what they traced."""
from __future__ import annotations

_original = None


def enable() -> str:
    global _original
    try:
        from . import offsets
        module = offsets.module()
    except ImportError as err:
        return f"jax is not importable here ({err}); nothing to do"
    from .transform import TRANSFORM
    if _original is not None:
        return "already enabled"
    if TRANSFORM.rewrite(offsets.installed_source()).present:
        return "this jax already scales kv offsets by the key's heads; nothing to do"
    _original = module._fix_seqlen_offsets
    module._fix_seqlen_offsets = offsets.fixed_function()
    return "enabled: cuDNN packed-attention kv offsets use the key's head count (calls traced from now on)"


def disable() -> str:
    global _original
    if _original is None:
        return "not enabled; nothing to do"
    from . import offsets
    offsets.module()._fix_seqlen_offsets = _original
    _original = None
    return "disabled: the installed _fix_seqlen_offsets is back"
