"""Runtime form: each affected family's <X>TopKRouter.forward defined again from
its own source, transformed (softmax into router_probs, raw logits returned).
The families' modeling modules are imported to do it (ten modules, once); models
built before enable() pick it up too, since the method is the class's.
Nothing is done on a transformers that already returns raw logits."""
from __future__ import annotations

import importlib
import inspect
import textwrap

_originals: dict[type, object] = {}


def enable(families=None) -> str:
    if _originals:
        return "already enabled"
    from fixmono.model.errors import NotApplicable
    from fixmono.runtime.define import define

    from .routers import FAMILIES
    from .transform import TRANSFORM

    patched = []
    for family in families or FAMILIES:
        try:
            module = importlib.import_module(family.module)
        except ImportError:  # a release without this model, or without transformers
            continue
        for name in family.routers:
            cls = getattr(module, name, None)
            if cls is None:
                continue
            source = textwrap.dedent(inspect.getsource(cls))
            try:
                rewrite = TRANSFORM.rewrite(source)
            except NotApplicable:
                continue
            if rewrite.changed:
                _originals[cls] = cls.forward
                cls.forward = define(rewrite.source, f"{name}.forward", vars(module))
                patched.append(name)
    if not patched:
        return "no router here returns probabilities as router_logits; nothing to do"
    return f"enabled: {len(patched)} routers return raw router_logits ({', '.join(patched)})"


def disable() -> str:
    if not _originals:
        return "not enabled; nothing to do"
    for cls, forward in _originals.items():
        cls.forward = forward
    count = len(_originals)
    _originals.clear()
    return f"disabled: {count} routers back to the installed forward"
