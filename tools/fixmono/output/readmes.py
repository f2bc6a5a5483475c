"""Each catalogue fix's README, for the pages that show it (the HTML report)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from fixmono.model.registry import discover


def fix_readmes() -> dict[str, tuple[str, str]]:
    """{fix id: (its project, its README text)} for every fix whose folder has one."""
    found = {}
    for fix in discover():
        spec = importlib.util.find_spec(fix.package)
        folder = Path(next(iter(spec.submodule_search_locations or []), "")) if spec else None
        readme = folder / "README.md" if folder else None
        if readme is not None and readme.is_file():
            found[fix.id] = (fix.upstream, readme.read_text(encoding="utf-8", errors="replace"))
    return found
