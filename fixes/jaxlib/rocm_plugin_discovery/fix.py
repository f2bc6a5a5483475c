"""jaxlib: the ROCm 10 plugin (jax_rocm10_plugin) is not found
(jax-ml/jax#39634, ROCm/jax#822-825, ROCm/TheRock#7067).

Declaration only: transform.py, plugin.py (the code run for real), repro.py,
hotfix.py, validate.py.
"""
from fixmono.model.fix import Case, Dep3, FileChange, Fix, Fixture, HotFix, lazy

from . import hotfix
from .plugin import SHIM, TARGET
from .transform import _HELPER_SOURCE, PJRT_SHIM, PLUGIN_SUPPORT

_SUPPORT = '''import re

_PLUGIN_MODULE_NAMES = {{"cuda": ["jax_cuda12_plugin"], "rocm": [{rocm}]}}
{helper}
def import_from_plugin(plugin_name, submodule_name):
  return maybe_import_plugin_submodule([f".{{plugin_name}}"] + {names}, submodule_name)


def check_plugin_version(plugin_name, jaxlib_version, plugin_version):
  is_rocm_plugin = any(
      r in plugin_name for r in _PLUGIN_MODULE_NAMES.get("rocm", [])
  ){carveout}
  return is_rocm_plugin or jaxlib_version == plugin_version
'''
_UNFIXED = dict(rocm='"jax_rocm7_plugin"', helper="", names="_PLUGIN_MODULE_NAMES[plugin_name]", carveout="")


def _support(**parts) -> str:
    return _SUPPORT.format(**{**_UNFIXED, **parts})


def _fixed_support() -> str:
    return PLUGIN_SUPPORT.rewrite(_support()).source  # the helper's text is the transformation's own


_SHIM = "import importlib\n\nfor pkg_name in [{names}]:\n  pass\n"

CASES = (
    Case("plugin names from a fixed list (jaxlib 0.9.1-0.11.0)", path=TARGET, before=_support(),
         after=_support(helper="\n" + _HELPER_SOURCE + "\n", names="_plugin_module_names(plugin_name)",
                        carveout=' or re.search(r"jax_rocm(\\d+)_plugin", plugin_name) is not None')),
    Case("jax_rocm10_plugin listed, no discovery (jaxlib 0.11.2+)", expect="already-applied", path=TARGET,
         before=_support(rocm='"jax_rocm10_plugin", "jax_rocm7_plugin"')),
    Case("already fixed by this transformation", expect="already-applied", path=TARGET, before=_fixed_support()),
    Case("no ROCm carve-out in the version check (jaxlib 0.9.0)", expect="failed", path=TARGET,
         before=_support().replace('  is_rocm_plugin = any(\n      r in plugin_name for r in '
                                   '_PLUGIN_MODULE_NAMES.get("rocm", [])\n  )\n', '  is_rocm_plugin = False\n')),
    Case("no import_from_plugin (jaxlib before plugins)", expect="not-applicable", path=TARGET,
         before="def cuda_path():\n  return None\n"),
    Case("shim: fixed list of plugin packages", path=SHIM, before=_SHIM.format(names="'jax_rocm7_plugin', 'jaxlib.rocm'"),
         after="import importlib\n\n_pkg_names = ['jax_rocm7_plugin', 'jaxlib.rocm']\n"
               "# The wheel installs this package as jax_plugins.xla_rocm<N>: try jax_rocm<N>_plugin first, which\n"
               "# the list above cannot know for a later ROCm major (jax-ml/jax#39634). Not digits: a checkout.\n"
               "_major = (__package__ or '').rpartition('xla_rocm')[2]\n"
               "if _major.isdigit() and f'jax_rocm{_major}_plugin' not in _pkg_names:\n"
               "  _pkg_names.insert(0, f'jax_rocm{_major}_plugin')\nfor pkg_name in _pkg_names:\n  pass\n"),
    Case("shim: major already derived from the package (ROCm/jax#822)", expect="already-applied", path=SHIM,
         before="_pkg_names = ['jax_rocm10_plugin']\n_rocm_major = (__package__ or '').rpartition('xla_rocm')[2]\n"
                "for pkg_name in _pkg_names:\n  pass\n"),
)

FIX = Fix(
    id="jaxlib-rocm-plugin-discovery",
    title="jaxlib: find installed jax_rocm<N>_plugin packages (ROCm 10 and later majors)",
    upstream="jaxlib",
    description="""\
jaxlib loads its ROCm GPU kernels (linalg, solver, prng, ...) from a plugin
package named after the ROCm major, trying names from a list it was released
with: jax_rocm7_plugin, jax_rocm60_plugin. The plugin for ROCm 10,
jax_rocm10_plugin, is not in that list in jaxlib 0.9.1-0.11.0, so it is
silently not found and none of its FFI handlers is registered ("No FFI
handler registered for hipsolver_getrf_ffi"); were it found, the strict
version check would refuse it too, since only listed names are exempt. Try
every installed jax_rocm<N>_plugin first, newest major first, exempt the
pattern from the version check, and let the PJRT shim try its own major's
plugin first.""",
    dep3=Dep3(
        origin="backport, https://github.com/jax-ml/jax/pull/39634",
        bug="https://github.com/ROCm/TheRock/issues/7067",
        forwarded="not-needed",
        applied_upstream="https://github.com/jax-ml/jax/pull/39634",
        last_update="2026-11-23",
    ),
    backends=("rocm",),
    changes=(FileChange(TARGET, PLUGIN_SUPPORT, sites=2,
                        fixture=Fixture("fixtures/plugin_support.py",
                                        mutate=("import_from_plugin", "check_plugin_version"), edit="replace")),
             FileChange(SHIM, PJRT_SHIM, sites=1, optional=True,
                        fixture=Fixture("fixtures/pjrt_shim.py", edit="replace"))),
    references=("https://github.com/jax-ml/jax/pull/39634", "https://github.com/ROCm/jax/pull/822",
                "https://github.com/ROCm/TheRock/issues/7067", "https://github.com/ROCm/TheRock/pull/7084"),
    cases=CASES,
    hotfix=HotFix(apply=hotfix.enable, remove=hotfix.disable, trigger="jaxlib.plugin_support"),
    reproduce=lazy(f"{__package__}.repro:reproduce"),
    repro_needs="cpu",
    validate=lazy(f"{__package__}.validate:check"),
)
