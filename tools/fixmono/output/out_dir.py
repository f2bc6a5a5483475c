"""--out, the user's directory: a series is replaced only where make_patch
wrote it itself (its manifest), through a holder directory beside it, in
steps that can be undone."""
from __future__ import annotations

import ctypes
import errno
import glob
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from fixmono.model.errors import UserError, describe
from fixmono.sources.scratch import abandoned, made_and_claimed, remove_if_empty
from fixmono.sources.upstream import Upstream

# --out is the user's directory. make_patch replaces only a series it wrote
# itself, as the manifest there records (names and sha256 of its files), and
# works in a holder directory beside it: `.<out>.make_patch-<random>`, marked
# by STAGING_MARKER with the owner's pid, so nothing of the user's is ever
# taken for make_patch's leftovers.
# The HTML site of `report --html` / `drift --html` is written the same way,
# under its own names (tool="fixmono-site").
MANIFEST = ".make_patch-manifest"
STAGING_MARKER = ".make_patch-staging"


def manifest_name(tool: str) -> str:
    return f".{tool}-manifest"


def marker_name(tool: str) -> str:
    return f".{tool}-staging"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_text(files: dict[str, bytes], tool: str = "make_patch") -> bytes:
    lines = [f"# Files {tool} wrote here; it replaces only these, unchanged. sha256  name"]
    lines += [f"{digest(data)}  {name}" for name, data in sorted(files.items())]
    return ("\n".join(lines) + "\n").encode()


def read_manifest(out: Path, tool: str = "make_patch") -> dict[str, str]:
    try:
        text = (out / manifest_name(tool)).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    entries = (line.split("  ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {name: sha for sha, name in entries}


class SeriesWrite:
    """Replace the series in `out` in steps that can be undone: stage() writes
    the new series beside `out`, commit() swaps it in (the old one is kept),
    rollback() swaps it back, finish() drops the old one."""

    def __init__(self, out: Path, tool: str = "make_patch", flag: str = "--out"):
        self.out, self.tool, self.flag = out, tool, flag
        self.holder: Path | None = None
        self.committed = False
        self.made_parents: list[Path] = []  # folders above --out this run created
        self.lock: int | None = None  # our lock on the holder's marker

    def stage(self, files: dict[str, bytes]) -> None:
        try:
            self.made_parents = [p for p in self.out.parents if not p.exists()]
            self.out.parent.mkdir(parents=True, exist_ok=True)
            sweep_staging(self.out, self.tool)
            self.holder, self.lock = made_and_claimed(
                lambda: Path(tempfile.mkdtemp(prefix=f".{self.out.name}.{self.tool}-", dir=self.out.parent)),
                marker_name(self.tool))
            new = self.holder / "new"
            new.mkdir()  # not mkdtemp: the series gets the umask's mode, like any new directory
            for name, data in {**files, manifest_name(self.tool): manifest_text(files, self.tool)}.items():
                (new / name).write_bytes(data)
        except OSError as err:
            self.discard()
            raise UserError(f"{self.flag} {self.out}: cannot write there: {err.strerror or err}") from None

    def commit(self) -> None:
        new, old = self.holder / "new", self.holder / "old"
        if not os.path.lexists(self.out):
            new.rename(self.out)
        elif exchange(new, self.out):
            new.rename(old)
        else:  # two renames; a run killed between them is repaired by sweep_staging
            self.out.rename(old)
            new.rename(self.out)
        self.committed = True

    def rollback(self) -> None:
        if not self.committed:
            return
        new, old = self.holder / "new", self.holder / "old"
        if not old.exists():  # there was no series before
            self.out.rename(new)
        elif not exchange(old, self.out):
            self.out.rename(new)
            old.rename(self.out)
        self.committed = False

    def finish(self) -> None:
        if self.holder is not None:
            shutil.rmtree(self.holder, ignore_errors=True)
            self.holder = None
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None

    def discard(self) -> None:
        """Give up: no holder, and no folder this run made above --out."""
        self.rollback()
        self.finish()
        for folder in self.made_parents:  # innermost first
            try:
                folder.rmdir()
            except OSError:  # not empty: something else is there now
                break


def sweep_staging(out: Path, tool: str = "make_patch") -> None:
    """Remove the holders that killed runs left beside `out` (marked, with
    nobody holding the marker's lock); if one died between its two renames
    (`out` missing), its old series is put back first. Directories without
    the marker are the user's, but for empty ones: a run killed between
    making its holder and claiming it."""
    for path in sorted(out.parent.glob(f".{glob.escape(out.name)}.{tool}-*")):
        if path.is_symlink() or remove_if_empty(path) or not abandoned(path / marker_name(tool)):
            continue
        if (path / "old").is_dir() and not os.path.lexists(out):
            (path / "old").rename(out)
        shutil.rmtree(path, ignore_errors=True)


def exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux renameat2 RENAME_EXCHANGE).
    False where the system or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError, TypeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def worktrees(upstream: Upstream) -> list[Path]:
    """Every working tree of the upstream's repository (main and linked)."""
    proc = upstream.checkout.git("worktree", "list", "--porcelain", "-z")
    if proc.returncode:
        return [upstream.path]
    return [Path(f[len("worktree "):]).resolve() for f in proc.stdout.split("\0") if f.startswith("worktree ")]


def check_out_dir(upstream: Upstream, out: Path) -> Path:
    """`out` resolved (a symlink: its target), once it is safe to replace:
    neither inside nor around the upstream or any of its worktrees, nor around
    the current directory, and holding only a series make_patch wrote."""
    where = f"--out {out}"
    if out.is_symlink() and not out.exists():
        raise UserError(f"{where}: is a dangling symlink")
    try:
        resolved = out.resolve()
        cwd = Path.cwd().resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a symlink loop
        raise UserError(f"{where}: cannot resolve it: {describe(err)}") from None
    git_dir = upstream.common_dir.resolve()
    if inside(resolved, upstream.path) or inside(resolved, git_dir):
        raise UserError(f"{where}: is inside the upstream checkout; choose a directory outside it")
    for tree in worktrees(upstream):
        if inside(resolved, tree):
            raise UserError(f"{where}: is inside {tree}, a worktree of the upstream repository; "
                            "choose a directory outside it")
    if inside(upstream.path, resolved) or inside(git_dir, resolved):
        raise UserError(f"{where}: contains the upstream checkout {upstream.path}; "
                        "choose a directory of its own")
    if inside(cwd, resolved):
        raise UserError(f"{where}: is the current directory or contains it; name a directory for the series")
    if resolved.exists() and not resolved.is_dir():
        raise UserError(f"{where}: exists and is not a directory")
    if resolved.is_dir():
        check_ours(resolved, where)
    parent = resolved.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK) or (resolved.is_dir() and not os.access(resolved, os.W_OK)):
        raise UserError(f"{where}: not writable")
    return resolved


def check_ours(out: Path, where: str, tool: str = "make_patch") -> None:
    """Refuse a directory holding anything but an unchanged series `tool` wrote."""
    try:
        names = sorted(p.name for p in out.iterdir())
    except OSError as err:
        raise UserError(f"{where}: cannot read it: {describe(err)}") from None
    manifest = manifest_name(tool)
    written = read_manifest(out, tool)
    foreign = [n for n in names if n != manifest and n not in written]
    if foreign or (names and not written):
        first = (foreign or names)[0]
        raise UserError(f"{where}: holds files {tool} did not write ({first}, ...); "
                        "give an empty or new directory")
    for name in names:
        path = out / name
        if name == manifest:
            continue
        try:
            changed = path.is_symlink() or not path.is_file() or digest(path.read_bytes()) != written[name]
        except OSError as err:
            raise UserError(f"{where}: cannot read {name}: {describe(err)}") from None
        if changed:
            raise UserError(f"{where}: {name} was changed since {tool} wrote it; "
                            "keep your edits elsewhere or give another directory")
