"""Reproducer: jaxlib does not find the ROCm 10 plugin (jax_rocm10_plugin).

    python -m fixmono.fixes.jaxlib.rocm_plugin_discovery.repro [--json]

Puts a dummy `jax_rocm10_plugin` (rocm_plugin_extension, _linalg, _solver,
version 0.11.1) on sys.path and asks the installed jaxlib's
`import_from_plugin("rocm", ...)` for each submodule, as jaxlib's gpu_linalg,
gpu_solver, ... do at import; then the same with the fix applied to the
installed plugin_support.py. Pure Python: runs without ROCm. On a ROCm machine
a miss means no FFI handlers (`No FFI handler registered for hipsolver_*`).
Exit 1 reproduced, 0 not reproduced (this jaxlib finds it), 77 skipped.
"""
from __future__ import annotations

import importlib
import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import cli


def reproduce() -> ReproResult:
    try:
        import jaxlib
        from . import plugin
        installed = importlib.import_module(plugin.MODULE)
    except (ImportError, AttributeError) as err:
        return ReproResult(Verdict.SKIPPED, f"needs jaxlib with jaxlib.plugin_support: {err}")
    before, after = plugin.finds(installed), plugin.finds(plugin.fixed_module())
    details = {"jaxlib": jaxlib.__version__, "jaxlib_path": jaxlib.__path__[0], "unpatched": before, "patched": after}
    where = f"jaxlib {jaxlib.__version__}, dummy jax_rocm10_plugin {plugin.PLUGIN_VERSION}"
    if not after["right"]:
        return ReproResult(Verdict.REPRODUCED, f"{where}: even the patched plugin_support misses it", details)
    if before["right"]:
        return ReproResult(Verdict.NOT_REPRODUCED, f"{where}: found without the patch (this jaxlib has the fix)",
                           details)
    return ReproResult(Verdict.REPRODUCED, f"{where}: import_from_plugin('rocm', ...) returns None for "
                                           f"{', '.join(before['found'])}, silently; patched: all from "
                                           f"jax_rocm10_plugin", details, needs="rocm for the missing FFI handlers")


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
