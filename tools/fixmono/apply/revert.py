"""Revert support: a fix that undoes an upstream commit is made with `git
revert`'s content when the checkout's history has that commit, so the patch
is exactly the inverse of what landed (tests and all); otherwise the fix's
tree transformation stands. Either way the outcome says which way it went.

Everything happens in the upstream's scratch repository (temporary index and
object store that borrows the checkout's objects): the checkout is never touched.
"""
from __future__ import annotations

import dataclasses
import re

from fixmono.apply.contract import apply_change
from fixmono.model.fix import UpstreamCommit
from fixmono.model.outcome import FixOutcome, Status
from fixmono.sources.git import GitError
from fixmono.sources.scratch import tree_with
from fixmono.sources.upstream import Upstream


class RevertConflict(Exception):
    """The inverse of the commit does not apply to the current tree."""


def resolved_trailer(commit: UpstreamCommit) -> re.Pattern:
    """The "Pull Request resolved: <url>" line of exactly this PR: the whole
    URL, so pull/1723409 is not taken for pull/172340."""
    return re.compile(rf"^Pull Request resolved: {re.escape(commit.pull_request.rstrip('/'))}/?[ \t]*$", re.M)


def find_in_history(upstream: Upstream, commit: UpstreamCommit) -> str | None:
    """The full id of `commit` if HEAD's history contains it."""
    scratch = upstream.scratch
    if commit.sha:
        found = scratch.run("rev-parse", "--verify", "-q", f"{commit.sha}^{{commit}}").stdout.strip()
        if found and scratch.run("merge-base", "--is-ancestor", found, upstream.head).returncode == 0:
            return found
    # candidates by a fixed-string search, then the whole trailer line checked here
    listing = scratch.run("rev-list", "-F", f"--grep={commit.pull_request.rstrip('/')}",
                          "--format=%H%x00%B%x00", upstream.head)
    if listing.returncode:
        return None
    trailer = resolved_trailer(commit)
    for record in listing.stdout.split("\x00\n"):
        sha, _, message = record.partition("\x00")
        sha = sha.rsplit("\n", 1)[-1].strip()  # after rev-list's "commit <sha>" line
        if sha and trailer.search(message):
            return sha
    return None


def parent_of(upstream: Upstream, sha: str) -> str | None:
    """The first parent of `sha`; None for a root commit or one at a shallow clone's boundary."""
    parents = upstream.scratch.git("rev-list", "--parents", "-n", "1", sha).split()
    return parents[1] if len(parents) > 1 else None


def inverse_onto(upstream: Upstream, sha: str, parent: str,
                 patched: dict[str, str | None]) -> dict[str, str | None]:
    """The files the inverse of commit `sha` changes, applied on HEAD plus the
    series' earlier changes (`patched`)."""
    scratch = upstream.scratch
    head_tree = scratch.git("rev-parse", f"{upstream.head}^{{tree}}").strip()
    scratch.git("read-tree", tree_with(scratch, head_tree, patched))
    diff = ["diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--no-color"]
    paths = scratch.git(*diff, "--name-only", "-z", sha, parent).split("\0")
    inverse = scratch.git(*diff, "--full-index", "--binary", sha, parent, binary=True)
    proc = scratch.run("apply", "--cached", "-", input=inverse)
    if proc.returncode:
        raise RevertConflict(proc.stderr.strip().splitlines()[0][:200] if proc.stderr.strip() else "git apply failed")
    files: dict[str, str | None] = {}
    for path in filter(None, paths):
        entry = scratch.git("ls-files", "-s", "-z", "--", path).split()
        if not entry:
            files[path] = None
            continue
        try:
            files[path] = scratch.git("cat-file", "blob", entry[1], binary=True).decode("utf-8")
        except UnicodeDecodeError:
            raise RevertConflict(f"{path} is not UTF-8 text") from None
    return files


def confirm_reverted(upstream: Upstream, outcome: FixOutcome) -> FixOutcome:
    """A tree without the reverted change (`outcome` already-applied by its
    text) has the fix only if its history shows a revert: the reverted commit
    is in it (and so was undone later), or a commit of this fix (`Fix-Id:`).
    Otherwise the tree predates the commit: not-applicable, saying so."""
    fix, commit = outcome.fix, outcome.fix.reverts
    ours = upstream.scratch.run("rev-list", "-n", "1", "-F", f"--grep=Fix-Id: {fix.id}", upstream.head)
    if ours.stdout.strip() or find_in_history(upstream, commit):
        return outcome
    number = commit.pull_request.rstrip("/").rsplit("/", 1)[-1]
    paths = ", ".join(c.path for c in fix.changes)
    return dataclasses.replace(outcome, status=Status.NOT_APPLICABLE,
                               detail=f"{paths}: {commit.absent} (predates #{number})")


def revert_through_git(upstream: Upstream, outcome: FixOutcome, patched: dict) -> FixOutcome:
    """`outcome` (the tree transformation, status applied) replaced by the git
    revert when possible; its detail says which way was taken and why."""
    fix = outcome.fix
    commit = fix.reverts
    sha = find_in_history(upstream, commit)
    if sha is None:
        return dataclasses.replace(outcome, detail=f"tree transformation ({commit.pull_request} is not in "
                                                   f"this history): {outcome.detail}")
    parent = parent_of(upstream, sha)
    if parent is None:
        return dataclasses.replace(outcome, detail=f"tree transformation ({sha[:12]} has no parent here: "
                                                   f"a root commit or a shallow clone's boundary): {outcome.detail}")
    try:
        files = inverse_onto(upstream, sha, parent, patched)
    except (RevertConflict, GitError) as err:
        return dataclasses.replace(outcome, detail=f"tree transformation (reverting {sha[:12]} conflicts: "
                                                   f"{err}): {outcome.detail}")
    for change in fix.changes:
        text = files.get(change.path)
        if text is None or apply_change(change, text).status is not Status.ALREADY_APPLIED:
            return dataclasses.replace(outcome, detail=f"tree transformation (reverting {sha[:12]} leaves "
                                                       f"{change.path} unfixed): {outcome.detail}")
    return FixOutcome(fix, Status.APPLIED,
                      f"git revert of {sha[:12]} ({commit.subject}): {len(files)} file(s)",
                      outcome.files, files, message_note=f"This reverts commit {sha}.")
