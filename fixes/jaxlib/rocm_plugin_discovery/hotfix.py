"""Runtime form: jaxlib.plugin_support's `import_from_plugin` and
`check_plugin_version` replaced by the transformed ones (plus the helper).
jaxlib's gpu_* modules bind import_from_plugin when they are imported (with
jax's first GPU use): enable() before importing jax. The PJRT shim
(jax_plugins.xla_rocm<N>) is not covered: patch the wheel (tools/patch_wheel)
or install a pjrt that derives its major (ROCm/jax#822)."""
from __future__ import annotations

import sys

REPLACED = ("import_from_plugin", "check_plugin_version", "maybe_import_plugin_submodule", "_plugin_module_names")
_saved: dict | None = None


def enable() -> str:
    global _saved
    try:
        from . import plugin
        import jaxlib.plugin_support as module
    except ImportError as err:
        return f"jaxlib is not importable here ({err}); nothing to do"
    if _saved is not None:
        return "already enabled"
    from .transform import PLUGIN_SUPPORT

    if PLUGIN_SUPPORT.rewrite(plugin.installed_source()).changed == 0:
        return "this jaxlib finds jax_rocm10_plugin already; nothing to do"
    bound = sorted(m for m in sys.modules if m.startswith("jaxlib.gpu_"))
    if bound:
        return f"not enabled: {', '.join(bound)} already imported the old import_from_plugin; enable before jax"
    fixed = plugin.fixed_module()
    _saved = {name: getattr(module, name, None) for name in REPLACED}
    for name in REPLACED:
        setattr(module, name, getattr(fixed, name))
    return "enabled: jaxlib finds installed jax_rocm<N>_plugin packages (the PJRT shim is not covered)"


def disable() -> str:
    global _saved
    if _saved is None:
        return "not enabled; nothing to do"
    import jaxlib.plugin_support as module

    for name, value in _saved.items():
        if value is None:
            delattr(module, name)
        else:
            setattr(module, name, value)
    _saved = None
    return "disabled: the installed plugin_support is back"
