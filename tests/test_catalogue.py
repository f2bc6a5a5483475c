"""The whole catalogue, per upstream, on trees holding every fixture its fixes
declare (Fixture on each FileChange; fixmono.testing.catalogue_tree): two
runs give byte-identical series; with the series applied (git am), every fix
reports already-applied."""
import json
import shutil

import pytest

from fixmono.model.errors import FixtureUnavailable
from fixmono.model.projects import PROJECTS as PROJECTS_BY_NAME, runs_on
from fixmono.model.registry import discover
from fixmono.testing import catalogue_tree, for_fix, git, make_patch, make_repo

PROJECTS = [for_fix([f.id for f in discover() if runs_on(f.upstream, PROJECTS_BY_NAME[project])], project, id=project)
            for project in sorted({f.upstream for f in discover()})]


def check_catalogue(tmp_path, project: str) -> None:
    try:
        tree = catalogue_tree(project)
    except FixtureUnavailable as err:
        pytest.skip(str(err))
    repo = make_repo(tmp_path / project, tree)
    outs = []
    for name in ("o1", "o2"):
        run = make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / name), "--json")
        assert run.returncode == 0, run.stderr
        outs.append({p.name: p.read_bytes() for p in (tmp_path / name).iterdir()})
        statuses = {r["fix"]: r["status"] for r in json.loads(run.stdout)["runs"][0]["results"]}
        assert set(statuses.values()) == {"applied"}, statuses
    assert outs[0] == outs[1]
    clone = tmp_path / "applied"
    shutil.copytree(repo, clone)
    series = (tmp_path / "o1" / "series").read_text().split()
    git(clone, "am", *(str(tmp_path / "o1" / name) for name in series))
    again = make_patch("--all", "--upstream", str(clone), "--check", "--json")
    statuses = {r["fix"]: r["status"] for r in json.loads(again.stdout)["runs"][0]["results"]}
    assert set(statuses.values()) == {"already-applied"}, statuses
    assert set(statuses) == {f.id for f in discover() if runs_on(f.upstream, PROJECTS_BY_NAME[project])}


@pytest.mark.parametrize("project", PROJECTS)
def test_deterministic_then_idempotent(tmp_path, project):
    check_catalogue(tmp_path, project)


@pytest.mark.catalogue
def test_every_fix_declares_a_fixture_for_every_file():
    missing = [f"{fix.id}: {c.path}" for fix in discover() for c in fix.changes if c.fixture is None]
    assert missing == []
