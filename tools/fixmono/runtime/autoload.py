"""FIXMONO_HOTFIXES=id,id (or "all"; an id may be a .patch file) at interpreter start-up, with no change to
the training script: the wheel's fixmono-hotfixes.pth calls install() only
when the variable is set (unset, nothing of fixmono is imported). Each named
hot-fix is applied when its trigger module (HotFix.trigger) has been
imported for the first time: an import hook, never an eager import of torch
or transformers. Every message is logged once on logger "fixmono" (WARNING);
a hot-fix that fails is logged and never breaks the user's import. A hot-fix
that needs an object (the MoE routing pin needs the model) logs the one call
it needs."""
from __future__ import annotations

import importlib.abc
import sys

from fixmono.model.projects import PROJECTS
from fixmono.model.registry import discover
from fixmono.runtime.diff_hotfix import from_patch, is_patch
from fixmono.runtime.hotfixes import ENV_VAR, applied, log
from fixmono.sources.installed import package_name


class TriggerFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself. At the first import of an upstream project's
    package (torch, jax, transformers ...: site-packages are all on the path
    by then) it reads the catalogue; for a trigger module it asks the other
    finders, and has the module's loader apply the waiting hot-fixes once the
    module has run."""

    def __init__(self, value: str):
        self.value = value
        self.pending: dict[str, list] | None = None  # trigger module -> fixes waiting for it
        self.busy: set[str] = set()
        self.packages = {package_name(p) for p in PROJECTS.values() if p.markers or p.package}

    def find_spec(self, name, path=None, target=None):
        if self.pending is None:
            if name.partition(".")[0] not in self.packages:
                return None
            self.pending = chosen(self.value)
        if name not in self.pending or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = next((s for f in sys.meta_path if f is not self and hasattr(f, "find_spec")
                         for s in [f.find_spec(name, path, target)] if s is not None), None)
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            self.fire(name)

        spec.loader.exec_module = exec_module  # this spec's own loader object
        return spec

    def fire(self, name: str) -> None:
        for fix in self.pending.pop(name, []):
            apply(fix)
        if not self.pending and self in sys.meta_path:
            sys.meta_path.remove(self)


def apply(fix) -> None:
    log.warning("%s: %s: %s", ENV_VAR, fix.id, applied(fix))  # a hot-fix never breaks the import it rides on


def chosen(value: str) -> dict[str, list]:
    """trigger module -> the fixes `value` names ("id,id" or "all") waiting
    for it; fixes whose trigger is already imported, or that have none (a
    patch no hot-fix can carry: it says why), applied now."""
    pending: dict[str, list] = {}
    try:
        catalogue = {f.id: f for f in discover()}
    except Exception as err:  # the user's import must go on whatever happens here
        log.warning("%s=%s: not set up: %s: %s", ENV_VAR, value, type(err).__name__, err)
        return pending
    names = None if value.strip() == "all" else [i.strip() for i in value.split(",") if i.strip()]
    for fix in named(names, catalogue):
        if not fix.hotfix.trigger or fix.hotfix.trigger in sys.modules:
            apply(fix)
        else:
            pending.setdefault(fix.hotfix.trigger, []).append(fix)
    return pending


def named(names: list[str] | None, catalogue: dict) -> list:
    """The fixes with a hot-fix that `names` names (all of the catalogue's that
    have a trigger when None); every other entry logged in one line and left out."""
    if names is None:
        return [f for f in catalogue.values() if f.hotfix is not None and f.hotfix.trigger]
    fixes = []
    for name in dict.fromkeys(names):
        if is_patch(name):
            try:
                fixes.append(from_patch(name))
            except Exception as err:  # noqa: BLE001 - a patch that cannot be read: said, and the import goes on
                log.warning("%s: %s: not set up: %s", ENV_VAR, name, err)
        elif name not in catalogue:
            log.warning("%s: %s: no such hot-fix (known: %s; or a .patch file); ignored", ENV_VAR, name,
                        ", ".join(sorted(catalogue)))
        elif catalogue[name].hotfix is None or not catalogue[name].hotfix.trigger:
            log.warning("%s: %s: no runtime hot-fix to turn on at start-up (apply the patch and rebuild, or call "
                        "enable_hotfixes in the script); ignored", ENV_VAR, name)
        else:
            fixes.append(catalogue[name])
    return fixes


INSTALLED = False  # a venv's lib64 -> lib link makes site read the same .pth twice


def install(value: str) -> None:
    """Watch imports for the hot-fixes named in `value`; once per process.
    Nothing of the catalogue is read until an upstream project is imported."""
    global INSTALLED
    if not INSTALLED:
        INSTALLED = True
        sys.meta_path.insert(0, TriggerFinder(value))
