"""Hostile input, one table. Each row builds a checkout (or an environment, or
an --out directory) meant to trip make_patch, runs it in a subprocess, and one
checker asserts for every row:

 1. the expected exit code;
 2. stderr empty or one line (exit 2: "make_patch: error: ..." with the row's
    words), never "Traceback" or "Exception ignored";
 3. every byte under the test directory unchanged, the checkout's whole .git
    included (config, index, refs, objects, logs, hooks...), except --out after
    exit 0 and, after a --branch run that exits 0, the new branch's ref, its log
    and new object files (`git for-each-ref` then differs by that branch only);
 4. $TMPDIR (<tmp>/tmp) empty afterwards;
 5. no marker file from a program the checkout, its config or the environment
    names, inside the test directory or beside it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from fixmono.fixes.pytorch.addmm_cublaslt_gate_revert.fix import FIX as ADDMM, TARGET as BLAS_PATH
from fixmono.fixes.pytorch.batchnorm_negative_running_var.fix import FIX as BN, TARGET
from fixmono.apply.contract import apply_change
from fixmono.testing import REPO_ROOT
from fixmono.testing import GIT_ID, git, make_repo
from tests.helpers import BN_FIX, FIXTURE, make_patch, pytorch_files, pytorch_repo

MARKER = "PWNED-by-hostile-input"
BLAS = (REPO_ROOT / "fixes/pytorch/addmm_cublaslt_gate_revert/fixtures/Blas.cpp").read_text()
UNGATED = BLAS.replace(BLAS[BLAS.index("  // NOTE: See https://github.com/pytorch/pytorch/issues/172231"):
                            BLAS.index("  #ifdef USE_ROCM")], "")
PR = "Pull Request resolved: https://github.com/pytorch/pytorch/pull/172340"
GATE_SUBJECT = "make addmm aware of cublas backend selection"
BOM = b"\xef\xbb\xbf"
HOOKS = ("applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit prepare-commit-msg "
         "commit-msg post-commit pre-rebase post-checkout post-merge pre-push pre-receive update proc-receive "
         "post-receive post-update reference-transaction push-to-checkout pre-auto-gc post-rewrite "
         "sendemail-validate fsmonitor-watchman p4-changelist p4-prepare-changelist p4-post-changelist "
         "p4-pre-submit post-index-change").split()


# ----------------------------------------------------------------------------
# the harness

@dataclass
class Ctx:
    tmp: Path
    up: Path  # --upstream {up}
    extra: dict = field(default_factory=dict)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    early: bool = False  # exited before the signal was sent


@dataclass
class Case:
    id: str
    setup: Callable[[Path], Ctx]
    args: tuple[str, ...]  # {up}, {tmp} and the evil script names are filled in
    code: int | tuple[int, ...] = 0
    message: str | tuple[str, ...] = ()  # substrings of the one stderr line of an exit 2
    verify: Callable[[Ctx, Run, dict], None] | None = None  # after the generic checks
    env: dict = field(default_factory=dict)
    signal: tuple[int, float] | None = None  # (signal, seconds after Python's own start-up)
    closed_stdout: bool = False
    repeat: int = 1


def names(tmp: Path) -> dict[str, str]:
    """What {placeholders} in settings, environments and arguments stand for."""
    evil = tmp / "evil"
    return {"tmp": str(tmp), "run": str(evil / "run"), "cat": str(evil / "cat"),
            "upload": str(evil / "upload-pack"), "receive": str(evil / "receive-pack"),
            "hooks": str(evil / "hooks")}


def outside_marker(tmp: Path) -> Path:
    return tmp.parent / f"{tmp.name}-{MARKER}"


def write_evil_programs(tmp: Path) -> None:
    """Scripts that leave the marker (here, beside the test directory, and in
    whatever directory they run in) and then do their job."""
    touch = f"#!/bin/sh\ntouch '{tmp / MARKER}' '{outside_marker(tmp)}' {MARKER}\n"
    n = names(tmp)
    for name, tail in (("run", "exit 0\n"), ("cat", "exec cat\n"),
                       ("upload", 'exec git-upload-pack "$@"\n'), ("receive", 'exec git-receive-pack "$@"\n')):
        executable(Path(n[name]), touch + tail)
    for hook in HOOKS:
        executable(Path(n["hooks"]) / hook, touch + "exit 0\n")


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def full_snapshot(root: Path) -> dict[str, tuple]:
    """Every file, directory and link under `root`, .git directories included:
    kind, mode and the bytes' hash (not times)."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                snap[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                snap[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                snap[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(Path(path).read_bytes()).hexdigest())
    return snap


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def refs_of(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()


def run_env(tmp: Path, env: dict) -> dict:
    full = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"), "TMPDIR": str(tmp / "tmp"), **env}
    full.pop("MAKE_PATCH_DEBUG", None)
    return full


def launch(case: Case, ctx: Ctx, argv: list[str], env: dict) -> Run:
    if not case.signal and not case.closed_stdout:
        proc = make_patch(*argv, cwd=ctx.tmp, env={"TMPDIR": str(ctx.tmp / "tmp"), **env})
        return Run(proc.returncode, proc.stdout, proc.stderr)
    if case.closed_stdout:  # `make_patch --check --json | head -0`
        proc = subprocess.Popen([sys.executable, "-m", "fixmono.cli.make_patch", *argv], cwd=ctx.tmp,
                                env=run_env(ctx.tmp, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        err = proc.stderr.read()
        return Run(proc.wait(timeout=120), "", err.decode("utf-8", "replace"))
    sig, delay = case.signal
    delay += python_startup(ctx.tmp)  # seconds after make_patch's own code starts
    for _ in range(20):
        run = signalled(argv, ctx.tmp, env, sig, delay)
        if not python_startup_interrupted(run):
            return run
        delay += 0.01
    pytest.fail("the signal kept arriving during Python's own start-up")


def signalled(argv: list[str], tmp: Path, env: dict, sig: int, delay: float) -> Run:
    """make_patch sent `sig` after `delay` seconds: Ctrl-C (SIGINT) reaches the
    whole process group, git children too; SIGTERM (`kill PID`) the one process."""
    proc = subprocess.Popen([sys.executable, "-m", "fixmono.cli.make_patch", *argv], cwd=tmp, env=run_env(tmp, env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(delay)
    early = proc.poll() is not None
    if not early:
        os.killpg(proc.pid, sig) if sig == signal.SIGINT else proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return Run(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), early)


_STARTUP: list[float] = []


def python_startup(tmp: Path) -> float:
    """How long Python takes to start (site, runpy) before it imports make_patch:
    no code of make_patch can handle a signal before that."""
    if not _STARTUP:
        for _ in range(3):
            start = time.monotonic()
            subprocess.run([sys.executable, "-c", "import runpy"], env=run_env(tmp, {}), check=True)
            _STARTUP.append(time.monotonic() - start)
    return min(_STARTUP)


def python_startup_interrupted(run: Run) -> bool:
    """Ctrl-C while Python itself was starting (a traceback through no file of
    tools/ or fixes/): too early for make_patch, so the run says nothing."""
    # exit 1, or killed by the re-raised SIGINT (-2) when runpy itself was interrupted; the one frame of
    # ours allowed is the line importing the early handler (it is not installed before that import)
    frames = re.findall(r'File "([^"]*)", line \d+, in [^\n]*\n\s*([^\n]*)', run.stderr)
    ours = [f for f, line in frames if re.search(r"/(tools|fixes)/", f) and "fixmono.cli.early" not in line]
    return run.code in (1, 130, -signal.SIGINT) and "KeyboardInterrupt" in run.stderr and not ours


def unexpected_changes(before: dict, after: dict, ctx: Ctx, argv: list[str], written: bool) -> list[str]:
    """Changes under the test directory that the contract does not allow
    (`written`: the run says it wrote everything: exit 0, or interrupted after)."""
    out, branch = option(argv, "--out"), option(argv, "--branch")
    free, add_only, new_paths = [], [], []  # anything goes / files may appear / these paths may appear
    if written and out:
        free.append(os.path.relpath(os.path.abspath(os.path.join(ctx.tmp, out)), ctx.tmp))
    if written and branch:
        git_dir = os.path.relpath(ctx.up / ".git", ctx.tmp)
        add_only.append(f"{git_dir}/objects")
        new_paths += [f"{git_dir}/refs/heads/{branch}", f"{git_dir}/logs/refs/heads/{branch}"]

    def inside(path: str, root: str) -> bool:
        return path == root or path.startswith(root + "/")

    def allowed(path: str, added: bool) -> bool:
        return any(inside(path, d) for d in free) or added and (
            any(inside(path, d) for d in add_only) or any(inside(p, path) for p in new_paths))

    problems = []
    for path in sorted(set(before) | set(after)):
        if before.get(path) == after.get(path):
            continue
        what = "created" if path not in before else "removed" if path not in after else "changed"
        if not allowed(path, what == "created"):
            problems.append(f"{what}: {path}")
    return problems


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """What make_patch writes for the section-1 checkout when nothing is hostile
    (commits and patches are deterministic: same HEAD, same bytes)."""
    tmp = tmp_path_factory.mktemp("reference")
    up = base_checkout(tmp / "up")
    run = make_patch(BN_FIX, ADDMM.id, "--upstream", str(up), "--out", str(tmp / "o"), "--branch", "fixes",
                     "--json", cwd=tmp)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)["runs"][0]
    results = [(r["fix"], r["status"], r["detail"]) for r in report["results"]]
    assert [r[1] for r in results] == ["applied", "applied"] and "git revert of" in results[1][2], results
    return {"head": report["base"], "results": results, "series": read_series(tmp / "o"),
            "tip": git(up, "rev-parse", "refs/heads/fixes").strip()}


def violations(case: Case, ctx: Ctx, argv: list[str], run: Run, before: dict, refs: list[str] | None) -> list[str]:
    """The generic contract, every rule checked, every break listed."""
    problems = []
    codes = case.code if isinstance(case.code, tuple) else (case.code,)
    if run.code not in codes + ((0,) if run.early else ()):
        problems.append(f"exit {run.code}, expected {codes}")
    if any(bad in run.stdout + run.stderr for bad in ("Traceback", "Exception ignored")):
        problems.append("a traceback or 'Exception ignored'")
    if len(run.stderr.splitlines()) > 1:
        problems.append("stderr is more than one line")
    messages = (case.message,) if isinstance(case.message, str) else case.message
    if run.code == 2 and not (run.stderr.startswith("make_patch: error: ") and all(m in run.stderr for m in messages)):
        problems.append(f"the error line lacks 'make_patch: error: ' or one of {messages}")
    if run.code == 2 and "--json" not in argv and run.stdout:
        problems.append("stdout is not empty after exit 2")
    markers = [str(p) for p in ctx.tmp.rglob(MARKER)] + [str(m) for m in [outside_marker(ctx.tmp)] if m.exists()]
    problems += [f"a hostile program ran: {m}" for m in markers]
    problems += unexpected_changes(before, full_snapshot(ctx.tmp), ctx, argv, wrote_everything(run))
    problems += [f"left in $TMPDIR: {name}" for name in sorted(os.listdir(ctx.tmp / "tmp"))]
    branch = option(argv, "--branch")
    if refs is not None and wrote_everything(run) and branch:
        after = refs_of(ctx.up)
        if not set(refs) <= set(after) or [r.split()[0] for r in after if r not in refs] != [f"refs/heads/{branch}"]:
            problems.append(f"refs changed by more than the new branch: {refs} -> {after}")
    return problems


def fill(value: str, ctx: Ctx) -> str:
    return value.format(up=ctx.up, **names(ctx.tmp))


# ----------------------------------------------------------------------------
# checks after a successful run

def read_series(out: Path) -> dict[str, bytes]:
    """The series make_patch wrote into `out`, complete (every listed patch, BASE)."""
    listed = (out / "series").read_text().split()
    return {n: (out / n).read_bytes() for n in listed + ["series", "BASE"]}


def report_of(run: Run) -> dict:
    return json.loads(run.stdout)["runs"][0]


def same_report(ctx: Ctx, run: Run, ref: dict) -> None:
    report = report_of(run)
    assert report["base"] == ref["head"]
    assert [(r["fix"], r["status"], r["detail"]) for r in report["results"]] == ref["results"]


def same_series(ctx: Ctx, run: Run, ref: dict) -> None:
    same_report(ctx, run, ref)
    assert read_series(ctx.tmp / "o") == ref["series"]


def same_series_and_branch(ctx: Ctx, run: Run, ref: dict) -> None:
    same_series(ctx, run, ref)
    assert git(ctx.up, "rev-parse", "refs/heads/fixes").strip() == ref["tip"]


def gitb(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    """git with bytes in and out (CRs kept), no hooks, no user config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_ID, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    proc = subprocess.run(["git", "-c", f"core.hooksPath={os.devnull}", "-C", str(repo), *args], input=input,
                          capture_output=True, env=env)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout


def applied_with_git_am(ctx: Ctx) -> bytes:
    """The series in o applied with `git apply --check`, then `git am`, on a
    clone of the checkout: the target as the clone then has it."""
    series = read_series(ctx.tmp / "o")
    clone = ctx.tmp / "clone"
    gitb(ctx.tmp, "clone", "-q", str(ctx.up), str(clone))
    patches = [str(ctx.tmp / "o" / n) for n in series if n.endswith(".patch")]
    gitb(clone, "apply", "--check", *patches)
    crlf = b"\r\n" in gitb(ctx.up, "cat-file", "blob", f"HEAD:{TARGET}")
    gitb(clone, "am", "-q", *(["--keep-cr"] if crlf else []), *patches)
    return (clone / TARGET).read_bytes()


def applies_like_the_branch(ctx: Ctx, run: Run, ref: dict) -> None:
    """git am of the series gives the target exactly as the branch of the same run has it."""
    original = gitb(ctx.up, "cat-file", "blob", f"HEAD:{TARGET}")
    patched = gitb(ctx.up, "cat-file", "blob", f"fixes:{TARGET}")
    assert patched != original and b".abs()" in patched
    assert applied_with_git_am(ctx) == patched
    if b"\r\n" in original:
        assert patched.count(b"\n") == patched.count(b"\r\n"), "CRLF line endings lost"
    if original.startswith(BOM):
        assert patched.startswith(BOM) and not patched[3:].startswith(BOM), "the BOM lost or doubled"


def applies_as_transformed(ctx: Ctx, run: Run, ref: dict) -> None:
    original = gitb(ctx.up, "cat-file", "blob", f"HEAD:{TARGET}").decode()
    assert applied_with_git_am(ctx) == apply_change(BN.changes[0], original).new_text.encode()


def wrote_everything(run: Run) -> bool:
    """Exit 0, or a Ctrl-C or SIGTERM that landed after the series and branch were in place."""
    return run.code == 0 or (run.code in (130, 143) and "interrupted after everything was written" in run.stderr)


def complete_or_untouched(ctx: Ctx, run: Run, ref: dict) -> None:
    """An interrupted --out o --branch fixes run: all written, or nothing (the
    generic checks already hold the checkout and `o` unchanged on failure)."""
    if wrote_everything(run):
        series = read_series(ctx.tmp / "o")
        assert series["BASE"].decode().split()[-1] == git(ctx.up, "rev-parse", "HEAD").strip()
        assert git(ctx.up, "rev-parse", "fixes~1").strip() == git(ctx.up, "rev-parse", "HEAD").strip()
        assert ".abs()" in git(ctx.up, "cat-file", "blob", f"fixes:{TARGET}")
    elif run.code in (130, 143):
        assert "interrupted" in run.stderr, run.stderr


def transformation_taken(ctx: Ctx, run: Run, ref: dict) -> None:
    result = report_of(run)["results"][0]
    assert result["status"] == "applied" and result["detail"].startswith("tree transformation"), result
    assert "\n" not in result["detail"]
    assert not any(sha[:12] in result["detail"] for sha in ctx.extra.get("unrelated", []))
    patch = (ctx.tmp / "o" / result["patch"]).read_text()
    assert "This reverts commit" not in patch and "-  // NOTE: See https://github.com/pytorch" in patch


def json_error(ctx: Ctx, run: Run, ref: dict) -> None:
    data = json.loads(run.stdout)
    assert isinstance(data, dict) and data["exit_code"] == 2 and data["error"], data
    assert data["error"] in run.stderr


def branch_exists(name: str):
    def verify(ctx: Ctx, run: Run, ref: dict) -> None:
        assert (ctx.up / ".git/refs/heads" / name).is_file()
        assert ".abs()" in git(ctx.up, "cat-file", "blob", f"refs/heads/{name}:{TARGET}")
        read_series(ctx.tmp / "o")
    return verify


def rewrites_series(ctx: Ctx, run: Run, ref: dict) -> None:
    assert read_series(ctx.tmp / "o")["BASE"].decode() == f"commit {git(ctx.up, 'rev-parse', 'HEAD').strip()}\n"


# ----------------------------------------------------------------------------
# Section 1: nothing a checkout, its config or the environment names may run.
# Against 64570b9 (before the rewrite) 50 of 123 rows failed: `git status` ran the
# clean/process filter (plain, cp -a copy, racy index); gpg ran for
# log.showSignature in `git log`; the --branch fetch followed url.insteadOf to
# ext::; include files carried all that; GIT_OBJECT_DIRECTORY, GIT_CONFIG_* reached
# GitPython's git; a partial clone fetched the blob through the hostile
# upload-pack (or, remote gone, "SHA is empty", exit 3). Against 1a5b9b9: none.

def base_checkout(path: Path) -> Path:
    """pytorch_repo plus the addmm gate commit (with its trailer and a signature,
    so log.showSignature has something to verify) for git revert, and a
    .gitattributes giving every file the filter, diff and merge driver `evil`."""
    repo = pytorch_repo(path)
    for name, text in ((".gitattributes", "* filter=evil diff=evil merge=evil\n"), (BLAS_PATH, UNGATED),
                       ("test/test_cuda.py", "def test_blas():\n    pass\n")):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more sources")
    (repo / BLAS_PATH).write_text(BLAS)
    git(repo, "commit", "-qam", f"{GATE_SUBJECT}\n\n{PR}\n")
    header, _, message = gitb(repo, "cat-file", "commit", "HEAD").partition(b"\n\n")
    signature = b"gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n =abcd\n -----END PGP SIGNATURE-----"
    signed = gitb(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=header + b"\n" + signature + b"\n\n"
                  + message).decode().strip()
    git(repo, "update-ref", "refs/heads/main", signed)
    return repo


def set_config(repo: Path, settings: dict, tmp: Path, file: Path | None = None) -> None:
    for key, value in settings.items():
        key, value = key.format(**names(tmp)), value.format(**names(tmp))
        git(repo, "config", *(["-f", str(file)] if file else []), key, value)


def copied(tmp: Path, up: Path) -> Path:  # cp -a: same bytes and times, new inodes: the index's stat data is stale
    subprocess.run(["cp", "-a", str(up), str(tmp / "copy")], check=True)
    shutil.rmtree(up)
    return tmp / "copy"


def index_aged(seconds: float):
    def age(tmp: Path, up: Path) -> Path:  # older than the files: every entry racily clean
        os.utime(up / ".git/index", (time.time() + seconds, time.time() + seconds))
        return up
    return age


FILTER = {"filter.evil.clean": "{cat}", "filter.evil.smudge": "{cat}"}
PROCESS = {"filter.evil.process": "{run}"}
EXT = {"protocol.ext.allow": "always", "protocol.allow": "always"}
EVERYTHING = {
    **FILTER, "diff.evil.textconv": "{cat}", "diff.evil.command": "{run}", "diff.external": "{run}",
    "merge.evil.driver": "{run}", "core.fsmonitor": "{run}", "core.hooksPath": "{hooks}",
    "core.sshCommand": "{run}", "core.askPass": "{run}", "credential.helper": "{run}", "core.pager": "{run}",
    "pager.log": "{run}", "pager.status": "{run}", "pager.diff": "{run}", "pager.show": "{run}",
    "core.editor": "{run}", "sequence.editor": "{run}", "gpg.program": "{run}", "log.showSignature": "true",
    "commit.gpgSign": "true", "core.alternateRefsCommand": "{run}", "core.gitProxy": "{run}",
    "uploadpack.packObjectsHook": "{run}", **EXT, "url.ext::{run} %S .insteadOf": "/",
    "remote.origin.url": "{tmp}/nowhere", "remote.origin.uploadpack": "{upload}",
    "remote.origin.receivepack": "{receive}",
}
HOSTILE_CONFIG = [
    ("filter clean/smudge", FILTER, None), ("filter clean/smudge, cp -a copy", FILTER, copied),
    ("filter clean/smudge, index older than the files", FILTER, index_aged(-3600)),
    ("filter clean/smudge, index newer than the files", FILTER, index_aged(3600)),
    ("filter process", PROCESS, None), ("filter process, cp -a copy", PROCESS, copied),
    ("filter process, index older than the files", PROCESS, index_aged(-3600)),
    ("filter process, index newer than the files", PROCESS, index_aged(3600)),
    ("diff textconv", {"diff.evil.textconv": "{cat}"}, None), ("diff command", {"diff.evil.command": "{run}"}, None),
    ("diff.external", {"diff.external": "{run}"}, None), ("merge driver", {"merge.evil.driver": "{run}"}, None),
    ("core.fsmonitor", {"core.fsmonitor": "{run}"}, None), ("core.hooksPath", {"core.hooksPath": "{hooks}"}, None),
    ("core.sshCommand", {"core.sshCommand": "{run}"}, None), ("core.askPass", {"core.askPass": "{run}"}, None),
    ("credential.helper", {"credential.helper": "{run}"}, None),
    ("pagers", {k: v for k, v in EVERYTHING.items() if "pager" in k}, None),
    ("editors", {"core.editor": "{run}", "sequence.editor": "{run}"}, None),
    ("gpg", {"gpg.program": "{run}", "log.showSignature": "true", "commit.gpgSign": "true"}, None),
    ("core.alternateRefsCommand", {"core.alternateRefsCommand": "{run}"}, None),
    ("core.gitProxy", {"core.gitProxy": "{run}"}, None),
    ("uploadpack.packObjectsHook", {"uploadpack.packObjectsHook": "{run}"}, None),
    ("ext:: instead of /", {**EXT, "url.ext::{run} %S .insteadOf": "/"}, None),
    ("ext:: instead of file://", {**EXT, "url.ext::{run} %S .insteadOf": "file://"}, None),
    ("ext:: (sh -c) instead of /", {**EXT, "url.ext::sh -c touch% {tmp}/" + MARKER + "% %S .insteadOf": "/"}, None),
    ("origin uploadpack/receivepack", {"remote.origin.url": "{tmp}/nowhere", "remote.origin.uploadpack": "{upload}",
                                       "remote.origin.receivepack": "{receive}"}, None),
    ("everything in .git/config", EVERYTHING, None),
]


def hostile(settings: dict = {}, after=None, hooks: bool = False, include: str | None = None, decoys: bool = False):
    """The section-1 checkout, then `after` (a copy, an aged index), then the
    hostile settings (in .git/config, or in a file outside .git that
    `include` names), executable hooks of every name in .git/hooks, and decoys
    for the GIT_* variables to point at."""
    def setup(tmp: Path) -> Ctx:
        up = base_checkout(tmp / "up")
        up = after(tmp, up) if after else up
        if include:
            set_config(up, settings, tmp, file=tmp / "evil.gitconfig")
            git(up, "config", include, str(tmp / "evil.gitconfig"))
        else:
            set_config(up, settings, tmp)
        for hook in HOOKS if hooks else ():
            shutil.copy(Path(names(tmp)["hooks"]) / hook, up / ".git/hooks" / hook)
        if decoys:
            (tmp / "decoy-objects").mkdir()  # for GIT_OBJECT_DIRECTORY
            pytorch_repo(tmp / "decoy", test_file="def broken(:\n")  # for GIT_DIR
        return Ctx(tmp, up)
    return setup


def three_ways(name: str, setup, env: dict = {}) -> list[Case]:
    """--check, --out, --out --branch: exit 0 and what a clean checkout gives."""
    fixes = (BN_FIX, ADDMM.id, "--upstream", "{up}", "--json")
    return [Case(f"{name} [--check]", setup, fixes + ("--check",), env=env, verify=same_report),
            Case(f"{name} [--out]", setup, fixes + ("--out", "{tmp}/o"), env=env, verify=same_series),
            Case(f"{name} [--out --branch]", setup, fixes + ("--out", "{tmp}/o", "--branch", "fixes"), env=env,
                 verify=same_series_and_branch)]


def partial_clone(remote_gone: bool):
    """A blob:none clone, sparse so that only torch/__init__.py was fetched:
    reading the target would need a fetch through a hostile upload-pack."""
    def setup(tmp: Path) -> Ctx:
        src = pytorch_repo(tmp / "src")
        git(src, "config", "uploadpack.allowFilter", "true")
        up = tmp / "up"  # gitb: testing.git allows no lazy fetch
        gitb(tmp, "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{src}", str(up))
        gitb(up, "sparse-checkout", "set", "--no-cone", "/torch/__init__.py")
        gitb(up, "checkout", "-q", "main")
        assert b"?" in gitb(up, "rev-list", "--objects", "--missing=print", "HEAD")  # the target's blob
        git(up, "config", "remote.origin.uploadpack", names(tmp)["upload"])
        if remote_gone:
            shutil.rmtree(src)
        return Ctx(tmp, up)
    return setup


def partial_cases(name: str, setup) -> list[Case]:
    base = (BN_FIX, "--upstream", "{up}")
    return [Case(f"{name} [{' '.join(extra)}]", setup, base + extra, code=2, message=(TARGET, "git -C"))
            for extra in (("--check",), ("--out", "{tmp}/o"), ("--out", "{tmp}/o", "--branch", "fixes"))]


EVIL_PARAMETERS = ("'core.fsmonitor'='{run}' 'diff.external'='{run}' 'log.showsignature'='true' "
                   "'gpg.program'='{run}' 'protocol.ext.allow'='always' 'url.ext::{run} %S .insteadof'='/' "
                   "'core.hookspath'='{hooks}' 'core.pager'='{run}'")
EVIL_ENV = {"GIT_OBJECT_DIRECTORY": "{tmp}/decoy-objects", "GIT_DIR": "{tmp}/decoy/.git",
            "GIT_CONFIG_PARAMETERS": EVIL_PARAMETERS, "GIT_INDEX_FILE": "{tmp}/no-such-index",
            "GIT_EXTERNAL_DIFF": "{run}", "GIT_SSH_COMMAND": "{run}",
            "GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "{run}",
            "GIT_CONFIG_KEY_1": "log.showSignature", "GIT_CONFIG_VALUE_1": "true"}
ENV_ROWS = [(k, {k: v}) for k, v in EVIL_ENV.items() if not k.startswith("GIT_CONFIG_") or k == "GIT_CONFIG_PARAMETERS"]
ENV_ROWS += [("GIT_CONFIG_COUNT", {k: v for k, v in EVIL_ENV.items() if k.startswith("GIT_CONFIG_") and
                                   k != "GIT_CONFIG_PARAMETERS"}), ("every GIT_* at once", EVIL_ENV)]

SECTION_1 = [
    *(c for name, settings, after in HOSTILE_CONFIG for c in three_ways(name, hostile(settings, after))),
    *three_ways("executable hooks of every name in .git/hooks", hostile(hooks=True)),
    *three_ways("include.path", hostile(EVERYTHING, include="include.path")),
    *three_ways("includeIf.gitdir:/.path", hostile(EVERYTHING, include="includeIf.gitdir:/.path")),
    *(c for name, env in ENV_ROWS for c in three_ways(f"env {name}", hostile(decoys=True), env=env)),
    *partial_cases("partial clone", partial_clone(remote_gone=False)),
    *partial_cases("partial clone, remote gone", partial_clone(remote_gone=True)),
]


# ----------------------------------------------------------------------------
# Section 2: nothing of the user's deleted or silently replaced.
# Against 64570b9 26 of 39 rows failed (the signal rows vary with timing): files
# named like make_patch's were taken for its own (6) and an edited patch replaced;
# .patches.old-*/.new-* of the user's were swept (2); a failing run rewrote the
# series; a .lock or a 300-character --branch was found only after the series and
# the objects were written (2); --out in a linked worktree or in the main one (2);
# Ctrl-C left a traceback or half the work, SIGTERM killed without clean-up (-15).
# Against 1a5b9b9: none.

def plain(tmp: Path) -> Ctx:
    return Ctx(tmp, pytorch_repo(tmp / "up"))


def first_run(tmp: Path, up: Path, out: str = "o") -> None:
    run = make_patch(BN_FIX, "--upstream", str(up), "--out", out, cwd=tmp, env={"TMPDIR": str(tmp / "tmp")})
    assert run.returncode == 0, run.stderr


def new_commit(up: Path) -> None:
    (up / "torch/__init__.py").write_text("__version__ = '0.1'\n")
    git(up, "commit", "-qam", "next")


def users_file_in_out(name: str):
    def setup(tmp: Path) -> Ctx:
        (tmp / "mine").mkdir()
        (tmp / "mine" / name).write_text("From the user's own work, not make_patch's\n")
        return plain(tmp)
    return setup


def earlier_series(edit: bool):
    """A series make_patch wrote into o; then the user edits a patch in it, or
    (untouched) the checkout moves on so the rerun writes another one."""
    def setup(tmp: Path) -> Ctx:
        ctx = plain(tmp)
        first_run(tmp, ctx.up)
        if edit:
            patch = next((tmp / "o").glob("0001-*.patch"))
            patch.write_text(patch.read_text().replace("Subject: [PATCH]", "Subject: [PATCH] (my wording)"))
        else:
            new_commit(ctx.up)
        return ctx
    return setup


def users_dirs_beside_out(with_series: bool):
    def setup(tmp: Path) -> Ctx:
        ctx = plain(tmp)
        if with_series:  # a series of make_patch's own to replace
            first_run(tmp, ctx.up, "patches")
            new_commit(ctx.up)
        for name in (".patches.old-backup", ".patches.new-2024", ".patches.new-123", ".patches.old-99999"):
            (tmp / name).mkdir()
            (tmp / name / "notes.txt").write_text(f"{name}: mine\n")
            (tmp / name / "series").write_text("0001-mine.patch\n")
        return ctx
    return setup


def good_series_then_failing_fix(tmp: Path) -> Ctx:
    first_run(tmp, pytorch_repo(tmp / "good"))
    return Ctx(tmp, pytorch_repo(tmp / "up", test_file="def broken(:\n"))


def branch_locked(tmp: Path) -> Ctx:
    ctx = plain(tmp)
    (ctx.up / ".git/refs/heads/fixes.lock").write_text("")
    return ctx


def with_worktree(tmp: Path, upstream: str) -> Ctx:
    up = pytorch_repo(tmp / "up")
    git(up, "worktree", "add", "-q", str(tmp / "wt"))
    return Ctx(tmp, tmp / upstream)


def series_from_earlier_commit(tmp: Path) -> Ctx:
    ctx = plain(tmp)
    first_run(tmp, ctx.up)
    new_commit(ctx.up)
    return ctx


OUT = (BN_FIX, "--upstream", "{up}", "--out", "o")
USER_NAMES = ["0001-mm-fix-leak.patch", "0002-fix-typo-in-readme.patch", "9999-z.patch",
              "0001-pytorch-batchnorm-negative-running-var.patch", "series", "BASE"]
# seconds after Python's own start-up (~20 ms here), when make_patch's first line runs
INTERRUPT_DELAYS = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.7, 1.0, 1.5]

SECTION_2 = [
    *(Case(f"--out holding the user's {n}", users_file_in_out(n), (BN_FIX, "--upstream", "{up}", "--out", "mine"),
           code=2, message="did not write") for n in USER_NAMES),
    Case("a patch of an earlier series edited by the user", earlier_series(edit=True), OUT, code=2,
         message="changed since make_patch wrote it"),
    Case("an earlier series untouched is replaced", earlier_series(edit=False), OUT, verify=rewrites_series),
    Case("user directories beside --out (new)", users_dirs_beside_out(False), OUT[:-1] + ("patches",)),
    Case("user directories beside --out (replaced)", users_dirs_beside_out(True), OUT[:-1] + ("patches",)),
    Case("a failing fix leaves the earlier series", good_series_then_failing_fix, OUT, code=1),
    Case("--branch X with refs/heads/X.lock", branch_locked, OUT + ("--branch", "fixes"), code=2, message="fixes"),
    Case("--branch of 300 characters", plain, OUT + ("--branch", "b" * 300), code=2, message="--branch"),
    Case("--out inside a linked worktree", lambda t: with_worktree(t, "up"),
         (BN_FIX, "--upstream", "{up}", "--out", "{tmp}/wt/patches"), code=2, message="worktree"),
    Case("--out inside the main worktree of a linked --upstream", lambda t: with_worktree(t, "wt"),
         (BN_FIX, "--upstream", "{up}", "--out", "{tmp}/up/patches"), code=2, message="worktree"),
    *(Case(f"SIGINT (Ctrl-C) after {d}s of --out --branch", plain, OUT + ("--branch", "fixes"),
           code=(0, 130, -signal.SIGINT), signal=(signal.SIGINT, d), verify=complete_or_untouched)
      for d in INTERRUPT_DELAYS),
    *(Case(f"SIGTERM after {d}s of --out --branch over an earlier series", series_from_earlier_commit,
           OUT + ("--branch", "fixes"), code=(0, 130, 143), signal=(signal.SIGTERM, d),
           verify=complete_or_untouched) for d in INTERRUPT_DELAYS),
]


# ----------------------------------------------------------------------------
# Section 3: the right patch on unusual but real input.
# Against 64570b9 8 of 11 rows failed: CRLF lost on the way to the patch (git
# apply fails); the BOM dropped; the revert matched the trailer of PR 1723409 as a
# substring; a gate commit without a parent (root, shallow) was an internal error
# (3); no --max-target-size (2; the 40 MB target took 25 s). Against 1a5b9b9: none.

def target(content: bytes, **extra: bytes):
    def setup(tmp: Path) -> Ctx:
        return Ctx(tmp, make_repo(tmp / "up", {**pytorch_files(content), **extra}))
    return setup


def gate_without_its_trailer(tmp: Path) -> Ctx:
    """The gate commit carries no trailer; an unrelated later commit names a PR
    whose number starts with the gate's (1723409 vs 172340)."""
    up = make_repo(tmp / "up", {"torch/__init__.py": "", BLAS_PATH: UNGATED})
    (up / BLAS_PATH).write_text(BLAS)
    git(up, "commit", "-qam", GATE_SUBJECT)
    (up / "README").write_text("later\n")
    git(up, "add", "-A")
    git(up, "commit", "-qm", f"unrelated work\n\n{PR.replace('172340', '1723409')}\n")
    return Ctx(tmp, up, {"unrelated": [git(up, "rev-parse", "HEAD").strip()]})


def gate_as_root(tmp: Path) -> Ctx:
    up = make_repo(tmp / "up", {"torch/__init__.py": "", BLAS_PATH: BLAS})
    git(up, "commit", "-q", "--amend", "-m", f"{GATE_SUBJECT}\n\n{PR}\n")
    return Ctx(tmp, up)


def gate_at_shallow_boundary(depth: int, later: bool):
    def setup(tmp: Path) -> Ctx:
        src = make_repo(tmp / "src", {"torch/__init__.py": "", BLAS_PATH: UNGATED})
        (src / BLAS_PATH).write_text(BLAS)
        git(src, "commit", "-qam", f"{GATE_SUBJECT}\n\n{PR}\n")
        if later:
            (src / "README").write_text("later\n")
            git(src, "add", "-A")
            git(src, "commit", "-qm", "later work")
        git(tmp, "clone", "-q", f"--depth={depth}", f"file://{src}", str(tmp / "up"))
        return Ctx(tmp, tmp / "up")
    return setup


def huge_target(tmp: Path) -> Ctx:
    line = "# " + "x" * 77 + "\n"
    return Ctx(tmp, pytorch_repo(tmp / "up", test_file=FIXTURE.read_text() + line * (40 * 2**20 // len(line))))


FIX_TEXT = FIXTURE.read_bytes()
BRANCH = (BN_FIX, "--upstream", "{up}", "--out", "o", "--branch", "fixes")
REVERT = (ADDMM.id, "--upstream", "{up}", "--out", "o", "--json")

SECTION_3 = [
    Case("CRLF target", target(FIX_TEXT.replace(b"\n", b"\r\n")), BRANCH, verify=applies_like_the_branch),
    Case("target with a UTF-8 BOM", target(BOM + FIX_TEXT), BRANCH, verify=applies_like_the_branch),
    Case("target indented with tabs", target(re.sub(rb"(?m)^((?:    )+)", lambda m: b"\t" * (len(m[1]) // 4),
                                                    FIX_TEXT)), BRANCH, verify=applies_like_the_branch),
    Case("target without a final newline", target(FIX_TEXT.rstrip(b"\n")), BRANCH, verify=applies_like_the_branch),
    Case("a latin-1 file beside the target", target(FIX_TEXT, **{"test/latin1_data.py": b"s = 'caf\xe9'\n"}),
         BRANCH, verify=applies_like_the_branch),
    Case("revert: trailer of another PR with the number as prefix", gate_without_its_trailer, REVERT,
         verify=transformation_taken),
    Case("revert: the gate commit is the root commit", gate_as_root, REVERT, verify=transformation_taken),
    Case("revert: shallow clone whose tip is the gate commit", gate_at_shallow_boundary(1, later=False), REVERT,
         verify=transformation_taken),
    Case("revert: shallow clone cut at the gate commit", gate_at_shallow_boundary(2, later=True), REVERT,
         verify=transformation_taken),
    Case("40 MB target is refused", huge_target, (BN_FIX, "--upstream", "{up}", "--check"), code=2,
         message=("limit", "--max-target-size")),
    Case("40 MB target with --max-target-size 64", huge_target,
         (BN_FIX, "--upstream", "{up}", "--check", "--max-target-size", "64"), code=(0, 1)),
]


# ----------------------------------------------------------------------------
# Section 4: no internal error, no traceback.
# Against 64570b9 9 of 13 rows failed: SHA-256 (GitPython, exit 3); BrokenPipeError
# on a closed stdout; --branch brü under LC_ALL=C called invalid; Ctrl-C during the
# imports gave a traceback (4); --json errors were not JSON (2). A Ctrl-C in
# Python's own start-up, before make_patch's first line runs, is CPython's and
# out of make_patch's reach: such a run is repeated (see launch()).

def sha256_repo(tmp: Path) -> Ctx:
    up = tmp / "up"
    up.mkdir()
    git(up, "init", "-q", "--object-format=sha256", "-b", "main")
    for name, text in pytorch_files().items():
        (up / name).parent.mkdir(parents=True, exist_ok=True)
        (up / name).write_text(text)
    git(up, "add", "-A")
    git(up, "commit", "-q", "-m", "upstream")
    return Ctx(tmp, up)


C_LOCALE = {"PYTHONUTF8": "0", "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""}

SECTION_4 = [
    Case("SHA-256 repository", sha256_repo, OUT, verify=applies_as_transformed),
    Case("--check --json into a closed pipe", plain, (BN_FIX, "--upstream", "{up}", "--check", "--json"),
         closed_stdout=True),
    Case("--branch brü under LC_ALL=C", plain, OUT + ("--branch", "brü"), env=C_LOCALE, verify=branch_exists("brü")),
    # 0: the run was over before the signal (the later delays on a fast machine); complete_or_untouched checks it
    *(Case(f"SIGINT after {d}s (imports)", plain, OUT + ("--branch", "fixes"), code=(0, 130, -signal.SIGINT),
           signal=(signal.SIGINT, d), verify=complete_or_untouched) for d in (0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3)),
    Case("30 runs of --check", plain, (BN_FIX, "--upstream", "{up}", "--check"), repeat=30),
    Case("--json on a missing --upstream", plain, (BN_FIX, "--upstream", "{tmp}/nope", "--json"), code=2,
         message="no such file", verify=json_error),
    Case("--json with --check and --out", plain, OUT + ("--check", "--json"), code=2, message="cannot be combined",
         verify=json_error),
]

CASES = SECTION_1 + SECTION_2 + SECTION_3 + SECTION_4


def test_case_ids_are_unique():
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile(case: Case, tmp_path: Path, reference: dict):
    (tmp_path / "tmp").mkdir()
    write_evil_programs(tmp_path)
    ctx = case.setup(tmp_path)
    argv = [fill(a, ctx) for a in case.args]
    env = {k: fill(v, ctx) for k, v in case.env.items()}
    assert not list(tmp_path.rglob(MARKER)), "the setup itself ran a hostile program"
    for _ in range(case.repeat):
        refs = refs_of(ctx.up) if (ctx.up / ".git").exists() else None
        before = full_snapshot(tmp_path)
        run = launch(case, ctx, argv, env)
        problems = violations(case, ctx, argv, run, before, refs)
        assert not problems, "; ".join(problems) + f"\nstdout: {run.stdout[-3000:]}\nstderr: {run.stderr[-3000:]}"
        if case.verify:
            case.verify(ctx, run, reference)
