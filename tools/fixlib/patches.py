"""The patch writer: commits built in a scratch repository, exported with
`git format-patch`, and the quilt-style `series`.

The scratch repository borrows the upstream's objects through alternates, so
nothing is written into the user's repository unless a branch is asked for
(then the commits are fetched into it as one new ref). User and system git
config are ignored, and author, date and message come from the fix metadata:
the same inputs give byte-identical patches on every machine.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools.fixlib.errors import UserError
from tools.fixlib.model import Fix
from tools.fixlib.upstream import Upstream

OUR_FILE = re.compile(r"^(series|BASE|\d{4}-[a-z0-9-]+\.patch)$")
FORMAT_PATCH = ["format-patch", "--stdout", "--no-signature", "--full-index", "--no-renames",
                "--no-color", "--no-notes", "--no-thread", "--no-attach", "--no-signoff",
                "--src-prefix=a/", "--dst-prefix=b/", "-U3", "--inter-hunk-context=0"]


@dataclass(frozen=True)
class Entry:
    fix: Fix
    files: dict[str, str | None]  # path -> patched text (None: delete the file)
    note: str = ""  # an extra paragraph for the commit message


def clean_env() -> dict[str, str]:
    """The environment without GIT_* variables (e.g. GIT_DIR set by a hook)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


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
        (self.git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n")

    def git(self, *args: str, stdin: str | None = None, env: dict | None = None) -> str:
        proc = subprocess.run(["git", *args], input=stdin, capture_output=True, text=True,
                              env={**self._env, **(env or {})})
        if proc.returncode:
            raise RuntimeError(f"git {args[0]} failed: {proc.stderr.strip()}")
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
    check_out_dir(upstream, out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.new-"))
    except OSError as err:
        raise UserError(f"--out {out}: cannot write there: {err.strerror}") from None
    with tempfile.TemporaryDirectory(prefix=".make_patch-") as tmp:
        scratch = ScratchRepo(upstream, Path(tmp))
        names = [patch_name(i, e.fix) for i, e in enumerate(entries, 1)]
        try:
            for i, (sha, name) in enumerate(zip(scratch.commits(entries), names), 1):
                (staged / name).write_text(scratch.format_patch(sha, i, len(names)))
            (staged / "series").write_text("".join(f"{n}\n" for n in names))
            (staged / "BASE").write_text(base_line(upstream))
            swap_into_place(staged, out)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    return names


def swap_into_place(staged: Path, out: Path) -> None:
    """Replace `out` by `staged` with two renames: at every moment `out` holds
    either the old series or the new one."""
    if not out.exists():
        staged.rename(out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    out.rename(old)
    staged.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def check_out_dir(upstream: Upstream, out: Path) -> None:
    resolved = out.resolve()
    if resolved == upstream.path or upstream.path in resolved.parents:
        raise UserError(f"--out {out}: is inside the upstream checkout; choose a directory outside it")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if not OUR_FILE.match(p.name))
        if foreign:
            raise UserError(f"--out {out}: holds files make_patch did not write ({foreign[0]}, ...); "
                            "give an empty or new directory")
    parent = resolved.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent if not out.exists() else out, os.W_OK):
        raise UserError(f"--out {out}: not writable")


def check_branch_name(upstream: Upstream, name: str) -> None:
    ok = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True)
    if ok.returncode:
        raise UserError(f"--branch {name}: not a valid branch name")
    if name in [h.name for h in upstream.repo.heads]:
        raise UserError(f"--branch {name}: a branch of that name already exists")


def create_branch(upstream: Upstream, entries: list[Entry], name: str) -> str:
    """Add the fixes as commits on a new branch `name` starting at HEAD. Only
    the new ref (and its objects) is written into the user's repository; the
    working tree, index and other refs are untouched. Returns the tip sha."""
    check_branch_name(upstream, name)
    with tempfile.TemporaryDirectory(prefix=".make_patch-") as tmp:
        scratch = ScratchRepo(upstream, Path(tmp))
        tip = scratch.commits(entries)[-1] if entries else upstream.head
        scratch.git("update-ref", "refs/heads/make-patch-tip", tip)
        proc = subprocess.run(
            ["git", "-C", str(upstream.path), "fetch", "-q", "--no-tags", "--no-write-fetch-head",
             str(scratch.git_dir), f"refs/heads/make-patch-tip:refs/heads/{name}"],
            capture_output=True, text=True, env=clean_env())
        if proc.returncode:
            raise UserError(f"--branch {name}: git could not create it: {proc.stderr.strip()}")
    return tip
