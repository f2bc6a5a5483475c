"""--validate: run the written plugin_support.py as a module of the installed
jaxlib package and ask it for the ROCm plugin with a dummy jax_rocm10_plugin
(newer version) and a dummy jax_rocm12_plugin (no version file) installed:
every submodule must come from that plugin, with no warning."""
from __future__ import annotations

from typing import Mapping

from .plugin import TARGET


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    if TARGET not in after:
        return None  # a tree without plugin_support.py (the shim alone): nothing to run
    try:
        from . import plugin
        module = plugin.module_from(after[TARGET])
    except ImportError as err:
        return f"cannot validate: jaxlib is not importable here ({err})"
    for major, version in ((10, plugin.PLUGIN_VERSION), (12, None)):
        case = plugin.finds(module, major, version)
        if not case["right"] or case["warnings"]:
            return f"{case['plugin']} not found: import_from_plugin gave {case['found']} {case['warnings'] or ''}"
    return None
