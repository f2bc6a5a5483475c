"""jax-ml/jax#39634 (ROCm/jax#822-825, ROCm/TheRock#7067) as libcst
transformations. jaxlib finds its GPU kernels (_linalg, _solver, ...) in a
plugin package named after the ROCm major, `jax_rocm<N>_plugin`, from a list
it was released with (`jax_rocm7_plugin`, `jax_rocm60_plugin`): a plugin for a
later ROCm major is silently not found, and every FFI handler it would register
is missing (`No FFI handler registered for hipsolver_getrf_ffi`).

jaxlib/plugin_support.py, two sites:
- `import_from_plugin`: the candidate names come from `_plugin_module_names`
  (added before it): for "rocm", every installed `jax_rocm<N>_plugin`,
  newest major first, then the list;
- `check_plugin_version`: the ROCm carve-out from the strict version check
  matches the `jax_rocm<N>_plugin` pattern, not only the listed names.
Presence: a pattern-based discovery (0.11.1), or `jax_rocm10_plugin` in the
list with no discovery (0.11.2+: upstream lists majors and discovers none).

jax_plugins/rocm/__init__.py (the PJRT shim; in checkouts, not in the jaxlib
wheel): the `for pkg_name in [...]` loop tries first the plugin of the shim's
own ROCm major, read from its package name (`jax_plugins.xla_rocm10`).
"""
from __future__ import annotations

import libcst as cst

from fixmono.engines.python import PythonTransform, SiteTransformer, code, find_all

NAMES = "_PLUGIN_MODULE_NAMES"
HELPER = "_plugin_module_names"
PATTERN = r"jax_rocm(\d+)_plugin"

_HELPER_SOURCE = f'''def {HELPER}(plugin_name: str) -> list[str]:
  """The plugin packages to try for `plugin_name`. For "rocm", every installed
  jax_rocm<N>_plugin comes first, newest major first: its name carries the
  ROCm major, so a later ROCm's plugin is not in the list above (jax-ml/jax#39634).
  Scanned at each call (a few per process), so a plugin on sys.path is seen."""
  import pkgutil

  names = list({NAMES}[plugin_name])
  if plugin_name == "rocm":
    majors = sorted((int(m.group(1)) for m in map(
        re.compile(r"{PATTERN}").fullmatch, (i.name for i in pkgutil.iter_modules())) if m), reverse=True)
    names = [n for n in (f"jax_rocm{{major}}_plugin" for major in majors) if n not in names] + names
  return names
'''



def rocm_list(module: cst.Module) -> list[str] | None:
    """The string names of `_PLUGIN_MODULE_NAMES["rocm"]`."""
    for d in find_all(module, cst.Dict):
        for e in d.elements:
            if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) \
                    and e.key.evaluated_value == "rocm" and isinstance(e.value, cst.List):
                return [x.value.evaluated_value for x in e.value.elements if isinstance(x.value, cst.SimpleString)]
    return None


def discovers(node: cst.CSTNode) -> bool:
    """A pattern over installed modules: the fix's own or 0.11.1's."""
    text = code(node)
    return "iter_modules" in text and "jax_rocm" in text


class PluginSupport(SiteTransformer):
    mentioning = None  # it reads the whole module (discovery helpers, the plugin-name list, taken names)

    def __init__(self) -> None:
        super().__init__()
        self._module: cst.Module | None = None
        self._names_site: cst.Subscript | None = None
        self._carveout: cst.Assign | None = None

    def visit_Module(self, node: cst.Module) -> bool:
        self._module = node
        return True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        if self.qualname == "import_from_plugin":
            self.anchors += 1
            self._decide_discovery(node)
        elif self.qualname == "check_plugin_version":
            self._decide_carveout(node)
        return True

    def _listed_rocm10(self) -> bool:
        return "jax_rocm10_plugin" in (rocm_list(self._module) or [])

    def _decide_discovery(self, function: cst.FunctionDef) -> None:
        if discovers(self._module):
            self.found("installed jax_rocm<N>_plugin packages discovered")
            return
        if self._listed_rocm10():
            self.found("jax_rocm10_plugin listed (no discovery: upstream's choice since 0.11.2)")
            return
        sites = [s for s in find_all(function, cst.Subscript)
                 if code(s.value) == NAMES and code(s.slice[0].slice.value) == "plugin_name"]
        if len(sites) != 1 or rocm_list(self._module) is None:
            self.problems.append(f"import_from_plugin: expected one {NAMES}[plugin_name] and a \"rocm\" list, "
                                 f"found {len(sites)}")
            return
        if any(n.value == HELPER for n in find_all(self._module, cst.Name)):
            self.problems.append(f"the name {HELPER} is taken")
            return
        self._names_site = sites[0]
        self.change("installed jax_rocm<N>_plugin packages discovered")

    def _decide_carveout(self, function: cst.FunctionDef) -> None:
        text = code(function)
        if "jax_rocm" in text and ("\\d" in text or "RE" in text):  # a pattern, written here or named
            self.found("ROCm version carve-out by pattern")
            return
        if self._listed_rocm10():
            self.found("ROCm version carve-out covers jax_rocm10_plugin (listed)")
            return
        assigns = [a for a in find_all(function, cst.Assign)
                   if isinstance(a.value, cst.Call) and code(a.value.func) == "any" and '"rocm"' in code(a.value)]
        if len(assigns) != 1:
            self.problems.append(f"check_plugin_version: expected one `... = any(... {NAMES}.get(\"rocm\") ...)`, "
                                 f"found {len(assigns)}")
            return
        self._carveout = assigns[0]
        self.change("ROCm version carve-out by pattern")

    def leave_Subscript(self, original, updated):
        if original is self._names_site:
            return cst.parse_expression(f"{HELPER}(plugin_name)")
        return updated

    def leave_Assign(self, original, updated):
        if original is self._carveout:
            pattern = cst.parse_expression(f're.search(r"{PATTERN}", plugin_name) is not None')
            return updated.with_changes(value=cst.BooleanOperation(updated.value, cst.Or(), pattern))
        return updated

    def leave_Module(self, original, updated):
        if self._names_site is None:
            return updated
        helper = cst.parse_statement(_HELPER_SOURCE)
        body = list(updated.body)
        at = next(i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == "import_from_plugin")
        body.insert(at, helper.with_changes(leading_lines=body[at].leading_lines))
        body[at + 1] = body[at + 1].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        return updated.with_changes(body=body)


class PjrtShim(SiteTransformer):
    """`for pkg_name in [...]:` over plugin names: own ROCm major first."""

    mentioning = None  # its site is a module-level loop: nothing to set aside

    def __init__(self) -> None:
        super().__init__()
        self._loop: cst.For | None = None

    def visit_Module(self, node: cst.Module) -> bool:
        loops = [f for f in node.body if isinstance(f, cst.For) and isinstance(f.iter, cst.List)
                 and "jax_rocm" in code(f.iter)]
        named = "_pkg_names" in code(node)
        if not loops and not named:
            return False
        self.anchors += 1
        derived = [s for s in find_all(node, cst.SimpleStatementLine)
                   if "__package__" in code(s) and "'xla_rocm'" in code(s).replace('"', "'")]
        if derived:  # the major read from the package name (ROCm/jax#822, jax 0.11.1)
            self.found("own ROCm major's plugin first")
        elif len(loops) != 1 or named:
            self.problems.append(f"expected one `for pkg_name in [...plugin names...]:`, found {len(loops)}")
        else:
            self._loop = loops[0]
            self.change("own ROCm major's plugin first")
        return False

    def leave_Module(self, original, updated):
        if self._loop is None:
            return updated
        body = list(updated.body)
        at = body.index(self._loop)
        lead = cst.parse_module(
            f"_pkg_names = {code(self._loop.iter)}\n"
            "# The wheel installs this package as jax_plugins.xla_rocm<N>: try jax_rocm<N>_plugin first, which\n"
            "# the list above cannot know for a later ROCm major (jax-ml/jax#39634). Not digits: a checkout.\n"
            "_major = (__package__ or '').rpartition('xla_rocm')[2]\n"
            "if _major.isdigit() and f'jax_rocm{_major}_plugin' not in _pkg_names:\n"
            "  _pkg_names.insert(0, f'jax_rocm{_major}_plugin')\n").body
        lead = [lead[0].with_changes(leading_lines=self._loop.leading_lines), *lead[1:]]
        loop = body[at].with_changes(iter=cst.Name("_pkg_names"), leading_lines=[])
        return updated.with_changes(body=body[:at] + lead + [loop] + body[at + 1:])


PLUGIN_SUPPORT = PythonTransform(PluginSupport, description="discover jax_rocm<N>_plugin packages",
                                 anchor="import_from_plugin")
PJRT_SHIM = PythonTransform(PjrtShim, description="try the shim's own ROCm major's plugin first",
                            anchor="loop over ROCm plugin package names")
