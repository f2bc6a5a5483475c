"""Runtime form: the "batched_mm" experts implementation registered again,
transformed (sentinel slots masked out of the routing weights). Experts
modules look their implementation up in `ExpertsInterface` at every call, so
models built before enable() pick it up too. A local override a user set on
an ExpertsInterface instance is theirs and left alone."""
from __future__ import annotations

KEY = "batched_mm"
_original = None


def enable() -> str:
    global _original
    try:
        from . import experts
        moe = experts.module()
    except ImportError as err:
        return f"transformers with integrations.moe is not importable here ({err}); nothing to do"
    if _original is not None:
        return "already enabled"
    from .transform import TRANSFORM
    from fixmono.model.errors import NotApplicable
    from fixmono.runtime.define import module_source

    try:
        if TRANSFORM.rewrite(module_source(moe)).changed == 0:
            return "this transformers already keeps sentinel slots out of the router gradient; nothing to do"
    except NotApplicable as err:
        return f"not enabled: {err} in this transformers"
    _original = moe.ExpertsInterface._global_mapping[KEY]
    moe.ExpertsInterface.register(KEY, experts.fixed_function())
    return f'enabled: experts implementation "{KEY}" masks EP sentinel slots out of the router gradient'


def disable() -> str:
    global _original
    if _original is None:
        return "not enabled; nothing to do"
    from . import experts

    experts.module().ExpertsInterface.register(KEY, _original)
    _original = None
    return f'disabled: the installed "{KEY}" is back'
