"""status remembers what it found (analysis/remembered_status.py) and checks
the rest on every core: a warm status says what a cold one said and loads no
fix (the catalogue as listed: sources/catalogue.py); an installed file that
changed, or an entry that is damaged, is checked again; the forked checkers
answer as one process does; status does not transform a result a second
time (the fixed-point check is make-patch's). Nothing here is timed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from fixmono.analysis import remembered_status, status
from fixmono.apply.contract import apply_change
from fixmono.model.fix import FileChange, Rewrite
from fixmono.model.outcome import Status
from fixmono.model.projects import PROJECTS
from fixmono.model.registry import discover
from fixmono.sources.catalogue import listed
from fixmono.sources.installed import installed_path
from fixmono.testing import REPO_ROOT

MOE_FIX = "transformers-pin-moe-routing"
SOME = (MOE_FIX, "transformers-moe-aux-loss-world-size", "transformers-falcon-packed-mask")
PROBE = """
import json, sys
from fixmono.analysis.status import collect
rows = collect()["fixes"]
print(json.dumps({"rows": rows, "libcst": "libcst" in sys.modules,
                  "fixes": sorted(m for m in sys.modules if m.startswith("fixmono.fixes.") and m.endswith(".fix"))}))
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FIXMONO_REWRITE_CACHE", raising=False)
    return tmp_path / "cache"


def chosen(*ids: str) -> list:
    return [f for f in listed() if f.id in ids]


def test_the_listing_is_the_catalogue(cache):
    assert [(f.id, f.upstream, tuple(f.backends), tuple(c.path for c in f.changes), f.package) for f in listed()] \
        == [(f.id, f.upstream, tuple(f.backends), tuple(c.path for c in f.changes), f.package) for f in discover()]
    assert listed()[0].load().id == discover()[0].id


def test_a_warm_status_says_the_same_and_loads_no_fix(cache):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"), "FIXMONO_CACHE": str(cache)}
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    cold, warm = runs
    assert warm["rows"] == cold["rows"]
    assert cold["fixes"] and (warm["libcst"], warm["fixes"]) == (False, [])


def site_copy(site, fix_id: str = MOE_FIX, fixed: bool = False) -> None:
    """The fix's installed files copied under `site`, with the fix applied where `fixed`."""
    (fix,) = [f for f in discover() if f.id == fix_id]
    project = PROJECTS[fix.upstream]
    for change in fix.changes:
        original = installed_path(project, change.path)
        copy = installed_path(project, change.path, site=site)
        copy.parent.mkdir(parents=True, exist_ok=True)
        if fixed:
            copy.write_text(apply_change(change, original.read_text(encoding="utf-8")).new_text, encoding="utf-8")
        else:
            shutil.copyfile(original, copy)


def state(site) -> str:
    (row,) = status.collect(fixes=chosen(MOE_FIX), site=site)["fixes"]
    return row["installed_files"]


def entries(cache) -> list:
    return sorted((cache / "status").rglob("*.json"))


def test_an_installed_file_that_changed_is_checked_again(cache, tmp_path, monkeypatch):
    checked = []
    real = remembered_status.keep
    monkeypatch.setattr(remembered_status, "keep", lambda *args: (checked.append(1), real(*args)))
    site = tmp_path / "site"
    site_copy(site)
    assert (state(site), state(site), len(checked)) == (status.NOT_FIXED, status.NOT_FIXED, 1)  # once
    site_copy(site, fixed=True)
    assert state(site) == status.FIXED and len(checked) == 2  # not the unpatched files' answer
    site_copy(site)
    assert state(site) == status.NOT_FIXED and len(checked) == 3 and len(entries(cache)) == 1


@pytest.mark.parametrize("damage", ["another status", "not json"])
def test_a_damaged_entry_is_checked_again(cache, tmp_path, damage):
    site = tmp_path / "site"
    site_copy(site)
    assert state(site) == status.NOT_FIXED
    (entry,) = entries(cache)
    if damage == "not json":
        entry.write_text("{")
    else:
        data = json.loads(entry.read_text())
        data["status"] = "already-applied"
        entry.write_text(json.dumps(data))
    assert state(site) == status.NOT_FIXED
    assert json.loads(entry.read_text())["status"] == "applied"  # the answer computed again, kept


def test_off_with_the_rewrite_cache(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("FIXMONO_REWRITE_CACHE", "off")
    site = tmp_path / "site"
    site_copy(site)
    assert state(site) == state(site) == status.NOT_FIXED and not entries(cache)


def test_the_forked_checkers_answer_as_one_process_does(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    pids.mkdir()
    real = status.check_installed

    def noted(fix, site, env, compute=True):
        if compute:
            (pids / str(os.getpid())).touch()
        return real(fix, site, env, compute)

    monkeypatch.setattr(status, "check_installed", noted)
    monkeypatch.delenv("FIXMONO_REWRITE_CACHE", raising=False)
    answers = {}
    for cores in (1, 3):
        for pid in pids.iterdir():  # those of this run only
            pid.unlink()
        monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path / f"cache-{cores}"))
        monkeypatch.setattr(remembered_status, "available_cores", lambda cores=cores: cores)
        answers[cores] = status.collect(fixes=chosen(*SOME))["fixes"]
    assert answers[1] == answers[3] and len(answers[1]) == len(SOME)
    checkers = {int(p.name) for p in pids.iterdir()}
    assert len(checkers) >= 2 and os.getpid() not in checkers  # forked processes did the checking


class Appends:
    """A transformation that is no fixed point: each run adds one more line."""

    engine, description = "python", "append a line"

    def rewrite(self, source: str) -> Rewrite:
        return Rewrite(source + "x = 1\n", 1, 0)


def test_status_transforms_a_result_once_make_patch_twice():
    """The fixed-point check (the result transformed again) is make-patch's: status
    writes nothing and asks only whether the fix is there."""
    change = FileChange("pkg/a.py", Appends())
    assert "not idempotent" in apply_change(change, "y = 2\n").detail
    assert apply_change(change, "y = 2\n", fixed_point=False).status is Status.APPLIED
