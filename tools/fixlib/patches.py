"""The patch writer: commits built in a scratch repository, exported with
`git format-patch`, and the quilt-style `series`.

The scratch repository (scratch.py) borrows the upstream's objects, so
nothing is written into the user's repository unless a branch is asked for
(then the new objects are unpacked into it and one new ref is created). User
and system git config are ignored there, and author, date and message come
from the fix metadata: the same inputs give byte-identical patches on every
machine. Patches are bytes: a CRLF file keeps its CRs.
"""
from __future__ import annotations

import ctypes
import errno
import glob
import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools.fixlib.errors import UserError
from tools.fixlib.model import Fix
from tools.fixlib.gitrun import as_git_text, one_line
from tools.fixlib.scratch import ScratchRepo, abandoned, claim
from tools.fixlib.upstream import Upstream, describe

FORMAT_PATCH = ["format-patch", "--stdout", "--no-signature", "--full-index", "--no-renames",
                "--no-color", "--no-notes", "--no-thread", "--no-attach", "--no-signoff",
                "--src-prefix=a/", "--dst-prefix=b/", "-U3", "--inter-hunk-context=0"]


@dataclass(frozen=True)
class Entry:
    fix: Fix
    files: dict[str, str | None]  # path -> patched text (None: delete the file)
    note: str = ""  # an extra paragraph for the commit message


def commit_message(fix: Fix, note: str = "") -> str:
    body = [fix.title, "", fix.description.strip(), ""]
    if note:
        body += [note, ""]
    if fix.references:
        body += ["References:", *(f"  {r}" for r in fix.references), ""]
    body += [f"{k}: {v}" for k, v in fix.dep3.trailers()]
    body.append(f"Fix-Id: {fix.id}")
    return "\n".join(body) + "\n"


def patch_name(index: int, fix: Fix) -> str:
    return f"{index:04d}-{fix.id}.patch"


def commit(scratch: ScratchRepo, parent: str, entry: Entry) -> str:
    """The commit of `entry` on `parent`, built in the scratch repository."""
    base_tree = scratch.git("rev-parse", f"{parent}^{{tree}}").strip()
    tree = tree_with(scratch, base_tree, entry.files)
    fix = entry.fix
    name, email = re.match(r"^(.*?)\s*<(.+)>$", fix.author).groups()
    date = f"{fix.dep3.last_update}T00:00:00+0000"
    ident = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
             "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date}
    return scratch.git("commit-tree", "--no-gpg-sign", tree, "-p", parent,
                       input=commit_message(fix, entry.note), env=ident).strip()


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


def build_commits(upstream: Upstream, entries: list[Entry]) -> list[str]:
    shas, parent = [], upstream.head
    for entry in entries:
        parent = commit(upstream.scratch, parent, entry)
        shas.append(parent)
    return shas


def format_patch(scratch: ScratchRepo, sha: str, index: int, total: int) -> bytes:
    """The patch as bytes: a CRLF target keeps its CRs, so the patch applies."""
    prefix = "PATCH" if total == 1 else f"PATCH {index}/{total}"
    return scratch.git(*FORMAT_PATCH, f"--subject-prefix={prefix}", "-1", sha, binary=True)


def base_line(upstream: Upstream) -> str:
    from tools.fixlib.remote import is_remote

    if upstream.spec.startswith("pip:") or is_remote(upstream.spec):
        return f"{upstream.spec} {upstream.head}\n"
    return f"commit {upstream.head}\n"


def series_files(upstream: Upstream, entries: list[Entry]) -> dict[str, bytes]:
    """The files of the series: NNNN-<id>.patch, `series` and `BASE`."""
    names = [patch_name(i, e.fix) for i, e in enumerate(entries, 1)]
    files = {name: format_patch(upstream.scratch, sha, i, len(names))
             for i, (sha, name) in enumerate(zip(build_commits(upstream, entries), names), 1)}
    files["series"] = "".join(f"{n}\n" for n in names).encode()
    files["BASE"] = base_line(upstream).encode()
    return files


# --out is the user's directory. make_patch replaces only a series it wrote
# itself, as the manifest there records (names and sha256 of its files), and
# works in a holder directory beside it: `.<out>.make_patch-<random>`, marked
# by STAGING_MARKER with the owner's pid, so nothing of the user's is ever
# taken for make_patch's leftovers.
MANIFEST = ".make_patch-manifest"
STAGING_MARKER = ".make_patch-staging"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_text(files: dict[str, bytes]) -> bytes:
    lines = ["# Files make_patch wrote here; it replaces only these, unchanged. sha256  name"]
    lines += [f"{digest(data)}  {name}" for name, data in sorted(files.items())]
    return ("\n".join(lines) + "\n").encode()


def read_manifest(out: Path) -> dict[str, str]:
    try:
        text = (out / MANIFEST).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    entries = (line.split("  ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {name: sha for sha, name in entries}


class SeriesWrite:
    """Replace the series in `out` in steps that can be undone: stage() writes
    the new series beside `out`, commit() swaps it in (the old one is kept),
    rollback() swaps it back, finish() drops the old one."""

    def __init__(self, out: Path):
        self.out = out
        self.holder: Path | None = None
        self.committed = False
        self.made_parents: list[Path] = []  # folders above --out this run created
        self.lock: int | None = None  # our lock on the holder's marker

    def stage(self, files: dict[str, bytes]) -> None:
        try:
            self.made_parents = [p for p in self.out.parents if not p.exists()]
            self.out.parent.mkdir(parents=True, exist_ok=True)
            sweep_staging(self.out)
            self.holder = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.make_patch-", dir=self.out.parent))
            self.lock = claim(self.holder / STAGING_MARKER)
            new = self.holder / "new"
            new.mkdir()  # not mkdtemp: the series gets the umask's mode, like any new directory
            for name, data in {**files, MANIFEST: manifest_text(files)}.items():
                (new / name).write_bytes(data)
        except OSError as err:
            self.discard()
            raise UserError(f"--out {self.out}: cannot write there: {err.strerror or err}") from None

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


def sweep_staging(out: Path) -> None:
    """Remove the holders that killed runs left beside `out` (marked, with
    nobody holding the marker's lock); if one died between its two renames
    (`out` missing), its old series is put back first. Directories without
    the marker are the user's."""
    for path in sorted(out.parent.glob(f".{glob.escape(out.name)}.make_patch-*")):
        if path.is_symlink() or not abandoned(path / STAGING_MARKER):
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


def check_ours(out: Path, where: str) -> None:
    """Refuse a directory holding anything but an unchanged series make_patch wrote."""
    try:
        names = sorted(p.name for p in out.iterdir())
    except OSError as err:
        raise UserError(f"{where}: cannot read it: {describe(err)}") from None
    written = read_manifest(out)
    foreign = [n for n in names if n != MANIFEST and n not in written]
    if foreign or (names and not written):
        first = (foreign or names)[0]
        raise UserError(f"{where}: holds files make_patch did not write ({first}, ...); "
                        "give an empty or new directory")
    for name in names:
        path = out / name
        if name == MANIFEST:
            continue
        try:
            changed = path.is_symlink() or not path.is_file() or digest(path.read_bytes()) != written[name]
        except OSError as err:
            raise UserError(f"{where}: cannot read {name}: {describe(err)}") from None
        if changed:
            raise UserError(f"{where}: {name} was changed since make_patch wrote it; "
                            "keep your edits elsewhere or give another directory")


def branch_ref(name: str) -> str:
    return f"refs/heads/{name}"


def check_branch_name(upstream: Upstream, name: str) -> None:
    """Refuse, before anything is written, a branch git would not create:
    invalid, taken, clashing as a path (`fix` exists, `fix/x` asked), locked,
    too long for the file system, or in a repository we cannot write."""
    checked = upstream.checkout.git("check-ref-format", "--branch", name)
    if checked.returncode or checked.stdout.strip() != as_git_text(name):
        raise UserError(f"--branch {name}: not a valid branch name")
    ref = branch_ref(as_git_text(name))
    refs = upstream.checkout.git("for-each-ref", "--format=%(refname)", "refs/heads/")
    if refs.returncode:
        raise UserError(f"--branch {name}: cannot list the branches: {one_line(refs.stderr)}")
    for existing in refs.stdout.splitlines():
        if existing == ref:
            raise UserError(f"--branch {name}: a branch of that name already exists")
        if existing.startswith(ref + "/") or ref.startswith(existing + "/"):
            raise UserError(f"--branch {name}: clashes with the existing branch "
                            f"{existing.removeprefix('refs/heads/')} (one cannot be a folder of the other)")
    limit = os.pathconf(upstream.common_dir, "PC_NAME_MAX") - len(".lock")
    if any(len(os.fsencode(part)) > limit for part in name.split("/")):
        raise UserError(f"--branch {name[:40]}...: too long for the file system "
                        f"(at most {limit} bytes between slashes)")
    lock = upstream.common_dir / f"{ref}.lock"
    if os.path.lexists(lock):
        raise UserError(f"--branch {name}: {lock} exists: another git process is writing that ref, "
                        "or one crashed (then remove the lock)")
    for needed in (upstream.common_dir / "objects", upstream.common_dir / "refs" / "heads"):
        if not os.access(needed, os.W_OK):
            raise UserError(f"--branch {name}: cannot write into {needed}")


def create_branch(upstream: Upstream, tip: str, name: str) -> None:
    """Add the new branch `name` at `tip`: the new objects go into the checkout
    as a pack piped to `git unpack-objects` (no fetch, no transport), then the
    ref is created, create-only: an existing branch is never moved."""
    pack = upstream.scratch.git("pack-objects", "--stdout", "--revs", "-q",
                                input=f"{tip}\n^{upstream.head}\n", binary=True)
    for args, data in ((["unpack-objects", "-q"], pack),
                       (["update-ref", "-m", "make_patch", branch_ref(name), tip, ""], None)):
        proc = upstream.checkout.git(*args, input=data)
        if proc.returncode:
            raise UserError(f"--branch {name}: git could not create it: {one_line(proc.stderr)}")


def delete_branch(upstream: Upstream, tip: str, name: str) -> None:
    """Undo create_branch (only while the branch is still at `tip`)."""
    upstream.checkout.git("update-ref", "-d", branch_ref(name), tip)
