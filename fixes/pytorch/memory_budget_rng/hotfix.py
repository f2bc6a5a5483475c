"""Runtime form: the installed torch's `OpTypes.is_random` and
`choose_saved_values_set` replaced by the same functions, transformed (random
ops never recomputed under a memory budget). The partitioner looks both up at
call time, so graphs compiled from now on use them.

AOTAutograd's cache keys on torch's source files, which a hot-fix does not
change: a graph partitioned before (by this process or an earlier one) would
come back from the cache unfixed. The cache is off while the fix is on."""
from __future__ import annotations

_saved: dict | None = None


def enable() -> str:
    global _saved
    try:
        import torch._functorch.config as fconfig
        from . import partitioner
        module = partitioner.module()
    except ImportError as err:
        return f"torch is not importable here ({err}); nothing to do"
    if _saved is not None:
        return "already enabled"
    from .transform import TRANSFORM
    from fixmono.runtime.define import module_source

    if TRANSFORM.rewrite(module_source(module)).changed == 0:
        return "this torch never recomputes random ops under a memory budget; nothing to do"
    _saved = {"cache": fconfig.enable_autograd_cache}
    _saved["functions"] = partitioner.swap(partitioner.fixed_functions())
    fconfig.enable_autograd_cache = False
    if fconfig.enable_autograd_cache:  # TORCHINDUCTOR_AUTOGRAD_CACHE=1 forces it on
        disable()
        return ("not enabled: TORCHINDUCTOR_AUTOGRAD_CACHE=1 forces AOTAutograd's cache on, which would hand back "
                "graphs partitioned without the fix; unset it")
    return ("enabled: random ops are never recomputed under activation_memory_budget (graphs compiled from now on; "
            "AOTAutograd cache off)")


def disable() -> str:
    global _saved
    if _saved is None:
        return "not enabled; nothing to do"
    import torch._functorch.config as fconfig
    from . import partitioner

    partitioner.swap(_saved["functions"])
    fconfig.enable_autograd_cache = _saved["cache"]
    _saved = None
    return "disabled: the installed partitioner is back"
