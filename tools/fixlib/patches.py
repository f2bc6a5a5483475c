"""The patch writer: commits built in a scratch repository, exported with
`git format-patch`, and the quilt-style `series`.

The scratch repository borrows the upstream's objects through alternates, so
nothing is written into the user's repository unless a branch is asked for
(then the commits are fetched into it as one new ref). User and system git
config are ignored, and author, date and message come from the fix metadata:
the same inputs give byte-identical patches on every machine.
"""
from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools.fixlib.errors import UserError
from tools.fixlib.model import Fix
from tools.fixlib.gitrun import clean_env, one_line, run_git
from tools.fixlib.upstream import Upstream, describe

OUR_FILE = re.compile(r"^(series|BASE|\d{4}-[a-z0-9-]+\.patch)$")
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


class ScratchRepo:
    """A temporary bare repository whose object store falls back to the
    upstream's: new objects land here, old ones are read from there."""

    def __init__(self, upstream: Upstream, root: Path):
        self.git_dir = root / "scratch.git"
        self.upstream = upstream
        objects = Path(upstream.repo.common_dir, "objects").resolve()
        self._env = clean_env()
        self._env.update(GIT_DIR=str(self.git_dir), GIT_INDEX_FILE=str(root / "index"),
                         GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
        self.git("init", "-q", "--bare", str(self.git_dir))
        # bytes: the path as the file system has it, whatever the locale
        (self.git_dir / "objects" / "info" / "alternates").write_bytes(os.fsencode(objects) + b"\n")

    def git(self, *args: str, stdin: str | None = None, env: dict | None = None) -> str:
        # UTF-8 whatever the locale (LC_ALL=C): patches carry the files' text
        proc = subprocess.run(["git", *args], input=stdin, capture_output=True, encoding="utf-8",
                              env={**self._env, **(env or {})})
        if proc.returncode:
            raise RuntimeError(f"git {args[0]} failed: {one_line(proc.stderr)}")
        return proc.stdout

    def commit(self, parent: str, entry: Entry) -> str:
        self.git("read-tree", parent)
        self.stage(parent, entry.files)
        tree = self.git("write-tree").strip()
        fix = entry.fix
        name, email = re.match(r"^(.*?)\s*<(.+)>$", fix.author).groups()
        date = f"{fix.dep3.last_update}T00:00:00+0000"
        ident = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
                 "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date}
        return self.git("commit-tree", tree, "-p", parent, stdin=commit_message(fix, entry.note),
                        env=ident).strip()

    def stage(self, base: str, files: dict[str, str | None]) -> None:
        """Put `files` into the scratch index (read from `base` beforehand)."""
        for path, text in sorted(files.items()):
            if text is None:
                self.git("update-index", "--force-remove", "--", path)
                continue
            blob = self.git("hash-object", "-w", "--stdin", stdin=text).strip()
            self.git("update-index", "--add", "--cacheinfo", f"{self._mode(base, path)},{blob},{path}")

    def _mode(self, commit: str, path: str) -> str:
        out = self.git("ls-tree", commit, "--", path).split()
        return out[0] if out else "100644"

    def commits(self, entries: list[Entry]) -> list[str]:
        shas, parent = [], self.upstream.head
        for entry in entries:
            parent = self.commit(parent, entry)
            shas.append(parent)
        return shas

    def format_patch(self, sha: str, index: int, total: int) -> str:
        prefix = "PATCH" if total == 1 else f"PATCH {index}/{total}"
        return self.git(*FORMAT_PATCH, f"--subject-prefix={prefix}", "-1", sha)


def base_line(upstream: Upstream) -> str:
    if upstream.spec.startswith("pip:"):
        return f"{upstream.spec} {upstream.head}\n"
    return f"commit {upstream.head}\n"


def write_series(upstream: Upstream, entries: list[Entry], out: Path) -> list[str]:
    """Write NNNN-<id>.patch files, `series` and `BASE` into `out`, replacing a
    series written there before. Returns the patch file names."""
    out = check_out_dir(upstream, out)
    names = [patch_name(i, e.fix) for i, e in enumerate(entries, 1)]
    staged = out.with_name(f".{out.name}.new-{os.getpid()}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        sweep_staging(out)
        staged.mkdir()  # not mkdtemp: the series gets the umask's mode, like any new directory
        try:
            with tempfile.TemporaryDirectory(prefix=".make_patch-") as tmp:
                scratch = ScratchRepo(upstream, Path(tmp))
                for i, (sha, name) in enumerate(zip(scratch.commits(entries), names), 1):
                    (staged / name).write_text(scratch.format_patch(sha, i, len(names)), encoding="utf-8")
            (staged / "series").write_text("".join(f"{n}\n" for n in names), encoding="utf-8")
            (staged / "BASE").write_text(base_line(upstream), encoding="utf-8")
            swap_into_place(staged, out)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    except OSError as err:
        raise UserError(f"--out {out}: cannot write there: {err.strerror or err}") from None
    return names


STAGING = re.compile(r"\.(?P<name>.+)\.(?:new|old)-(?P<owner>[^.]+)")


def sweep_staging(out: Path) -> None:
    """Remove the .<out>.new-PID / .<out>.old-PID directories a killed run left
    beside `out`; if it died between its two renames (so `out` is missing),
    its old series is put back first. Those of live concurrent runs stay."""
    for path in sorted(out.parent.iterdir()):
        m = STAGING.fullmatch(path.name)
        if not m or m["name"] != out.name or not path.is_dir() or path.is_symlink():
            continue
        if _running(m["owner"]):
            continue
        if ".old-" in path.name and not os.path.lexists(out):
            path.rename(out)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _running(owner: str) -> bool:
    """Whether the staging suffix names another live process."""
    if not owner.isdigit() or int(owner) in (0, os.getpid()):
        return False
    try:
        os.kill(int(owner), 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def swap_into_place(staged: Path, out: Path) -> None:
    """Replace `out` by `staged`: one atomic exchange where the system has it;
    else two renames, whose gap a later run repairs (sweep_staging)."""
    if not os.path.lexists(out):
        staged.rename(out)
    elif exchange(staged, out):
        shutil.rmtree(staged, ignore_errors=True)  # now the old series
    else:
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        try:
            staged.rename(out)
        except BaseException:  # e.g. Ctrl-C in the gap: the old series goes back
            old.rename(out)
            raise
        shutil.rmtree(old, ignore_errors=True)


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


def check_out_dir(upstream: Upstream, out: Path) -> Path:
    """`out` resolved (a symlink: its target), once it is safe to replace:
    neither inside nor around the upstream, nor around the current directory,
    and holding only files make_patch writes."""
    where = f"--out {out}"
    if out.is_symlink() and not out.exists():
        raise UserError(f"{where}: is a dangling symlink")
    try:
        resolved = out.resolve()
        cwd = Path.cwd().resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a symlink loop
        raise UserError(f"{where}: cannot resolve it: {describe(err)}") from None
    git_dir = Path(upstream.repo.common_dir).resolve()
    if inside(resolved, upstream.path) or inside(resolved, git_dir):
        raise UserError(f"{where}: is inside the upstream checkout; choose a directory outside it")
    if inside(upstream.path, resolved) or inside(git_dir, resolved):
        raise UserError(f"{where}: contains the upstream checkout {upstream.path}; "
                        "choose a directory of its own")
    if inside(cwd, resolved):
        raise UserError(f"{where}: is the current directory or contains it; name a directory for the series")
    if resolved.exists() and not resolved.is_dir():
        raise UserError(f"{where}: exists and is not a directory")
    if resolved.is_dir():
        try:
            foreign = sorted(p.name for p in resolved.iterdir() if not _ours(p))
        except OSError as err:
            raise UserError(f"{where}: cannot read it: {describe(err)}") from None
        if foreign:
            raise UserError(f"{where}: holds files make_patch did not write ({foreign[0]}, ...); "
                            "give an empty or new directory")
    parent = resolved.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise UserError(f"{where}: not writable")
    return resolved


def _ours(path: Path) -> bool:
    """A regular file named like ours (a directory `series` is someone else's)."""
    return OUR_FILE.match(path.name) is not None and path.is_file() and not path.is_symlink()


def check_branch_name(upstream: Upstream, name: str) -> None:
    """Refuse, before anything is written, a name git would not create:
    invalid, taken, or clashing as a path (`fix` exists, `fix/x` asked)."""
    checked = run_git(upstream.path, "check-ref-format", "--branch", name)
    if checked.returncode or checked.stdout.strip() != name:
        raise UserError(f"--branch {name}: not a valid branch name")
    ref = f"refs/heads/{name}"
    refs = run_git(upstream.path, "for-each-ref", "--format=%(refname)", "refs/heads/")
    if refs.returncode:
        raise UserError(f"--branch {name}: cannot list the branches: {one_line(refs.stderr)}")
    for existing in refs.stdout.splitlines():
        if existing == ref:
            raise UserError(f"--branch {name}: a branch of that name already exists")
        if existing.startswith(ref + "/") or ref.startswith(existing + "/"):
            raise UserError(f"--branch {name}: clashes with the existing branch "
                            f"{existing.removeprefix('refs/heads/')} (one cannot be a folder of the other)")


def create_branch(upstream: Upstream, entries: list[Entry], name: str) -> str:
    """Add the fixes as commits on a new branch `name` starting at HEAD. Only
    the new ref (and its objects) is written into the user's repository; the
    working tree, index and other refs are untouched. Returns the tip sha."""
    check_branch_name(upstream, name)
    with tempfile.TemporaryDirectory(prefix=".make_patch-") as tmp:
        scratch = ScratchRepo(upstream, Path(tmp))
        tip = scratch.commits(entries)[-1] if entries else upstream.head
        scratch.git("update-ref", "refs/heads/make-patch-tip", tip)
        # the objects only (no destination ref), then the branch, create-only:
        # an existing branch is never moved, whatever appeared since the check
        for args in (["fetch", "-q", "--no-tags", "--no-write-fetch-head", str(scratch.git_dir),
                      "refs/heads/make-patch-tip"],
                     ["update-ref", "-m", "make_patch", f"refs/heads/{name}", tip, ""]):
            proc = run_git(upstream.path, *args)
            if proc.returncode:
                raise UserError(f"--branch {name}: git could not create it: {one_line(proc.stderr)}")
    return tip
