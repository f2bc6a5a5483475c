"""Runtime form: `Trainer.compute_loss` defined again from its own source,
transformed, in transformers.trainer's namespace. Subclasses that call
super().compute_loss (TRL's trainers) get it too; a subclass that replaces
compute_loss with its own code does not. Nothing is done on a release
without the scaling (4.46.1 and older) or one that already keeps aux_loss out."""
from __future__ import annotations

import inspect

_original: list = []  # [Trainer, its compute_loss] while enabled


def enable() -> str:
    if _original:
        return "already enabled"
    from fixmono.model.errors import NotApplicable, TransformFailed
    from fixmono.runtime.define import define

    from .transform import FUNCTION, TRANSFORM

    try:
        from transformers import trainer as module
    except ImportError as err:  # no transformers, or no accelerate (the Trainer needs it)
        return f"transformers' Trainer cannot be imported here ({err}); nothing to do"
    cls = module.Trainer
    source = "class Trainer:\n" + inspect.getsource(cls.compute_loss)  # the method alone: a fast parse
    try:
        rewrite = TRANSFORM.rewrite(source)
    except NotApplicable:
        return "this Trainer does not scale the loss by the world size; nothing to do"
    except TransformFailed as err:  # a compute_loss of a shape the fix does not know: leave it alone
        return f"not enabled: {err}"
    if not rewrite.changed:
        return "this Trainer already keeps the router aux loss out of the world-size scaling; nothing to do"
    _original[:] = [cls, cls.compute_loss]
    cls.compute_loss = define(rewrite.source, FUNCTION, vars(module))
    return "enabled: Trainer.compute_loss scales the token-normalized loss only, not the router aux loss"


def disable() -> str:
    if not _original:
        return "not enabled; nothing to do"
    cls, compute_loss = _original
    cls.compute_loss = compute_loss
    _original.clear()
    return "disabled: Trainer.compute_loss back to the installed one"
