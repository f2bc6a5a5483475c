"""drift_matrix --run on published releases (tag: network): each release in
its own environment built from PyPI's wheels beside this interpreter, the
fix's reproducer run there, its verdict set against make_patch's status.
The fixes are the test's own (made up, in a copy of the tree): each "affects"
the releases of its project before a version, its transformation marks the
version line of the release's file, its reproducer reads the release it runs
with. On an affected and a fixed transformers, an affected jaxlib, and a jax
release that needs a newer Python than this one (cannot-run-here with pip's
reason). (Ctrl-C while a reproducer runs, on a throwaway fix: test_behaviour.py.)"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import tree_env, tree_with_fixes

pytestmark = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads wheels (tag: network)")

# {fix id: (project, its folder's name, the file it marks, the release that no longer has the bug)}
FIXES = {"transformers-made-up-release": ("transformers", "src/transformers/__init__.py", "5.10.0"),
         "jaxlib-made-up-release": ("jaxlib", "jaxlib/version.py", "0.10.0"),
         "jax-made-up-release": ("jax", "jax/version.py", "0.12.0")}
TRANSFORMERS, JAXLIB, JAX = FIXES

TRANSFORM = '''\
    import re

    from packaging.version import Version

    from fixmono.model.errors import NotApplicable
    from fixmono.model.fix import Rewrite

    LINE = re.compile(r'^_{0,2}version(?:_{2})? = "([^"]+)"(  # made up)?$', re.M)


    class BeforeRelease:
        """A made-up fix: the releases before `fixed` have the bug; the fix marks their version line."""
        engine = "python"

        def __init__(self, fixed):
            self.fixed, self.description = Version(fixed), f"mark the version line before {fixed}"

        def rewrite(self, source):
            line = LINE.search(source)
            if line is None:
                raise NotApplicable("no version line")
            if line.group(2) or Version(line.group(1)) >= self.fixed:
                return Rewrite(source, 0, 1)
            return Rewrite(source[:line.end()] + "  # made up" + source[line.end():], 1, 0)
    '''
FIX_PY = '''\
    from fixmono.model import Dep3, FileChange, Fix
    from fixmono.model.fix import lazy

    from .transform import BeforeRelease

    FIX = Fix(id="{fix_id}", title="a made-up fix of {project} before {fixed}", upstream="{project}",
              description="Written by tests/test_behaviour_wheels.py.", dep3=Dep3(origin="vendor", last_update="2026-11-27"),
              backends=("cpu",), changes=(FileChange("{path}", BeforeRelease("{fixed}"), sites=1),),
              repro_needs="cpu", reproduce=lazy(f"{{__package__}}.repro:reproduce"))
    '''
REPRO = '''\
    from importlib.metadata import version

    from packaging.version import Version

    from fixmono.model.fix import ReproResult, Verdict
    from fixmono.runtime.repro import cli


    def reproduce():
        found = version("{project}")
        verdict = Verdict.REPRODUCED if Version(found) < Version("{fixed}") else Verdict.NOT_REPRODUCED
        return ReproResult(verdict, f"{project} {{found}}", {{"version": found}})


    def main(argv=None):
        return cli(reproduce, "made up", argv)
    '''


def folders() -> dict[str, dict[str, str]]:
    out = {}
    for fix_id, (project, path, fixed) in FIXES.items():
        fill = {"fix_id": fix_id, "project": project, "path": path, "fixed": fixed}
        out[f"fixes/{project}/made_up_release"] = {
            "__init__.py": "", "transform.py": textwrap.dedent(TRANSFORM),
            "fix.py": textwrap.dedent(FIX_PY).format(**fill), "repro.py": textwrap.dedent(REPRO).format(**fill)}
    return out


def drift(root: Path, *args: str, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fixmono.cli.drift", *args], capture_output=True, text=True,
                          env=tree_env(root, FIXMONO_CACHE=str(cache)), timeout=1800)


def test_sample_of_the_behavioural_matrix(tmp_path_factory):
    root = tree_with_fixes(tmp_path_factory.mktemp("tree") / "repo", folders())
    cache = tmp_path_factory.mktemp("cache")
    args = ["--fix", TRANSFORMERS, "--fix", JAXLIB, "--fix", JAX, "--versions", "transformers=5.8.0,5.18.0",
            "--versions", "jaxlib=0.9.1", "--versions", "jax=0.11.2", "--run", "--jobs", "2", "--json"]
    proc = drift(root, *args, cache=cache)
    assert proc.returncode == 0, proc.stderr
    runs = {fix: {r["version"]: r for r in rs} for fix, rs in json.loads(proc.stdout)["runs"].items()}
    old, new = runs[TRANSFORMERS]["5.8.0"], runs[TRANSFORMERS]["5.18.0"]
    assert (old["static"], old["verdict"]) == ("applied", "reproduced")
    assert old["detail"] == "transformers 5.8.0" and old["figures"] == {"version": "5.8.0"}  # that release's
    assert (new["static"], new["verdict"]) == ("already-applied", "not-reproduced")
    assert runs[JAXLIB]["0.9.1"]["verdict"] == "reproduced" and runs[JAXLIB]["0.9.1"]["detail"] == "jaxlib 0.9.1"
    jax_run = runs[JAX]["0.11.2"]
    if sys.version_info < (3, 12):  # jax 0.11 needs Python 3.12: said, not guessed
        assert jax_run["verdict"] == "cannot-run-here" and "different python version" in jax_run["detail"]
    assert not any(r["finding"] for rs in runs.values() for r in rs.values())

    records = sorted(cache.glob("envs/*/*/env.json"))
    assert len(records) == 3  # transformers 5.8.0, 5.18.0, jaxlib 0.9.1
    built = {p: p.stat().st_mtime_ns for p in records}
    again = drift(root, *args, cache=cache)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["runs"].keys() == runs.keys()
    assert {p: p.stat().st_mtime_ns for p in records} == built  # reused, not rebuilt
    assert not list(cache.glob("envs/*/.building-*"))
