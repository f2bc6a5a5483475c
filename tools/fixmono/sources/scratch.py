"""Scratch space: one temporary directory per run, scratch repositories, and
trees built in them along the changed paths only.

The run's directory (in $TMPDIR, `make_patch-<pid>-<random>`, holding a
marker file) is removed at exit, on Ctrl-C and on SIGTERM/SIGHUP; the next run
removes those a SIGKILLed run left (its marker names a dead process).

A ScratchRepo is a bare repository of ours whose object store falls back on
a checkout's (alternates): it reads the checkout's objects under our config
only (no filters, no promisor remote, no hooks of the checkout), and new
objects land in it, never in the checkout.
"""
from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

from fixmono.model.errors import one_line
from fixmono.sources.git import GitError, clean_env, run_git

MARKER = ".make_patch-scratch"
RUN_DIR = re.compile(r"make_patch-\d+-\w+")
INTERRUPTS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_run_dir: Path | None = None


PAUSE_POINTS = ("opened", "transformed", "staged", "branch-created", "series-swapped", "written")


def pause_point(name: str) -> None:
    """Test hook: with FIXMONO_PAUSE_AT=<name>, write <name> to the file
    FIXMONO_PAUSE_FILE and wait there, so a test kills the run exactly at this
    point of its work and knows that it did (tests/test_interruption.py)."""
    if os.environ.get("FIXMONO_PAUSE_AT") == name:
        signal_file = Path(os.environ["FIXMONO_PAUSE_FILE"])
        partial = signal_file.with_name(signal_file.name + ".partial")
        partial.write_text(name)
        partial.replace(signal_file)  # whole when it appears: the test reads it as soon as it exists
        time.sleep(3600)


def claim(marker: Path) -> int:
    """Write `marker` and lock it; the lock lasts until the returned descriptor
    is closed or the process ends, however it ends. A lock, unlike a pid, means
    the same from every PID namespace (containers, Bazel's sandboxes) that
    shares the directory."""
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def made_and_claimed(make, marker_name: str, tries: int = 3) -> tuple[Path, int]:
    """A folder from `make()` with its marker claimed. A SIGKILL can fall between
    the two, leaving the folder empty: sweepers remove empty ones (remove_if_empty),
    so a live run can lose its folder in that instant to another run's sweep; it
    makes another."""
    for attempt in range(tries):
        folder = make()
        try:
            return folder, claim(folder / marker_name)
        except FileNotFoundError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def remove_if_empty(folder: Path) -> bool:
    """Remove a holder a run made and was killed before claiming: it is empty
    (os.rmdir removes nothing else)."""
    try:
        os.rmdir(folder)
        return True
    except OSError:
        return False


def abandoned(marker: Path) -> bool:
    """Whether the process that claimed `marker` is gone (nobody holds its lock)."""
    try:
        fd = os.open(marker, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:  # held by a live process (this one included)
        return False
    finally:
        os.close(fd)


def run_dir() -> Path:
    """This run's scratch directory, made on first use."""
    global _run_dir
    if _run_dir is None:
        sweep_dead_runs()
        # an interrupt between making the folder and registering its removal would leave it behind
        # (and tempfile's first gettempdir() writes a probe file): signals wait until both are done
        held = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
        try:
            tempfile.gettempdir()
            atexit.register(remove_run_dir)
            _run_dir, _ = made_and_claimed(lambda: Path(tempfile.mkdtemp(prefix=f"make_patch-{os.getpid()}-")),
                                           MARKER)  # the lock is held until the process ends
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return _run_dir


def remove_run_dir() -> None:
    global _run_dir
    if _run_dir is not None:
        for _ in range(5):  # a git an interrupt stopped may still be finishing a write into it: again, briefly
            shutil.rmtree(_run_dir, ignore_errors=True)
            if not _run_dir.exists():
                break
            time.sleep(0.1)
        _run_dir = None


def sweep_dead_runs() -> None:
    """Remove the scratch directories of runs that were SIGKILLed: ours (same
    owner), carrying the marker, whose lock nobody holds."""
    root = Path(tempfile.gettempdir())
    try:
        entries = list(root.iterdir())
    except OSError:
        return
    for path in entries:
        try:
            if (not RUN_DIR.fullmatch(path.name) or path.is_symlink() or not path.is_dir()
                    or path.stat().st_uid != os.getuid() or remove_if_empty(path)
                    or not abandoned(path / MARKER)):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)


class ScratchRepo:
    """A temporary bare repository borrowing `objects` (a checkout's object
    store): reads see the checkout's objects, writes stay here."""

    def __init__(self, objects: Path, object_format: str = "sha1", shallow: Path | None = None):
        root = Path(tempfile.mkdtemp(prefix="repo-", dir=run_dir()))
        self.git_dir = root / "scratch.git"
        self._env = clean_env(GIT_DIR=str(self.git_dir), GIT_INDEX_FILE=str(root / "index"),
                              GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
        self.git("init", "-q", "--bare", f"--object-format={object_format}", str(self.git_dir))
        # bytes: the path as the file system has it, whatever the locale
        (self.git_dir / "objects" / "info" / "alternates").write_bytes(os.fsencode(objects.resolve()) + b"\n")
        if shallow is not None and shallow.is_file():  # a shallow clone's boundary: its commits have no parents
            shutil.copyfile(shallow, self.git_dir / "shallow")

    def run(self, *args: str, input: bytes | str | None = None, env: dict | None = None,
            binary: bool = False):
        return run_git(None, *args, env={**self._env, **(env or {})}, input=input, binary=binary)

    def git(self, *args: str, input: bytes | str | None = None, env: dict | None = None,
            binary: bool = False):
        """stdout of a git command that must succeed (GitError otherwise)."""
        proc = self.run(*args, input=input, env=env, binary=binary)
        if proc.returncode:
            raise GitError(f"git {args[0]} failed: {one_line(proc.stderr)}")
        return proc.stdout


def tree_with(scratch: ScratchRepo, base_tree: str, files: dict[str, str | None]) -> str:
    """`base_tree` with `files` written (None: removed). Only the trees along
    their paths are read or made: a PyTorch-sized tree is never loaded whole,
    and a treeless partial clone (`--upstream URL@REF`) has no other trees."""
    nested: dict = {}
    for path, text in files.items():
        *dirs, name = path.split("/")
        node = nested
        for d in dirs:
            node = node.setdefault(d + "/", {})
        node[name] = text
    return _tree(scratch, base_tree, nested) or scratch.git("mktree", input="").strip()


def _tree(scratch: ScratchRepo, tree: str | None, changes: dict) -> str | None:
    entries: dict[str, tuple[str, str, str]] = {}  # name -> (mode, type, id)
    for record in (scratch.git("ls-tree", "-z", tree).split("\0") if tree else []):
        if record:
            info, name = record.split("\t", 1)
            mode, kind, oid = info.split()
            entries[name] = (mode, kind, oid)
    for key, value in changes.items():
        if key.endswith("/"):  # a directory on the way
            name = key[:-1]
            old = entries.get(name)
            sub = _tree(scratch, old[2] if old and old[1] == "tree" else None, value)
            if sub is None:
                entries.pop(name, None)
            else:
                entries[name] = ("040000", "tree", sub)
        elif value is None:
            entries.pop(key, None)
        else:
            blob = scratch.git("hash-object", "-w", "--stdin", input=value).strip()  # stdin: no filters
            mode = entries[key][0] if key in entries and entries[key][1] == "blob" else "100644"
            entries[key] = (mode, "blob", blob)
    if not entries:
        return None
    listing = "".join(f"{mode} {kind} {oid}\t{name}\0" for name, (mode, kind, oid) in entries.items())
    # --missing: sibling trees a treeless clone never fetched are referenced, not read
    return scratch.git("mktree", "-z", "--missing", input=listing).strip()
