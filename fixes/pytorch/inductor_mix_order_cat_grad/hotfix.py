"""Runtime form: `SIMDScheduling._codegen_mix_order_reduction` defined again from
the installed simd.py, transformed (final reduces written through views), and
set on the class. Only code compiled after enable() is affected: run it before
torch.compile, or call torch._dynamo.reset() and keep Inductor's FX graph cache
from handing back code generated before (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1,
or a fresh cache dir)."""
from __future__ import annotations

MODULE = "torch._inductor.codegen.simd"
NAME = "SIMDScheduling._codegen_mix_order_reduction"
_original = None


def enable() -> str:
    global _original
    try:
        import importlib
        simd = importlib.import_module(MODULE)
    except ImportError as err:
        return f"torch with Inductor is not importable here ({err}); nothing to do"
    if _original is not None:
        return "already enabled"
    from fixmono.model.errors import NotApplicable
    from fixmono.runtime.define import define, module_source

    from .transform import TRANSFORM

    source = module_source(simd)
    try:
        rewrite = TRANSFORM.rewrite(source)
    except NotApplicable as err:
        return f"not enabled: {err} in this torch"
    if rewrite.changed == 0:
        return "this torch already writes mix-order final reduces through views; nothing to do"
    _original = simd.SIMDScheduling.__dict__["_codegen_mix_order_reduction"]
    simd.SIMDScheduling._codegen_mix_order_reduction = define(rewrite.source, NAME, vars(simd))
    return "enabled: mix-order final reduces are written through views (code compiled from now on)"


def disable() -> str:
    global _original
    if _original is None:
        return "not enabled; nothing to do"
    import importlib

    importlib.import_module(MODULE).SIMDScheduling._codegen_mix_order_reduction = _original
    _original = None
    return "disabled: the installed _codegen_mix_order_reduction is back"
