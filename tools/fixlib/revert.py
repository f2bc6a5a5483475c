"""Revert support: a fix that undoes an upstream commit is made with `git
revert`'s content when the checkout's history has that commit, so the patch
is exactly the inverse of what landed (tests and all); otherwise the fix's
tree transformation stands. Either way the outcome says which way it went.

Everything happens in a ScratchRepo (temporary index and object store that
borrows the checkout's objects): the checkout is never touched.
"""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import git

from tools.fixlib.apply import FixOutcome, Status, apply_change
from tools.fixlib.model import UpstreamCommit
from tools.fixlib.patches import ScratchRepo
from tools.fixlib.upstream import Upstream


class RevertConflict(Exception):
    """The inverse of the commit does not apply to the current tree."""


def find_in_history(upstream: Upstream, commit: UpstreamCommit) -> str | None:
    """The full sha of `commit` if HEAD's history contains it."""
    repo = upstream.repo
    if commit.sha:
        try:
            full = repo.git.rev_parse("--verify", "--quiet", f"{commit.sha}^{{commit}}")
            repo.git.merge_base("--is-ancestor", full, upstream.head)
            return full
        except git.GitCommandError:
            pass
    found = repo.git.log("--format=%H", "-F", f"--grep=Pull Request resolved: {commit.pull_request}",
                         upstream.head).split()
    return found[0] if found else None


def inverse_onto(upstream: Upstream, sha: str, patched: dict[str, str | None]) -> dict[str, str | None]:
    """The files the inverse of commit `sha` changes, applied on HEAD plus the
    series' earlier changes (`patched`)."""
    with tempfile.TemporaryDirectory(prefix=".make_patch-revert-") as tmp:
        scratch = ScratchRepo(upstream, Path(tmp))
        scratch.git("read-tree", upstream.head)
        scratch.stage(upstream.head, patched)
        paths = scratch.git("diff", "--name-only", "--no-renames", sha, f"{sha}^").split()
        inverse = scratch.git("diff", "--full-index", "--no-renames", sha, f"{sha}^")
        try:
            scratch.git("apply", "--cached", "-", stdin=inverse)
        except RuntimeError as err:
            raise RevertConflict(str(err).splitlines()[0][:200]) from None
        files: dict[str, str | None] = {}
        for path in paths:
            entry = scratch.git("ls-files", "-s", "--", path).split()
            try:
                files[path] = scratch.git("cat-file", "blob", entry[1]) if entry else None
            except UnicodeDecodeError:
                raise RevertConflict(f"{path} is not UTF-8 text") from None
        return files


def revert_through_git(upstream: Upstream, outcome: FixOutcome, patched: dict) -> FixOutcome:
    """`outcome` (the tree transformation, status applied) replaced by the git
    revert when possible; its detail says which way was taken and why."""
    fix = outcome.fix
    commit = fix.reverts
    sha = find_in_history(upstream, commit)
    if sha is None:
        return dataclasses.replace(outcome, detail=f"tree transformation ({commit.pull_request} is not in "
                                                   f"this history): {outcome.detail}")
    try:
        files = inverse_onto(upstream, sha, patched)
    except RevertConflict as err:
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
