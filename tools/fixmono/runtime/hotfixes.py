"""The runtime hot-fixes, never on by default: turned on explicitly, in the
training script, for stacks that cannot be rebuilt.

    from fixmono.runtime.hotfixes import enable_hotfixes, disable_hotfixes, enable_from_env
    enable_hotfixes(["pytorch-batchnorm-negative-running-var"])  # -> one message per fix
    enable_hotfixes(["/path/to/0001-fix.patch"])  # a patch file: the functions it changes, ported
    enable_from_env()   # FIXMONO_HOTFIXES="id,id" or "all" (ids or .patch files)
    disable_hotfixes()
"""
from __future__ import annotations

import inspect
import logging
import os

from fixmono.model.fix import Fix
from fixmono.model.registry import discover
from fixmono.runtime.diff_hotfix import disable_id, enabled_patches, from_patch, is_patch, patch_key

log = logging.getLogger("fixmono")
ENV_VAR = "FIXMONO_HOTFIXES"


def _chosen(ids) -> list[Fix]:
    """Fixes of the catalogue by id (all when None), and patch files (a path
    ending in .patch or .diff: its diff fix, runtime/diff_hotfix.py)."""
    fixes = discover()
    if ids is None:
        return fixes
    ids = [ids] if isinstance(ids, str) else [str(i) for i in ids]
    by_id = {f.id: f for f in fixes}
    if unknown := [i for i in ids if i not in by_id and not is_patch(i)]:
        raise ValueError(f"unknown fix id(s) {unknown} (known: {', '.join(by_id)}; or a .patch file)")
    return [f for f in fixes if f.id in ids] + [from_patch(i) for i in ids if is_patch(i)]


def _accepted(func, kwargs: dict) -> dict:
    """The keyword arguments `func` takes: enable_hotfixes(model=m) reaches the
    hot-fixes that have a `model` parameter, and only those."""
    params = inspect.signature(func).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def applied(fix: Fix, **kwargs) -> str:
    """What `fix`'s hot-fix said it did, or why it failed: one hot-fix never stops the others or the program."""
    try:
        return fix.hotfix.apply(**_accepted(fix.hotfix.apply, kwargs))
    except Exception as err:  # noqa: BLE001 - said in one line; the hot-fix keeps nothing half-done (its contract)
        return f"failed, left off: {type(err).__name__}: {err}"


def removed(fix: Fix) -> str:
    try:
        return fix.hotfix.remove()
    except Exception as err:  # noqa: BLE001 - said in one line; the other hot-fixes are still removed
        return f"not removed: {type(err).__name__}: {err}"


def enable_hotfixes(ids=None, **kwargs) -> list[str]:
    """Apply the runtime hot-fix of each chosen fix (all when ids is None), in
    series order; returns one message per fix, saying what it changed."""
    messages = []
    for fix in _chosen(ids):
        if fix.hotfix is None:
            messages.append(f"{fix.id}: no runtime hot-fix (apply the patch and rebuild); skipped")
        else:
            messages.append(f"{fix.id}: {applied(fix, **kwargs)}")
    return messages


def disable_hotfixes(ids=None) -> list[str]:
    """Remove the chosen hot-fixes (all, the patch files enabled too, when ids
    is None), in reverse order. A patch file is not read again: its hot-fix is
    known by its path."""
    ids = None if ids is None else [ids] if isinstance(ids, str) else [str(i) for i in ids]
    patches = enabled_patches() if ids is None else [patch_key(i) for i in ids if is_patch(i)]
    catalogue = _chosen(None if ids is None else [i for i in ids if not is_patch(i)])
    return [f"{p}: {disable_id(p)}" for p in reversed(patches)] + \
        [f"{fix.id}: {removed(fix)}" for fix in reversed(catalogue) if fix.hotfix]


def enable_from_env(environ=None) -> list[str]:
    """Enable the hot-fixes named in FIXMONO_HOTFIXES ("id,id" or "all") and log
    each message (logger "fixmono", WARNING: visible without logging set up)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not value:
        return []
    ids = None if value == "all" else [i.strip() for i in value.split(",") if i.strip()]
    messages = enable_hotfixes(ids)
    for message in messages:
        log.warning("%s=%s: %s", ENV_VAR, value, message)
    return messages
