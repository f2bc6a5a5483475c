"""--branch: the series' commits as one new branch of the user's checkout,
create-only, its objects piped in as a pack (no fetch, no transport)."""
from __future__ import annotations

import os

from fixmono.model.errors import UserError, one_line
from fixmono.sources.git import as_git_text
from fixmono.sources.upstream import Upstream


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
