"""The code the fix is about, run for real on the CPU: jaxlib's pure-Python
plugin_support (installed, or any text of it run as a module of the
installed jaxlib package) asked for the ROCm plugin while a dummy
`jax_rocm10_plugin` package, shaped like the real one (rocm_plugin_extension,
_linalg, version.py with a version of its own), is on sys.path."""
from __future__ import annotations

import contextlib
import importlib
import sys
import tempfile
from pathlib import Path

TARGET = "jaxlib/plugin_support.py"
SHIM = "jax_plugins/rocm/__init__.py"
MODULE = "jaxlib.plugin_support"
PLUGIN_VERSION = "0.11.1"  # a ROCm 10 plugin is newer than the jaxlib that cannot find it


def installed_source() -> str:
    from fixmono.runtime.define import module_source

    return module_source(MODULE)


def module_from(text: str):
    from fixmono.runtime.define import module_from as run_as_module

    return run_as_module(text, "jaxlib.plugin_support", "jaxlib")


def fixed_module(text: str | None = None):
    from .transform import PLUGIN_SUPPORT  # libcst: only here

    return module_from(PLUGIN_SUPPORT.rewrite(text if text is not None else installed_source()).source)


@contextlib.contextmanager
def dummy_plugin(major: int = 10, version: str | None = PLUGIN_VERSION):
    """`jax_rocm<major>_plugin` importable for the duration, then gone."""
    name = f"jax_rocm{major}_plugin"
    with tempfile.TemporaryDirectory(prefix="fixmono-rocm-plugin-") as tmp:
        package = Path(tmp) / name
        package.mkdir()
        (package / "__init__.py").write_text("")
        for sub in ("rocm_plugin_extension", "_linalg", "_solver"):
            (package / f"{sub}.py").write_text(f"FOUND = {name!r}\n")
        if version is not None:
            (package / "version.py").write_text(f"__version__ = {version!r}\n")
        sys.path.insert(0, tmp)
        importlib.invalidate_caches()
        try:
            yield name
        finally:
            sys.path.remove(tmp)
            for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                del sys.modules[key]
            importlib.invalidate_caches()


def finds(module, major: int = 10, version: str | None = PLUGIN_VERSION) -> dict:
    """What `module.import_from_plugin("rocm", sub)` returns with the dummy
    plugin installed, for the submodules jaxlib's GPU modules ask for."""
    import warnings

    with dummy_plugin(major, version) as name, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = {sub: getattr(module.import_from_plugin("rocm", sub), "FOUND", None)
                 for sub in ("rocm_plugin_extension", "_linalg", "_solver")}
    return {"plugin": name, "version": version, "found": found, "right": all(v == name for v in found.values()),
            "warnings": [str(w.message) for w in caught]}
