"""The patch series: commits built in a scratch repository, exported with
`git format-patch`, the quilt-style `series` and `BASE`.

The scratch repository (sources/scratch.py) borrows the upstream's objects, so
nothing is written into the user's repository unless a branch is asked for
(branch.py). User and system git config are ignored there, and author, date
and message come from the fix metadata: the same inputs give byte-identical patches on every
machine. Patches are bytes: a CRLF file keeps its CRs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from fixmono.model.fix import Fix
from fixmono.sources.remote import is_remote
from fixmono.sources.scratch import ScratchRepo, tree_with
from fixmono.sources.upstream import Upstream

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
