"""Runtime form: `scan_autograd` defined again from the installed scan.py,
transformed, and registered as scan's autograd kernel in place of the installed
one (the dispatch cache cleared, dynamo reset: scan compiles its body). A torch
with the fix (2.13+) is left alone."""
from __future__ import annotations

import importlib

MODULE = "torch._higher_order_ops.scan"  # the module (the package's `scan` attribute is the function)
_original = None


def enable() -> str:
    global _original
    try:
        module = importlib.import_module(MODULE)
        import torch
        from torch._C import DispatchKey
    except ImportError as err:
        return f"torch with scan is not importable here ({err}); nothing to do"
    if _original is not None:
        return "already enabled"
    from fixmono.model.errors import NotApplicable
    from fixmono.runtime.define import define, module_source

    from .transform import FUNCTION, TRANSFORM

    try:
        rewrite = TRANSFORM.rewrite(module_source(module))
    except NotApplicable as err:
        return f"not enabled: {err} in this torch"
    if rewrite.changed == 0:
        return "this torch already traces scan with init requiring grad; nothing to do"
    op = module.scan_op
    _original = op.py_kernels.pop(DispatchKey.Autograd)
    define(rewrite.source, FUNCTION, vars(module))  # its decorator registers it on scan_op
    op._dispatch_cache.clear()
    torch._dynamo.reset()
    return "enabled: scan's autograd traces with init requiring grad"


def disable() -> str:
    global _original
    if _original is None:
        return "not enabled; nothing to do"
    import torch
    from torch._C import DispatchKey

    op = importlib.import_module(MODULE).scan_op
    op.py_kernels.pop(DispatchKey.Autograd, None)
    op.py_kernels[DispatchKey.Autograd] = _original
    op._dispatch_cache.clear()
    torch._dynamo.reset()
    _original = None
    return "disabled: the installed scan_autograd is back"
