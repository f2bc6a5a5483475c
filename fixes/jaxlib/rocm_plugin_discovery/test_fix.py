"""The jaxlib fix on the installed jaxlib (0.10.2, affected; its file read
from site-packages at test time), on the CPU: the transformation, the
reproducer both ways, why both sites are needed, the shim, --validate and
the hot-fix."""
import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jaxlib")

from fixmono.runtime.child import child_env
from fixmono.apply.contract import apply_change  # noqa: E402
from fixmono.model.outcome import Status
from fixmono.fixes.jaxlib.rocm_plugin_discovery import plugin, repro  # noqa: E402
from fixmono.fixes.jaxlib.rocm_plugin_discovery.fix import FIX  # noqa: E402
from fixmono.fixes.jaxlib.rocm_plugin_discovery.transform import PJRT_SHIM, PLUGIN_SUPPORT  # noqa: E402
from fixmono.fixes.jaxlib.rocm_plugin_discovery.validate import check  # noqa: E402

HERE = Path(__file__).parent
REPO = HERE.parents[2]


def test_installed_jaxlib_gets_the_helper_and_two_edits():
    source = plugin.installed_source()
    outcome = apply_change(FIX.changes[0], source)
    assert outcome.status is Status.APPLIED, outcome.detail
    diff = [d for d in difflib.ndiff(source.splitlines(), outcome.new_text.splitlines()) if d[:1] in "+-"]
    assert [d[2:].strip() for d in diff if d.startswith("-")] == ['[f".{plugin_name}"] + _PLUGIN_MODULE_NAMES[plugin_name],',
                                                                  ")"]
    added = "\n".join(d[2:] for d in diff if d.startswith("+"))
    assert "def _plugin_module_names(plugin_name: str)" in added and "_plugin_module_names(plugin_name)," in added


def test_reproducer_is_two_sided_on_the_cpu():
    result = repro.reproduce()
    assert result.verdict.value == "reproduced", result.summary
    assert set(result.details["unpatched"]["found"].values()) == {None}
    assert result.details["patched"]["right"]


def test_both_sites_are_needed_and_the_newest_major_wins():
    """Discovery alone: the plugin's own version (0.11.1 against jaxlib
    0.10.2) fails the strict check, with a warning. Two majors installed: the
    newest is taken."""
    source = plugin.installed_source()
    fixed = PLUGIN_SUPPORT.rewrite(source).source
    discovery_only = fixed.replace(' or re.search(r"jax_rocm(\\d+)_plugin", plugin_name) is not None', "")
    assert discovery_only != fixed
    half = plugin.finds(plugin.module_from(discovery_only))
    assert not half["right"] and any("not be used" in w or "compatible" in w for w in half["warnings"])
    assert plugin.finds(plugin.module_from(discovery_only), version="0.10.2")["right"]  # same version: fine
    module = plugin.module_from(fixed)
    with plugin.dummy_plugin(10), plugin.dummy_plugin(12, version=None):
        assert getattr(module.import_from_plugin("rocm", "_linalg"), "FOUND", None) == "jax_rocm12_plugin"
    assert module.import_from_plugin("rocm", "_linalg") is None  # nothing installed: nothing found
    assert module.import_from_plugin("cuda", "_linalg") is None  # cuda untouched


def test_shim_tries_its_own_major_first(tmp_path):
    """The transformed shim, installed as jax_plugins.xla_rocm10 next to a
    dummy jax_rocm10_plugin, imports that plugin's extension."""
    shim = PJRT_SHIM.rewrite((HERE / "fixtures" / "pjrt_shim.py").read_text()).source
    package = tmp_path / "jax_plugins" / "xla_rocm10"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(shim)
    plugin_dir = tmp_path / "jax_rocm10_plugin"
    plugin_dir.mkdir()
    (plugin_dir / "__init__.py").write_text("")
    (plugin_dir / "rocm_plugin_extension.py").write_text("FOUND = 'jax_rocm10_plugin'\n")
    code = "import jax_plugins.xla_rocm10 as s; print(s.rocm_plugin_extension.FOUND)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.stdout.strip() == "jax_rocm10_plugin", out.stderr


def test_validate_passes_the_fix_and_rejects_the_unfixed_text():
    source = plugin.installed_source()
    fixed = apply_change(FIX.changes[0], source).new_text
    assert check({plugin.TARGET: source}, {plugin.TARGET: fixed}) is None
    assert "jax_rocm10_plugin not found" in check({plugin.TARGET: source}, {plugin.TARGET: source})


def test_hotfix_in_a_fresh_process_before_jax_and_refused_after():
    code = ("from fixmono.fixes.jaxlib.rocm_plugin_discovery import hotfix, plugin\n"
            "import jaxlib.plugin_support as ps\n"
            "print(hotfix.enable())\n"
            "print(plugin.finds(ps)['right'])\n"
            "print(hotfix.disable())\n"
            "print(plugin.finds(ps)['right'])\n"
            "import jax, jax.numpy\n"
            "import jaxlib.gpu_linalg\n"
            "print(hotfix.enable())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env())
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("enabled") and lines[1] == "True", out.stderr
    assert lines[2].startswith("disabled") and lines[3] == "False"
    assert lines[4].startswith("not enabled: jaxlib.gpu_")
