"""The catalogue: discovery of the fixes under fixmono.fixes.<upstream>.<name>
(each folder's fix.py defines FIX). In the repository the folders are the
top-level fixes/; in the installed wheel, fixmono/fixes/."""
from __future__ import annotations

import importlib
from pathlib import Path

from fixmono.model.errors import FixDeclarationError, caused_by_interrupt
from fixmono.model.fix import Fix
from fixmono.model.projects import PROJECTS

CATALOGUE = "fixmono.fixes"


def catalogue_dirs() -> list[Path]:
    """The folders holding the catalogue's project folders."""
    return [Path(p) for p in importlib.import_module(CATALOGUE).__path__]


def fix_files(root: Path) -> list[Path]:
    """Every fixes/<project>/<name>/fix.py under `root` (a catalogue folder); a
    folder whose name starts with a dot is none (`fixmono import`'s staging
    folders, a killed run's leftovers, editors' and tools' folders)."""
    return sorted(p for p in root.glob("*/*/fix.py") if not any(part.startswith(".") for part in
                                                                   p.relative_to(root).parts[:2]))


def fix_packages() -> list[str]:
    """Dotted package names of every fix folder, in a stable order."""
    return sorted({".".join((CATALOGUE, *p.parent.relative_to(root).parts))
                   for root in catalogue_dirs() for p in fix_files(root)})


def load(package: str) -> Fix:
    where = package.removeprefix("fixmono.").replace(".", "/") + "/fix.py"  # fixes/<upstream>/<name>/fix.py
    try:
        module = importlib.import_module(f"{package}.fix")
    except Exception as err:  # SyntaxError, ImportError, ...: name the file, not a traceback
        if caused_by_interrupt(err):  # Ctrl-C inside an import can surface wrapped (RuntimeError from __set_name__)
            raise KeyboardInterrupt from None
        raise FixDeclarationError(f"{where} cannot be imported: {type(err).__name__}: {err}") from None
    fix = getattr(module, "FIX", None)
    if not isinstance(fix, Fix):
        raise FixDeclarationError(f"{where} must define FIX = Fix(...)")
    project_folder = where.split("/")[-3]
    if fix.upstream not in PROJECTS:
        raise FixDeclarationError(f"fix {fix.id}: unknown upstream {fix.upstream!r}")
    if project_folder.replace("_", "-") != fix.upstream:
        raise FixDeclarationError(f"fix {fix.id}: declared upstream {fix.upstream!r} "
                                  f"but lives under fixes/{project_folder}/")
    return fix.with_package(package)


def discover() -> list[Fix]:
    """All fixes, in series order (upstream, then id)."""
    fixes = [load(p) for p in fix_packages()]
    ids = [f.id for f in fixes]
    if dupes := sorted({i for i in ids if ids.count(i) > 1}):
        raise FixDeclarationError(f"duplicate fix ids: {dupes}")
    return sorted(fixes, key=lambda f: (f.upstream, f.id))
