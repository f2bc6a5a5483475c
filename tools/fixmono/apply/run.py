"""The one run: a list of fixes on one source, in series order. make_patch,
the drift matrix, drift over history and status all get their outcomes here."""
from __future__ import annotations

import dataclasses
import time

from fixmono.apply.contract import apply_fix
from fixmono.apply.revert import confirm_reverted, revert_through_git
from fixmono.apply.superseded import superseded
from fixmono.model.errors import Unreadable, UserError
from fixmono.model.fix import Fix, NotChecked, ValidationNote
from fixmono.model.outcome import FixOutcome, Status
from fixmono.model.patchfile import git_blob_id
from fixmono.sources.upstream import Source


def run(source: Source, fixes: list[Fix], validate: bool = False, progress=lambda message: None,
        finished=lambda label, status, seconds: None, base: Source | None = None,
        history: Source | None = None, fixed_point: bool = True) -> list[FixOutcome]:
    """Apply `fixes` in order; each sees the files as the previous ones left
    them. A fix that reverts an upstream commit goes through git where the
    source has history; `validate` runs each applied fix's behavioural check;
    `base`: the tree a diff was made on (make_patch --base), `history`: a repository
    whose objects may hold its blobs (--history), for a diff's pre-image.
    `progress(fix id)` as each starts, `finished(...)` as it ends (output/progress.py).
    `fixed_point` False: no result is transformed a second time (contract.apply_change; status).
    A failed patch whose lines later patches of the series edit again, all here, is already-applied where
    the series is (superseded.py)."""
    patched: dict[str, str | None] = {}

    def read(path: str) -> bytes | None:
        if path in patched:
            return None if patched[path] is None else patched[path].encode()
        return source.read(path)

    outcomes = []
    for fix in fixes:
        progress(fix.id)
        start = time.monotonic()
        try:
            outcome = apply_fix(fix, read, source.missing_file_hint,
                                lambda path, object_id: found_pre_image(source, path, object_id, history, base),
                                source.whole_tree, fixed_point)
        except Unreadable as err:
            outcome = FixOutcome(fix, Status.FAILED, str(err))
        if fix.reverts and source.history:
            if outcome.status is Status.APPLIED:
                outcome = revert_through_git(source, outcome, patched)
            elif outcome.status is Status.ALREADY_APPLIED:
                outcome = confirm_reverted(source, outcome)
        if outcome.status is Status.APPLIED and validate and not fix.validate:
            outcome = dataclasses.replace(outcome, validation="no check",
                                          detail=f"{outcome.detail}; not validated: this fix declares no check")
        elif outcome.status is Status.APPLIED and validate:
            before = {path: read(path).decode("utf-8") for path in outcome.new_files if read(path) is not None}
            problem = checked(fix, before, outcome.new_files)
            if isinstance(problem, NotChecked):  # what could run passed; its compile step could not run here
                outcome = dataclasses.replace(outcome, detail=f"{outcome.detail}; validated: its check passed, but "
                                                              f"{problem}", validation="compile not run")
            elif isinstance(problem, ValidationNote):
                outcome = dataclasses.replace(outcome, detail=f"{outcome.detail}; validated: {problem}",
                                              validation="passed")
            elif problem:
                outcome = FixOutcome(fix, Status.FAILED, f"validation: {problem}", outcome.files, validation="failed")
            else:
                outcome = dataclasses.replace(outcome, detail=f"{outcome.detail}; validated: its check passed",
                                              validation="passed")
        if outcome.status is Status.APPLIED:
            patched.update(outcome.new_files)
            if any("\r\n" in (text or "") for text in outcome.new_files.values()):
                # git am strips CRs unless told (like any format-patch of a CRLF file)
                outcome = dataclasses.replace(outcome, detail=outcome.detail + "; CRLF line endings kept: "
                                                                            "apply with `git am --keep-cr`")
        outcomes.append(outcome)
        finished(fix.id, outcome.status.value, time.monotonic() - start)
    return superseded(outcomes, read, lambda path, object_id: found_pre_image(source, path, object_id, history, base))


def found_pre_image(source: Source, path: str, object_id: str | None, history: Source | None = None,
                    base: Source | None = None) -> tuple[bytes, str] | None:
    """The file a diff was made on, and where it was found: the blob its `index` line names among the
    source's objects, else among `history`'s, else `base`'s file at that path where its blob id is that one
    (any, where the diff names none: the port then checks that every hunk stands in it at the line it names)."""
    if object_id:
        for where, objects in (("in the checkout", source), (f"in --history {getattr(history, 'spec', '')}", history)):
            if objects is not None and (data := objects.blob(object_id)) is not None:
                return data, where
    data = base.read(path) if base is not None else None
    if data is None or (object_id and not git_blob_id(data).startswith(object_id)):
        return None
    return data, f"--base {getattr(base, 'spec', '')}'s file"


def checked(fix: Fix, before: dict, after: dict):
    """fix.validate's answer; a check that raises is the fix's problem, named, never the run's crash
    (a fix's own code must not stop the other fixes or make the command an internal error)."""
    try:
        return fix.validate(before, after)
    except UserError:  # bad input the check was given (a headers folder that is not one): the user's to fix
        raise
    except (Exception, SystemExit) as err:  # KeyboardInterrupt still stops the run
        return f"its check crashed: {type(err).__name__}: {err}"
