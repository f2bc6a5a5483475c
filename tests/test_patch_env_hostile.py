"""`fixmono patch-env` against a hostile environment: whoever can write a venv
(its links, its journal, its store, its RECORD) must not make patch-env write
outside it, restore garbage, lose originals, or run over another run.

Each class of attack from issue 33 with more cases of the same shape. The
venvs are real, with our own `transformers` wheel installed by pip
(tests/test_patch_env.make_env); the "other environment" is a second such venv.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixmono.output.journal import JOURNAL_DIR, PAUSE_POINTS
from fixmono.testing import REPO_ROOT
from tests.test_patch_env import AFFECTED, MOE, SENTINEL, fixed, fixmono, make_env, record_row, refused, \
    sha256_field, tree


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder` (links as links), bytecode included."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = sha(p.read_bytes())
    return out


def patch(python: Path, *args: str) -> subprocess.CompletedProcess:
    return fixmono("patch-env", "--python", str(python), *args)


def journal_of(site: Path) -> dict:
    return json.loads((site / JOURNAL_DIR / "journal.json").read_text())


def save_journal(site: Path, data: dict) -> None:
    (site / JOURNAL_DIR / "journal.json").write_text(json.dumps(data))


@pytest.fixture
def env(tmp_path):
    return make_env(tmp_path / "a", AFFECTED.before)


@pytest.fixture
def other(tmp_path):
    """A second environment: the place a link in the first one leads to."""
    return make_env(tmp_path / "b", AFFECTED.before)


# 1. Writes only inside the environment it was given ------------------------------------------------------------

def test_a_site_packages_that_is_a_link_into_another_venv_is_refused(env, other):
    (python, site), (_, elsewhere) = env, other
    before = snapshot(elsewhere)
    site.rename(site.with_name("site-packages.real"))
    site.symlink_to(elsewhere)
    refused(patch(python, SENTINEL), str(site), str(elsewhere), "outside the environment")
    assert snapshot(elsewhere) == before
    assert patch(other[0], SENTINEL).returncode == 0  # B patched by its own --python: A's undo must not undo it
    patched = snapshot(elsewhere)
    refused(patch(python, "--undo"), str(site), "outside the environment")
    assert snapshot(elsewhere) == patched


def test_a_package_folder_that_is_a_link_into_another_venv_is_refused(env, other):
    (python, site), (_, elsewhere) = env, other
    before = snapshot(elsewhere)
    integrations = site / "transformers" / "integrations"
    for p in integrations.rglob("*"):
        p.unlink() if p.is_file() else None
    for p in sorted(integrations.rglob("*"), reverse=True):
        p.rmdir()
    integrations.rmdir()
    integrations.symlink_to(elsewhere / "transformers" / "integrations")
    proc = patch(python, SENTINEL)
    refused(proc, str(integrations), "is a link to", str(elsewhere / "transformers" / "integrations"))
    proc = patch(python, "--all")  # --all skips it and says why
    assert proc.returncode == 0 and f"skipped  {SENTINEL}" in proc.stdout and "is a link to" in proc.stdout
    assert snapshot(elsewhere) == before


def test_a_linked_site_packages_never_completes_the_other_venvs_interrupted_run(env, other, tmp_path):
    """B has an interrupted patch-env (killed after its journal was written);
    A's site-packages is a link to B's: A's run is refused before it opens,
    locks, probes or completes anything there."""
    (python, site), (python_b, elsewhere) = env, other
    reached = tmp_path / "reached"
    run_b = subprocess.Popen([sys.executable, "-m", "fixmono", "patch-env", "--python", str(python_b), SENTINEL],
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"),
                                  "FIXMONO_PAUSE_AT": "env-journal-written", "FIXMONO_PAUSE_FILE": str(reached)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not reached.exists() and time.monotonic() < deadline and run_b.poll() is None:
        time.sleep(0.05)
    run_b.kill()
    run_b.wait()
    assert "pending" in journal_of(elsewhere)["files"][MOE]
    before = snapshot(elsewhere)
    site.rename(site.with_name("site-packages.real"))
    site.symlink_to(elsewhere)
    for args in ([SENTINEL], [SENTINEL, "--check"], [SENTINEL, "--force"]):
        refused(patch(python, *args), str(site), str(elsewhere), "outside the environment")
        assert snapshot(elsewhere) == before
    proc = patch(python, "--all")  # --all skips the fix and says why; B still untouched
    assert proc.returncode == 0 and "outside the environment" in proc.stdout, proc.stdout + proc.stderr
    assert snapshot(elsewhere) == before


def test_a_target_that_links_outside_is_refused(env, other):
    (python, site), (_, elsewhere) = env, other
    before = snapshot(elsewhere)
    (site / MOE).unlink()
    (site / MOE).symlink_to(elsewhere / MOE)
    refused(patch(python, SENTINEL, "--force"), str(site / MOE), str(elsewhere / MOE), "outside")
    assert snapshot(elsewhere) == before


def test_a_target_that_links_inside_the_site_is_patched_and_restored_as_the_same_link(env):
    python, site = env
    real = site / "transformers" / "integrations" / "moe_impl.py"
    real.write_bytes((site / MOE).read_bytes())
    (site / MOE).unlink()
    (site / MOE).symlink_to("moe_impl.py")
    before = snapshot(site)
    proc = patch(python, SENTINEL, "--force")  # RECORD names a regular file: --force
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (site / MOE).is_symlink() and (site / MOE).read_text() == fixed(AFFECTED.before)
    assert real.read_text() == AFFECTED.before  # the file the link led to is not written
    assert patch(python, "--undo").returncode == 0
    assert (site / MOE).is_symlink() and os.readlink(site / MOE) == "moe_impl.py"
    after = snapshot(site)
    assert {k: v for k, v in after.items() if not k.endswith(".pyc")} == \
        {k: v for k, v in before.items() if not k.endswith(".pyc")}


def test_a_pycache_that_links_outside_is_refused(env, tmp_path):
    python, site = env
    outside = tmp_path / "outside-cache"
    cache = site / "transformers" / "integrations" / "__pycache__"
    for p in cache.glob("*"):
        outside.mkdir(exist_ok=True)
        p.rename(outside / p.name)
    cache.rmdir()
    cache.symlink_to(outside)
    before = snapshot(outside)
    assert before, "pip compiled moe.py: its .pyc is what a run must not delete"
    refused(patch(python, SENTINEL), str(cache), str(outside), "outside")
    assert snapshot(outside) == before


def test_a_dist_info_that_links_outside_is_not_written(env, other):
    (python, site), (_, elsewhere) = env, other
    info = next(site.glob("transformers-*.dist-info"))
    target = next(elsewhere.glob("transformers-*.dist-info"))
    before = snapshot(elsewhere)
    import shutil
    shutil.rmtree(info)
    info.symlink_to(target)
    proc = patch(python, SENTINEL)
    refused(proc, str(info), "is a link to")
    assert snapshot(elsewhere) == before


def test_a_journal_folder_that_links_outside_is_refused(env, tmp_path):
    python, site = env
    outside = tmp_path / "planted"
    outside.mkdir()
    (site / JOURNAL_DIR).symlink_to(outside)
    refused(patch(python, SENTINEL), str(site / JOURNAL_DIR), "is a link")
    refused(patch(python, "--undo"), str(site / JOURNAL_DIR), "is a link")
    assert list(outside.iterdir()) == []


def test_a_planted_temporary_file_link_is_not_written_through(env, tmp_path):
    python, site = env
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (site / "transformers" / "integrations" / ".moe.py.fixmono-tmp").symlink_to(victim)
    info = next(site.glob("transformers-*.dist-info"))
    (info / ".RECORD.fixmono-tmp").symlink_to(victim)
    assert patch(python, SENTINEL).returncode == 0
    assert victim.read_text() == "precious\n"
    assert (site / MOE).read_text() == fixed(AFFECTED.before)


# 2. The journal is untrusted: its paths stay in site-packages ----------------------------------------------------

def planted_entry(site: Path, key: str, victim: Path, pending: bool = False) -> None:
    """A journal entry for `key` whose patched hash is the victim's, as an attacker writes it."""
    data = journal_of(site)
    (entry,) = data["files"].values()
    victim_hash = sha(victim.read_bytes())
    planted = {**entry, "patched": victim_hash, "record_line": None, "dist_info": None}
    if pending:
        planted["pending"] = {"from": victim_hash, "to": entry["original"], "fixes": []}
    data["files"][key] = planted
    save_journal(site, data)


@pytest.mark.parametrize("how", ["absolute", "climbing", "pending-absolute", "pending-climbing"])
def test_a_journal_key_outside_site_packages_is_refused(env, tmp_path, how):
    python, site = env
    victim = tmp_path / "x" / "victim.py"
    victim.parent.mkdir()
    victim.write_text("precious = 1\n")
    assert patch(python, SENTINEL).returncode == 0
    key = str(victim) if how.endswith("absolute") else os.path.relpath(victim, site)
    planted_entry(site, key, victim, pending=how.startswith("pending"))
    before = snapshot(site)
    for args in (["--undo"], [SENTINEL]):
        proc = patch(python, *args)
        refused(proc, "not a relative path inside site-packages")
    assert victim.read_text() == "precious = 1\n" and not (victim.parent / "__pycache__").exists()
    assert snapshot(site) == before


@pytest.mark.parametrize("field, value, words", [
    ("original", "../../../../etc/hostname", ["original", "sha256"]),
    ("dist_info", "../../../x.dist-info", ["dist_info", ".dist-info folder name"]),
    ("record_line", "transformers/__init__.py,sha256=x,1", ["record_line names another file"]),
    ("fixes", "not-a-list", ["fixes", "expected a list"]),
])
def test_a_journal_field_of_the_wrong_shape_is_refused(env, field, value, words):
    python, site = env
    assert patch(python, SENTINEL).returncode == 0
    data = journal_of(site)
    data["files"][MOE][field] = value
    save_journal(site, data)
    before = snapshot(site)
    refused(patch(python, "--undo"), *words)
    assert snapshot(site) == before


def test_a_journal_listing_one_fix_twice_is_not_rebuilt_from_it(env):
    """A journal an older fixmono wrote for two diffs of one subject lists their id twice on a file: undoing
    another fix there while keeping it is refused (it would rebuild the file from one diff, dropping the
    other's edit), nothing changed."""
    python, site = env
    assert patch(python, SENTINEL).returncode == 0
    data = journal_of(site)
    data["files"][MOE]["fixes"] = [SENTINEL, SENTINEL, "diff-other"]
    save_journal(site, data)
    before = snapshot(site)
    refused(patch(python, "--undo", "diff-other"), "lists a fix twice", "undo them all")
    assert snapshot(site) == before


@pytest.mark.parametrize("journal", [
    '{"format": 1, "files": [1, 2], "fixes": {}}',
    '{"format": 1, "files": {"transformers/integrations/moe.py": {"dist": "transformers"}}, "fixes": {}}',
    '{"format": true, "files": {}, "fixes": {}}',
    '[]',
    'not json at all',
])
def test_a_malformed_journal_is_one_line(env, journal):
    python, site = env
    assert patch(python, SENTINEL).returncode == 0
    (site / JOURNAL_DIR / "journal.json").write_text(journal)
    before = snapshot(site)
    for args in (["--undo"], [SENTINEL], ["--undo", "--check"]):
        refused(patch(python, *args), "journal.json")
    assert snapshot(site) == before
    status = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "fixes"), "status", "--python", str(python)],
                            capture_output=True, text=True, timeout=300)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr


def test_a_record_that_is_not_utf8_is_one_line(env):
    python, site = env
    record = next(site.glob("transformers-*.dist-info")) / "RECORD"
    record.write_bytes(record.read_bytes() + b"transformers/\xff\xfe.py,,\r\n")
    before = snapshot(site)
    refused(patch(python, SENTINEL), "RECORD", "not UTF-8")
    assert snapshot(site) == before


# 3. Undo restores only what it can prove is the original --------------------------------------------------------

def swap_original(site: Path, data: bytes) -> None:
    """The attack: other bytes stored under their own sha256, the journal's `original` pointed at them."""
    journal = journal_of(site)
    digest = sha(data)
    (site / JOURNAL_DIR / "store" / digest).write_bytes(data)
    journal["files"][MOE]["original"] = digest
    save_journal(site, journal)


@pytest.mark.parametrize("garbage", ["other bytes", "the patched bytes", "the original plus a line"])
def test_undo_refuses_an_original_the_record_line_disowns(env, garbage):
    python, site = env
    assert patch(python, SENTINEL).returncode == 0
    patched = (site / MOE).read_bytes()
    data = {"other bytes": b"import os; os.system('evil')\n", "the patched bytes": patched,
            "the original plus a line": AFFECTED.before.encode() + b"import evil\n"}[garbage]
    swap_original(site, data)
    before = snapshot(site)
    refused(patch(python, "--undo"), "altered", "nothing was changed")
    refused(patch(python, "--undo", "--force"), "altered")  # --force overrides a change, never a forgery
    assert snapshot(site) == before and (site / MOE).read_bytes() == patched


@pytest.mark.parametrize("damage", ["edited in place", "deleted", "made a link"])
def test_undo_refuses_a_damaged_store(env, tmp_path, damage):
    python, site = env
    assert patch(python, SENTINEL).returncode == 0
    blob = site / JOURNAL_DIR / "store" / journal_of(site)["files"][MOE]["original"]
    if damage == "edited in place":
        blob.write_bytes(b"garbage\n")
    elif damage == "deleted":
        blob.unlink()
    else:
        (tmp_path / "elsewhere").write_bytes(AFFECTED.before.encode())
        blob.unlink()
        blob.symlink_to(tmp_path / "elsewhere")
    before = snapshot(site)
    refused(patch(python, "--undo"), str(blob))
    assert snapshot(site) == before


@pytest.mark.parametrize("link", ["absolute", "climbing", "inside, to another file"])
def test_undo_never_makes_a_link_the_journal_names_to_a_file_without_the_original(env, tmp_path, link):
    """A journal's `link` (the file was a link when patched) is untrusted: it
    must stay inside site-packages and lead to a file holding the original."""
    python, site = env
    evil = tmp_path / "evil.py"
    evil.write_text("import os  # not the original\n")
    (site / "transformers" / "other.py").write_text("import os  # not the original either\n")
    assert patch(python, SENTINEL).returncode == 0
    data = journal_of(site)
    data["files"][MOE]["link"] = {"absolute": str(evil), "climbing": os.path.relpath(evil, (site / MOE).parent),
                                  "inside, to another file": "../other.py"}[link]
    save_journal(site, data)
    before = snapshot(site)
    refused(patch(python, "--undo"), str(site))
    assert snapshot(site) == before and not (site / MOE).is_symlink()


def test_a_journal_entry_without_its_record_line_must_say_force(env):
    """patch-env saves the RECORD line of every file it patches without
    --force: an entry without one that does not say --force was edited."""
    python, site = env
    assert patch(python, SENTINEL).returncode == 0
    swap_original(site, b"import os; os.system('evil')\n")
    data = journal_of(site)
    data["files"][MOE]["record_line"] = None
    save_journal(site, data)
    before = snapshot(site)
    refused(patch(python, "--undo"), "no record_line", "--force")
    assert snapshot(site) == before


def test_undo_of_a_forced_entry_says_its_original_is_vouched_for_by_the_journal_only(env):
    """What --force gives up: a file patched with it has no RECORD line that
    vouches for its original, so undo says the journal's hash is the only check."""
    python, site = env
    (site / MOE).write_text(AFFECTED.before + "# edited by hand\n")
    assert patch(python, SENTINEL, "--force").returncode == 0
    proc = patch(python, "--undo")
    assert proc.returncode == 0 and "journal's own hash only" in proc.stdout, proc.stdout + proc.stderr
    assert (site / MOE).read_text() == AFFECTED.before + "# edited by hand\n"
    assert patch(python, SENTINEL).returncode == 2  # (the hand edit: refused without --force, as before)
    (site / MOE).write_text(AFFECTED.before)
    assert patch(python, SENTINEL).returncode == 0
    proc = patch(python, "--undo")  # a RECORD-vouched original: no such note
    assert proc.returncode == 0 and "journal's own hash only" not in proc.stdout, proc.stdout


# 4. Only the lock holder changes the journal ----------------------------------------------------------------------

@pytest.mark.parametrize("holder", ["patch", "undo"])
@pytest.mark.parametrize("point", PAUSE_POINTS)
def test_runs_refused_while_another_is_stopped_touch_nothing(env, tmp_path, point, holder):
    """A is stopped (SIGSTOP) at each step; B and C, patching and undoing, are
    refused and change nothing; then A dies, and the next run completes A's work."""
    python, site = env
    pristine = tree(site)
    if holder == "undo":
        assert patch(python, SENTINEL).returncode == 0
    reached = tmp_path / "reached"
    args = ["--undo"] if holder == "undo" else [SENTINEL]
    a = subprocess.Popen([sys.executable, "-m", "fixmono", "patch-env", "--python", str(python), *args],
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"), "FIXMONO_PAUSE_AT": point,
                              "FIXMONO_PAUSE_FILE": str(reached)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not reached.exists() and a.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reached.exists(), f"A never reached {point}"
        a.send_signal(signal.SIGSTOP)
        during = snapshot(site)
        for others in ([SENTINEL], ["--undo"], [SENTINEL], ["--undo", "--force"], ["--all"]):
            refused(patch(python, *others), "another fixmono patch-env")
            assert snapshot(site) == during, others
    finally:
        a.kill()
        a.wait()
    proc = patch(python, "--undo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert tree(site) == pristine


# 5. Undo never destroys what it cannot restore ---------------------------------------------------------------------

@pytest.mark.parametrize("then", [["--undo"], ["--undo", SENTINEL], [SENTINEL], ["--all"]])
def test_a_file_changed_after_patching_is_reported_and_its_original_kept(env, then):
    python, site = env
    pristine = tree(site)
    assert patch(python, SENTINEL).returncode == 0
    with open(site / MOE, "a") as f:
        f.write("# someone else's line\n")
    before = snapshot(site)
    proc = patch(python, *then)
    refused(proc, str(site / MOE), "changed by something else", "--undo --force")
    assert snapshot(site) == before  # the change, the journal entry and the stored original all kept
    status = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "fixes"), "status", "--python", str(python),
                             "--json"], capture_output=True, text=True, timeout=300)
    row = next(r for r in json.loads(status.stdout)["fixes"] if r["fix"] == SENTINEL)
    assert row["patch_env"]["files"] == {MOE: "changed"}, row
    proc = patch(python, "--undo", "--force")
    assert proc.returncode == 0 and f"undone  {SENTINEL}" in proc.stdout, proc.stdout + proc.stderr
    assert tree(site) == pristine


def test_an_upgrade_by_pip_is_still_forgotten_not_refused(env, tmp_path):
    """The other side of the line: a file pip installed again (it matches its RECORD) is not 'changed'."""
    python, site = env
    assert patch(python, SENTINEL).returncode == 0
    newer = make_env(tmp_path / "newer", AFFECTED.before + "# 5.17.1\n")  # a wheel with other bytes
    wheel = next((tmp_path / "newer" / "dist").glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--no-cache-dir", "--force-reinstall", str(wheel)], check=True,
                   env={**os.environ, "PIP_CONSTRAINT": ""})
    del newer
    proc = patch(python, SENTINEL)
    assert proc.returncode == 0 and "installed again" in proc.stdout, proc.stdout + proc.stderr
    data = (site / MOE).read_bytes()
    assert data.decode() == fixed(AFFECTED.before + "# 5.17.1\n")
    assert record_row(site, MOE) == [MOE, sha256_field(data), str(len(data))]
