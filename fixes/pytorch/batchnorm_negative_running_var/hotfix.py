"""Check BatchNorm running_var at run time: negative or non-finite values raise (or are clamped).

A negative running variance is the root of the eager/fused disagreement of
pytorch#177665: eager gives NaN where var + eps < 0, a fused kernel may give a
number. Such statistics are invalid on every backend, so the check is too.

    check_running_var(model)                  # raise InvalidRunningVar naming modules and channels
    check_running_var(model, on_invalid="clamp")  # repair in place, with a warning
    enable(on_invalid="raise")                # check every BatchNorm before its eval forward
    disable()
"""
from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass

MODES = ("raise", "clamp")


class InvalidRunningVar(ValueError):
    """BatchNorm modules hold a negative or non-finite running_var."""


@dataclass(frozen=True)
class Finding:
    module: str  # qualified name in the model ("" for the model itself)
    negative: tuple[int, ...]  # channel indices
    non_finite: tuple[int, ...]

    def __str__(self) -> str:
        parts = []
        if self.negative:
            parts.append(f"negative in channels {_channels(self.negative)}")
        if self.non_finite:
            parts.append(f"non-finite in channels {_channels(self.non_finite)}")
        return f"{self.module or '<model>'}: running_var " + ", ".join(parts)


def _channels(idx: tuple[int, ...]) -> str:
    shown = ", ".join(map(str, idx[:8]))
    return f"[{shown}{', ...' if len(idx) > 8 else ''}] ({len(idx)})"


def _batchnorm_types():
    from torch.nn.modules.batchnorm import _BatchNorm

    return _BatchNorm


def inspect_module(name: str, module) -> Finding | None:
    import torch

    var = getattr(module, "running_var", None)
    if var is None:
        return None
    negative = torch.nonzero(var < 0).flatten().tolist()
    non_finite = torch.nonzero(~torch.isfinite(var)).flatten().tolist()
    if not negative and not non_finite:
        return None
    return Finding(name, tuple(negative), tuple(non_finite))


def find_invalid(model) -> list[Finding]:
    bn = _batchnorm_types()
    found = [inspect_module(name, m) for name, m in model.named_modules() if isinstance(m, bn)]
    return [f for f in found if f]


def repair(module) -> None:
    """Negative and -inf variances become 0, NaN becomes 1 (unit variance)."""
    import torch

    with torch.no_grad():
        var = module.running_var
        var.copy_(torch.nan_to_num(var, nan=1.0, neginf=0.0).clamp_(min=0))


def check_running_var(model, on_invalid: str = "raise") -> list[Finding]:
    """Check every BatchNorm module of `model`; returns what was found."""
    if on_invalid not in MODES:
        raise ValueError(f"on_invalid must be one of {MODES}, not {on_invalid!r}")
    findings = find_invalid(model)
    if findings and on_invalid == "raise":
        raise InvalidRunningVar("invalid BatchNorm statistics: " + "; ".join(map(str, findings)))
    if findings:
        modules = dict(model.named_modules())
        for f in findings:
            repair(modules[f.module])
        warnings.warn("clamped invalid BatchNorm running_var (negative -> 0, NaN -> 1): "
                      + "; ".join(map(str, findings)), RuntimeWarning, stacklevel=2)
    return findings


# --- the global hook: one check per module and per running_var version ----------------
_state: dict = {"handle": None, "mode": None}
_checked: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _pre_forward(module, args) -> None:
    bn = _batchnorm_types()
    if not isinstance(module, bn) or module.training or module.running_var is None:
        return
    version = module.running_var._version
    if _checked.get(module) == version:  # statistics unchanged since the last check
        return
    finding = inspect_module(type(module).__name__, module)
    if finding and _state["mode"] == "raise":
        raise InvalidRunningVar(f"invalid BatchNorm statistics before forward: {finding}")
    if finding:
        repair(module)
        warnings.warn(f"clamped invalid BatchNorm running_var: {finding}", RuntimeWarning)
    _checked[module] = module.running_var._version


def enable(on_invalid: str = "raise") -> str:
    """Check each BatchNorm module's running_var before its first eval-mode forward
    (and again whenever the statistics change). Idempotent."""
    if on_invalid not in MODES:
        raise ValueError(f"on_invalid must be one of {MODES}, not {on_invalid!r}")
    try:
        import torch.nn.modules.module as module_mod
    except ImportError:
        return "batchnorm running_var check: torch is not installed; nothing to do"
    if _state["handle"] is not None:
        _state["mode"] = on_invalid
        return f"batchnorm running_var check: already enabled (on_invalid={on_invalid})"
    _state["handle"] = module_mod.register_module_forward_pre_hook(_pre_forward)
    _state["mode"] = on_invalid
    return f"batchnorm running_var check: enabled for every BatchNorm module (on_invalid={on_invalid})"


def disable() -> str:
    if _state["handle"] is None:
        return "batchnorm running_var check: was not enabled"
    _state["handle"].remove()
    _state.update(handle=None, mode=None)
    _checked.clear()
    return "batchnorm running_var check: disabled"
