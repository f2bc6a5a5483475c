"""`fixmono patch-env`: fix an installed environment in place, and undo it.

The environments are real venvs with a wheel pip installed (RECORD with CRLF
lines, bytecode compiled, as pip does): a `transformers` of our own whose
integrations/moe.py is each of the sentinel fix's cases (text shaped like the
real code, never upstream's). Real published wheels: test_patch_env_wheels.py.
pip installs each distinct wheel once per test process; every environment after
the first of its kind is a copy of that one (make_env), byte for byte.
"""
import atexit
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from fixmono.apply.contract import apply_change
from fixmono.model.registry import discover
from fixmono.output.journal import JOURNAL_DIR, PAUSE_POINTS
from fixmono.testing import REPO_ROOT, write_wheel
from tests.helpers import run_killed_at

SENTINEL = "transformers-moe-sentinel-router-grad"
FIX = {f.id: f for f in discover()}[SENTINEL]
MOE = "transformers/integrations/moe.py"
AFFECTED = next(c for c in FIX.cases if c.expect == "applied")


def fixmono(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fixmono", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"), **(env or {})}, **kw)


def install_env(root: Path, moe: str, version: str, extra: dict | None) -> Path:
    """A venv at root/venv with our `transformers` wheel (root/dist) installed by pip; its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    wheel = write_wheel(root / "dist", "transformers", version, {
        "transformers/__init__.py": f"__version__ = {version!r}\n",
        "transformers/integrations/__init__.py": "", MOE: moe, **(extra or {})})
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                           "--no-index", "--no-cache-dir", "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": ""})
    assert proc.returncode == 0, proc.stderr
    return Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


INSTALLED: dict[tuple, tuple[Path, Path]] = {}  # (moe, version, extra) -> (root, site-packages) pip installed


def make_env(root: Path, moe: str, version: str = "5.17.0", extra: dict | None = None) -> tuple[Path, Path]:
    """A venv with our `transformers` wheel installed by pip; (python, site-packages).

    pip runs once per distinct wheel in a test process (about 1 s each, and these files make a few hundred
    environments): later calls copy that environment (links kept, times kept, so its bytecode stays valid)
    and write their own path where the venv names its folder (pyvenv.cfg, bin/, direct_url.json)."""
    key = (moe, version, tuple(sorted((extra or {}).items())))
    if key not in INSTALLED:
        template = Path(tempfile.mkdtemp(prefix="fixmono-env-"))
        atexit.register(shutil.rmtree, template, True)
        INSTALLED[key] = template, install_env(template, moe, version, extra)
    template, template_site = INSTALLED[key]
    root.mkdir(parents=True, exist_ok=True)
    for part in ("venv", "dist"):
        shutil.copytree(template / part, root / part, symlinks=True)
    old, new = str(template).encode(), str(root).encode()
    for path in [root / "venv" / "pyvenv.cfg", *(root / "venv" / "bin").iterdir(),
                 *(root / template_site.relative_to(template)).glob("*.dist-info/direct_url.json")]:
        if path.is_file() and not path.is_symlink() and old in (data := path.read_bytes()):
            stat = path.stat()
            path.write_bytes(data.replace(old, new))
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    return root / "venv" / "bin" / "python", root / template_site.relative_to(template)


def tree(site: Path, bytecode: bool = False) -> dict[str, str]:
    """sha256 of every file under site-packages (bytecode only if asked: it holds the source's mtime)."""
    return {p.relative_to(site).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(site.rglob("*")) if p.is_file() and (bytecode or p.suffix != ".pyc")}


def record_row(site: Path, rel: str) -> list[str]:
    import csv
    record = next(site.glob("transformers-*.dist-info")) / "RECORD"
    return next(row for row in csv.reader(record.read_text().splitlines()) if row and row[0] == rel)


def sha256_field(data: bytes) -> str:
    import base64
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def fixed(text: str) -> str:
    return apply_change(FIX.changes[0], text).new_text


@pytest.fixture
def env(tmp_path):
    return make_env(tmp_path, AFFECTED.before)


def test_patch_then_undo_restores_every_byte(env, tmp_path):
    python, site = env
    before = tree(site)
    proc = fixmono("patch-env", "--python", str(python), SENTINEL)
    assert proc.returncode == 0 and f"patched  {SENTINEL}" in proc.stdout, proc.stderr
    assert (site / MOE).read_text() == fixed(AFFECTED.before)
    data = (site / MOE).read_bytes()  # RECORD says what the file now is: hash and size
    assert record_row(site, MOE) == [MOE, sha256_field(data), str(len(data))]
    record = next(site.glob("transformers-*.dist-info")) / "RECORD"
    assert record.read_bytes().count(b"\r\n") == len(record.read_bytes().splitlines())  # pip's CRLF kept
    pyc = next((site / "transformers/integrations/__pycache__").glob("moe.*.pyc"))
    assert int.from_bytes(pyc.read_bytes()[12:16], "little") == len(data)  # compiled from the patched source
    changed = {k for k in tree(site) if tree(site)[k] != before.get(k)}
    assert {k for k in changed if not k.startswith(JOURNAL_DIR)} == {MOE, record.relative_to(site).as_posix()}

    proc = fixmono("patch-env", "--python", str(python), "--undo", env={"HOME": str(tmp_path / "no-home"),
                                                                      "FIXMONO_CACHE": str(tmp_path / "no-cache")})
    assert proc.returncode == 0 and f"undone  {SENTINEL}" in proc.stdout, proc.stderr
    assert tree(site) == before  # byte for byte, RECORD included; the journal is gone
    assert not (site / JOURNAL_DIR).exists()


def test_a_second_run_is_a_no_op(env):
    python, site = env
    assert fixmono("patch-env", "--python", str(python), SENTINEL).returncode == 0
    once = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in site.rglob("*") if p.is_file()}
    proc = fixmono("patch-env", "--python", str(python), SENTINEL)
    assert proc.returncode == 0 and "already patched by fixmono" in proc.stdout, proc.stdout
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in site.rglob("*") if p.is_file()} == once


def test_status_shows_it_and_a_reinstall_is_detected(env, tmp_path):
    python, site = env

    def row() -> dict:
        proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "fixes"), "status", "--python", str(python),
                               "--json"], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return next(r for r in json.loads(proc.stdout)["fixes"] if r["fix"] == SENTINEL)

    assert row()["installed_files"] == "not fixed"
    assert fixmono("patch-env", "--python", str(python), SENTINEL).returncode == 0
    patched = row()
    assert patched["installed_files"] == "patched by fixmono" and patched["patch_env"]["state"] == "patched"
    assert patched["patch_env"]["fixmono_version"]
    assert f"fixmono patch-env --python {python} --undo {SENTINEL}" in patched["detail"]  # the other environment's
    wheel = next((tmp_path / "dist").glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--no-cache-dir", "--force-reinstall", str(wheel)], check=True,
                   env={**os.environ, "PIP_CONSTRAINT": ""})
    stale = row()
    assert stale["installed_files"] == "not fixed" and stale["patch_env"]["state"] == "stale"
    assert "journal stale" in stale["detail"] and "reinstalled" in stale["detail"]
    proc = fixmono("patch-env", "--python", str(python), SENTINEL)  # patched again, and said why
    assert proc.returncode == 0 and "reinstalled?" in proc.stdout and f"patched  {SENTINEL}" in proc.stdout
    assert row()["installed_files"] == "patched by fixmono"


@pytest.mark.parametrize("case", FIX.cases, ids=lambda c: c.name)
def test_every_case_of_the_fix_as_installed(tmp_path, case):
    """Each shape the file has across releases: patched where make_patch
    applies, left alone where the fix is already there, nothing written and
    exit 1 where it does not apply or fails."""
    python, site = make_env(tmp_path, case.before)
    before = tree(site, bytecode=True)
    proc = fixmono("patch-env", "--python", str(python), SENTINEL, "--json")
    data = json.loads(proc.stdout)
    (result,) = data["fixes"]
    want = {"applied": ("patched", 0), "already-applied": ("already-applied", 0),
            "not-applicable": ("not-applicable", 1), "failed": ("failed", 1)}[case.expect]
    assert (result["result"], proc.returncode) == want, proc.stdout
    if case.expect == "applied":
        assert (site / MOE).read_text() == case.after
    else:
        assert tree(site, bytecode=True) == before  # nothing written, no journal left behind


def test_check_previews_a_diff_and_writes_nothing(env):
    python, site = env
    before = tree(site, bytecode=True)
    proc = fixmono("patch-env", "--python", str(python), SENTINEL, "--check")
    assert proc.returncode == 0 and "nothing was written" in proc.stderr
    assert proc.stdout.startswith(f"--- a/{MOE}\n+++ b/{MOE}\n")
    added = [line[1:] for line in proc.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added and all(line in fixed(AFFECTED.before).splitlines() for line in added)
    assert tree(site, bytecode=True) == before
    assert subprocess.run(["patch", "-p1", "--dry-run", "-d", str(site)], input=proc.stdout, text=True,
                          capture_output=True).returncode == 0  # a patch that applies to those files


def refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert all(w in proc.stderr for w in words), proc.stderr


@pytest.mark.parametrize("args, words", [
    (["xla-rocm-miopen-global-mutex"], ["changes compiled code", "rebuild"]),
    (["pytorch-revert-addmm-cublaslt-gate"], ["changes compiled code"]),
    (["pytorch-batchnorm-negative-running-var"], ["does not install", "make-patch"]),
    (["jax-cudnn-gqa-kv-offsets"], ["jax is not installed"]),
    (["no-such-fix"], ["unknown fix id"]),
    ([], ["name the fixes"]),
    (["--all", SENTINEL], ["not both"]),
    (["--undo", "--all"], ["--undo takes fix ids"]),
])
def test_what_cannot_go_in_is_refused_with_one_line(env, args, words):
    python, site = env
    before = tree(site, bytecode=True)
    refused(fixmono("patch-env", "--python", str(python), *args), *words)
    assert tree(site, bytecode=True) == before


def test_a_package_another_environment_lends_is_not_touched(env, tmp_path):
    """A venv whose .pth adds the first venv's site-packages (as --system-site-
    packages or a conda overlay does): its transformers is found, and refused."""
    python, site = env
    before = tree(site, bytecode=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "borrower")], check=True)
    borrower = tmp_path / "borrower" / "bin" / "python"
    own = Path(subprocess.run([borrower, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip())
    (own / "lender.pth").write_text(f"{site}\n")
    refused(fixmono("patch-env", "--python", str(borrower), SENTINEL), "installed outside this environment")
    proc = fixmono("patch-env", "--python", str(borrower), "--all")
    assert proc.returncode == 0 and f"skipped  {SENTINEL}: transformers 5.17.0 is installed outside" in proc.stdout, \
        proc.stdout
    assert fixmono("patch-env", "--python", str(python), SENTINEL).returncode == 0  # patched in its own venv
    proc = fixmono("patch-env", "--python", str(borrower), "--undo")  # the borrower's undo leaves it alone
    assert proc.returncode == 0 and "restored" not in proc.stdout
    assert tree(site, bytecode=True) != before
    assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    assert tree(site) == {k: v for k, v in before.items() if not k.endswith(".pyc")}


def test_a_version_outside_the_range_is_refused(tmp_path):
    python, site = make_env(tmp_path, AFFECTED.before, version="4.57.0")
    before = tree(site, bytecode=True)
    refused(fixmono("patch-env", "--python", str(python), SENTINEL), "transformers 4.57.0 is outside", "==5.*")
    assert tree(site, bytecode=True) == before
    assert fixmono("patch-env", "--python", str(python), SENTINEL, "--any-version").returncode == 0


def test_a_file_changed_since_install_is_refused_unless_forced(env):
    python, site = env
    mine = (site / MOE).read_text() + "# local edit\n"
    (site / MOE).write_text(mine)
    before = tree(site, bytecode=True)
    refused(fixmono("patch-env", "--python", str(python), SENTINEL), "differs from its RECORD hash", "--force")
    assert tree(site, bytecode=True) == before
    assert fixmono("patch-env", "--python", str(python), SENTINEL, "--force").returncode == 0
    assert (site / MOE).read_text() == fixed(mine)
    assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    assert tree(site) == {k: v for k, v in before.items() if not k.endswith(".pyc")}  # the local edit is back


def test_a_read_only_site_packages_is_refused(env):
    python, site = env
    before = tree(site, bytecode=True)
    argv = [sys.executable, "-m", "fixmono", "patch-env", "--python", str(python), SENTINEL]
    if os.getuid() == 0:  # root writes through mode bits: mount site-packages read-only in a namespace of its own
        script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
        proc = subprocess.run(["unshare", "-rm", "sh", "-c", script, str(site), *argv], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")})
        if proc.returncode != 2 and "patch-env:" not in proc.stderr:
            pytest.skip(f"no read-only mount here: {proc.stderr.strip()}")
    else:
        site.chmod(0o555)
        try:
            proc = fixmono(*argv[3:])
        finally:
            site.chmod(0o755)
    refused(proc, "is not writable", "Read-only file system" if os.getuid() == 0 else "Permission denied",
            "nothing was changed")
    assert tree(site, bytecode=True) == before


@pytest.mark.parametrize("then", ["patch-env", "undo"])
@pytest.mark.parametrize("point", PAUSE_POINTS)
def test_sigkill_while_patching_leaves_each_file_whole_and_the_next_run_completes(tmp_path, point, then):
    python, site = make_env(tmp_path, AFFECTED.before)
    original, patched = AFFECTED.before, fixed(AFFECTED.before)
    pristine = tree(site)
    run_killed_at(point, tmp_path, "patch-env", "--python", str(python), SENTINEL, module="fixmono")
    assert (site / MOE).read_text() in (original, patched)  # never part of either
    status = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "fixes"), "status", "--python", str(python)],
                            capture_output=True, text=True, timeout=300)
    if point == "env-locked":  # killed holding the lock, before the journal: nothing written, nothing pending
        assert tree(site) == {**pristine, f"{JOURNAL_DIR}/lock": tree(site).get(f"{JOURNAL_DIR}/lock")}
    else:
        assert "interrupted patch-env" in status.stdout, status.stdout
    if then == "patch-env":
        proc = fixmono("patch-env", "--python", str(python), SENTINEL)
        assert proc.returncode == 0, proc.stdout
        assert point == "env-locked" or "completed an interrupted patch-env" in proc.stdout, proc.stdout
        data = (site / MOE).read_bytes()
        assert data.decode() == patched and record_row(site, MOE) == [MOE, sha256_field(data), str(len(data))]
    proc = fixmono("patch-env", "--python", str(python), "--undo")
    assert proc.returncode == 0, proc.stderr
    assert tree(site) == pristine


@pytest.mark.parametrize("point", PAUSE_POINTS)
def test_sigkill_while_undoing_then_undo_again_restores(env, tmp_path, point):
    python, site = env
    pristine = tree(site)
    assert fixmono("patch-env", "--python", str(python), SENTINEL).returncode == 0
    run_killed_at(point, tmp_path, "patch-env", "--python", str(python), "--undo", module="fixmono")
    assert (site / MOE).read_text() in (AFFECTED.before, fixed(AFFECTED.before))
    assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    assert tree(site) == pristine


def test_sigkill_at_random_moments_never_leaves_half_a_file(env, tmp_path):
    python, site = env
    pristine = tree(site)
    texts = (AFFECTED.before, fixed(AFFECTED.before))
    for n, delay in enumerate([0.2, 0.35, 0.5, 0.65, 0.8, 1.0]):
        args = ["--undo"] if n % 2 else [SENTINEL]
        proc = subprocess.Popen([sys.executable, "-m", "fixmono", "patch-env", "--python", str(python), *args],
                                env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert (site / MOE).read_text() in texts
    assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    assert tree(site) == pristine


def test_two_runs_at_once_one_is_refused(env, tmp_path):
    python, site = env
    reached = tmp_path / "reached"
    holder = subprocess.Popen([sys.executable, "-m", "fixmono", "patch-env", "--python", str(python), SENTINEL],
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"),
                                   "FIXMONO_PAUSE_AT": "env-journal-written", "FIXMONO_PAUSE_FILE": str(reached)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not reached.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        refused(fixmono("patch-env", "--python", str(python), "--undo"), "another fixmono patch-env")
    finally:
        holder.kill()
        holder.wait()
