"""`fixmono patch-env` (and `--undo`) on a full disk (issue 41): refused before
the first write when the run does not fit; a disk that fills anyway stops the
run with one line, exit 2, and every byte of the environment as it was.

The full disk is simulated by fault injection (tests/fault_injection_enospc.py:
the K-th write of the run, and every later one, fails with ENOSPC; statvfs can
be made to report any free space), at each write of a run in turn; and, where
this machine lets a test mount a small tmpfs in a user namespace, made real.
The venvs are test_patch_env's: our own `transformers` wheel installed by pip.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixmono.output.journal import JOURNAL_DIR
from fixmono.testing import REPO_ROOT
from tests.helpers import run_killed_at
from tests.test_patch_env import AFFECTED, MOE, SENTINEL, fixed, fixmono, make_env, tree

PYTHONPATH = f"{REPO_ROOT}{os.pathsep}{REPO_ROOT / 'tools'}"


def faulty(python: Path, *args: str, **faults) -> subprocess.CompletedProcess:
    """patch-env on the disk `faults` describe (FAULT_* of fault_injection_enospc), confined to the venv."""
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "FAULT_ROOT": str(python.parent.parent),
           **{f"FAULT_{k.upper()}": str(v) for k, v in faults.items()}}
    return subprocess.run([sys.executable, "-m", "tests.fault_injection_enospc", "patch-env", "--python", str(python),
                           *args], capture_output=True, text=True, timeout=300, env=env)


def said_full(proc: subprocess.CompletedProcess, *words: str, full: str = "no space left on ") -> None:
    """One line, exit 2, no traceback, saying the disk is full and nothing changed."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in (full, "; the environment is unchanged", *words):
        assert word in proc.stderr, proc.stderr


def writes_of(python: Path, tmp_path: Path, *args: str) -> int:
    """How many writes a normal run of `args` makes (it runs)."""
    log = tmp_path / "writes.log"
    log.unlink(missing_ok=True)
    proc = faulty(python, *args, log=log)
    assert proc.returncode == 0, proc.stderr
    return len(log.read_text().splitlines())


@pytest.fixture
def env(tmp_path):
    return make_env(tmp_path, AFFECTED.before)


def patched_then_undone(python: Path, site: Path, pristine: dict) -> None:
    """A normal run after the failures works, and its undo restores every byte."""
    proc = fixmono("patch-env", "--python", str(python), SENTINEL)
    assert proc.returncode == 0 and SENTINEL in proc.stdout, proc.stdout + proc.stderr  # or completed and said so
    assert (site / MOE).read_text() == fixed(AFFECTED.before)
    assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    assert tree(site) == pristine


@pytest.mark.parametrize("before", ["pristine", "patched", "interrupted"])
def test_a_disk_that_fills_at_each_write_leaves_every_byte_as_it_was(tmp_path, before):
    """patch-env on a pristine venv; --undo on a patched one; patch-env that
    first completes an interrupted run (killed with its journal written). The
    disk fills at the 1st, 2nd, ... write of the run: each time one line, exit
    2, and the venv's files (bytecode and journal included) byte-identical."""
    python, site = make_env(tmp_path, AFFECTED.before)
    pristine = tree(site)
    args = ["--undo"] if before == "patched" else [SENTINEL]

    def set_up() -> None:
        if before == "patched":
            assert fixmono("patch-env", "--python", str(python), SENTINEL).returncode == 0
        elif before == "interrupted":
            run_killed_at("env-journal-written", tmp_path, "patch-env", "--python", str(python), SENTINEL,
                          module="fixmono")
    set_up()
    count = writes_of(python, tmp_path, *args)
    assert count >= 3  # the file, its RECORD, the journal (and the journal's intent and copies, where new)
    if tree(site) != pristine:
        assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    set_up()
    state = tree(site, bytecode=True)
    for k in range(1, count + 1):
        said_full(faulty(python, *args, enospc_at=k))
        assert tree(site, bytecode=True) == state, f"changed by a disk that filled at write {k}"
    if before == "patched":
        assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
        assert tree(site) == pristine
    patched_then_undone(python, site, pristine)


def test_a_quota_met_writing_the_installed_file_is_said_and_put_back(env, tmp_path):
    python, site = env
    log = tmp_path / "writes.log"
    assert faulty(python, SENTINEL, log=log).returncode == 0
    k = next(n for n, line in enumerate(log.read_text().splitlines(), 1) if ".moe.py.fixmono-tmp" in line)
    assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    state = tree(site, bytecode=True)
    said_full(faulty(python, SENTINEL, enospc_at=k, errno="EDQUOT"), " (needs ", full="disk quota exceeded on ")
    assert tree(site, bytecode=True) == state


def test_the_links_a_killed_run_kept_are_removed_by_the_next(env, tmp_path):
    """A run keeps each file it replaces as a hard link in the journal folder
    (old-N) until it is through; SIGKILLed before that, the next run removes them."""
    python, site = env
    run_killed_at("env-record-written", tmp_path, "patch-env", "--python", str(python), SENTINEL, module="fixmono")
    assert list((site / JOURNAL_DIR).glob("old-*"))
    assert fixmono("patch-env", "--python", str(python), SENTINEL).returncode == 0
    assert not list((site / JOURNAL_DIR).glob("old-*"))
    assert (site / MOE).read_text() == fixed(AFFECTED.before)


@pytest.mark.parametrize("action", ["patch", "undo"])
def test_a_run_that_does_not_fit_is_refused_before_any_write(tmp_path, action):
    python, site = make_env(tmp_path, AFFECTED.before)
    if action == "undo":
        assert fixmono("patch-env", "--python", str(python), SENTINEL).returncode == 0
    args = ["--undo"] if action == "undo" else [SENTINEL]
    state = tree(site, bytecode=True)
    for free in (0, 4096, 512 * 1024):  # the files are a few KB: the margin (1 MiB) does not fit either
        log = tmp_path / f"writes-{free}.log"
        said_full(faulty(python, *args, free_bytes=free, log=log), "needs ", " MB free)")
        written = log.read_text().splitlines() if log.exists() else []
        assert [w for w in written if not w.startswith(f"mkdir {site / JOURNAL_DIR}")] == []  # only the lock's folder
        assert tree(site, bytecode=True) == state
    proc = faulty(python, *args, free_bytes=10**9)  # the same run, where statvfs says it fits
    assert proc.returncode == 0, proc.stderr


def mount_tmpfs(folder: Path) -> str | None:
    """None if this machine lets a test mount a tmpfs in a user namespace, else why not."""
    folder.mkdir()
    if shutil.which("unshare") is None:
        return "no unshare(1) here"
    proc = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                          capture_output=True, text=True, timeout=60)
    return None if proc.returncode == 0 else f"cannot mount a tmpfs in a user namespace: {proc.stderr.strip()}"


def fill(mount: Path, free: int) -> None:
    """Leave `free` bytes (whole pages) of the tmpfs at `mount` available."""
    (mount / "filler").unlink(missing_ok=True)
    usage = os.statvfs(mount)
    with open(mount / "filler", "wb") as filler:
        filler.write(b"\0" * max(0, usage.f_bavail * usage.f_frsize - free))


def on_small_tmpfs(python: str, site: str, mount: str, results: str) -> None:
    """Run inside `unshare -rm`: a 4 MB tmpfs at `mount` holds a copy of
    `site`, mounted over it; patch-env and --undo run with `free` bytes left
    there, the free-space check told there is room (statvfs faked) so that the
    writes meet the kernel's own ENOSPC. Writes what each run did to `results`."""
    python, site, mount = Path(python), Path(site), Path(mount)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    shutil.copytree(site, mount / "site", symlinks=True)
    subprocess.run(["mount", "--bind", str(mount / "site"), str(site)], check=True)
    out = []

    def attempt(name, args, free, **faults) -> int:
        fill(mount, free)
        state = tree(site, bytecode=True)
        proc = faulty(python, *args, **faults)
        out.append({"name": name, "free": free, "code": proc.returncode, "stderr": proc.stderr,
                    "unchanged": tree(site, bytecode=True) == state, "moe": (site / MOE).read_text()})
        (mount / "filler").unlink()
        return proc.returncode

    attempt("refused", [SENTINEL], 64 * 1024)  # the check sees the disk as it is
    for args in ([SENTINEL], ["--undo"]):  # a page more each time, until the run fits
        for free in range(0, 64 * 1024, 4096):
            if attempt("midway", args, free, free_bytes=10**9) == 0:
                break
        attempt("roomy", args, 3 * 2**20)
    Path(results).write_text(json.dumps(out))


def test_on_a_real_small_filesystem(tmp_path):
    python, site = make_env(tmp_path, AFFECTED.before)
    pristine = tree(site)
    why = mount_tmpfs(tmp_path / "small")
    if why:
        pytest.skip(why)
    results = tmp_path / "results.json"
    code = (f"import sys; sys.path[:0] = {PYTHONPATH.split(os.pathsep)!r}\n"
            "from tests.test_patch_env_full_disk import on_small_tmpfs; on_small_tmpfs(*sys.argv[1:])")
    proc = subprocess.run(["unshare", "-rm", sys.executable, "-c", code, str(python), str(site),
                           str(tmp_path / "small"), str(results)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": PYTHONPATH})
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(results.read_text())
    original, patched = AFFECTED.before, fixed(AFFECTED.before)
    assert [r["name"] for r in runs if r["code"] == 0] == ["midway", "roomy", "midway", "roomy"], runs
    for run in runs:
        if run["code"] != 0:  # refused up front, or the kernel's ENOSPC met midway: put back
            said_full(subprocess.CompletedProcess([], run["code"], "", run["stderr"]))
            assert run["unchanged"], run
    assert "MB free)" in runs[0]["stderr"]
    midway = [r for r in runs if r["name"] == "midway" and r["code"] == 2]
    assert len(midway) >= 2 and all("free)" not in r["stderr"] for r in midway), runs
    undoing = runs[runs.index(next(r for r in runs if r["name"] == "roomy")) + 1:]
    assert [r["moe"] for r in undoing] == [patched] * (len(undoing) - 2) + [original] * 2
    assert tree(site) == pristine  # the venv itself was never written: the tmpfs went with its namespace
