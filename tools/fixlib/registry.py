"""Discovery of the fixes under fixes/<upstream>/<name>/fix.py."""
from __future__ import annotations

import importlib
from pathlib import Path

from tools.fixlib.errors import caused_by_interrupt
from tools.fixlib.model import Fix, FixDeclarationError
from tools.fixlib.projects import PROJECTS

# absolute(), not resolve(): under Bazel the runfiles tree, not the source tree, is the root
REPO_ROOT = Path(__file__).absolute().parents[2]


def fix_packages(root: Path = REPO_ROOT) -> list[str]:
    """Dotted package names of every fix folder, in a stable order."""
    return sorted(
        ".".join(p.parent.relative_to(root).parts)
        for p in (root / "fixes").glob("*/*/fix.py"))


def load(package: str) -> Fix:
    try:
        module = importlib.import_module(f"{package}.fix")
    except Exception as err:  # SyntaxError, ImportError, ...: name the file, not a traceback
        if caused_by_interrupt(err):  # Ctrl-C inside an import can surface wrapped (RuntimeError from __set_name__)
            raise KeyboardInterrupt from None
        where = package.replace(".", "/") + "/fix.py"
        raise FixDeclarationError(f"{where} cannot be imported: {type(err).__name__}: {err}") from None
    fix = getattr(module, "FIX", None)
    if not isinstance(fix, Fix):
        raise FixDeclarationError(f"{package}/fix.py must define FIX = Fix(...)")
    folder_upstream = package.split(".")[1].replace("_", "-")
    if fix.upstream not in PROJECTS:
        raise FixDeclarationError(f"fix {fix.id}: unknown upstream {fix.upstream!r}")
    if folder_upstream != fix.upstream:
        raise FixDeclarationError(f"fix {fix.id}: declared upstream {fix.upstream!r} "
                                  f"but lives under fixes/{package.split('.')[1]}/")
    return fix.with_package(package)


def discover(root: Path = REPO_ROOT) -> list[Fix]:
    """All fixes, in series order (upstream, then id)."""
    fixes = [load(p) for p in fix_packages(root)]
    ids = [f.id for f in fixes]
    if dupes := sorted({i for i in ids if ids.count(i) > 1}):
        raise FixDeclarationError(f"duplicate fix ids: {dupes}")
    return sorted(fixes, key=lambda f: (f.upstream, f.id))
