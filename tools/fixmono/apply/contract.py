"""Engine-independent application of a fix to source text, with its match
contract and presence check. Pure: reads through a callback and
returns new text; it never touches a checkout."""
from __future__ import annotations

import dataclasses
from typing import Callable

from fixmono.apply.remembered_uses import unresolved_uses
from fixmono.engines.port import CPP
from fixmono.engines.uses_cpp import unresolved_calls
from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed, Unreadable
from fixmono.model.fix import FileChange, Fix
from fixmono.model.outcome import FileOutcome, FixOutcome, Status


def decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise Unreadable(f"{path} is not UTF-8 text (byte {err.start})") from None


BOM = "\ufeff"


def apply_change(change: FileChange, text: str, pre_image: tuple[str, str] | None = None,
                 fixed_point: bool = True) -> FileOutcome:
    """Apply one file change to `text`, enforcing the match contract. A UTF-8
    byte-order mark is set aside for the transformation and kept. `pre_image`:
    a diff's (its text, where it was found), for a transform that takes it (engines/three_way.py).
    `fixed_point` False: the result is not transformed again (check_result), for a caller that asks
    only whether the fix is there and writes nothing (status: a second parse of the whole result)."""
    if text.startswith(BOM):
        outcome = apply_change(change, text[len(BOM):], pre_image and (pre_image[0].removeprefix(BOM), pre_image[1]),
                               fixed_point)
        return outcome if outcome.new_text is None else dataclasses.replace(outcome, new_text=BOM + outcome.new_text)
    path, want = change.path, change.sites
    try:
        result = change.transform.rewrite(text, *pre_image) if pre_image is not None else \
            change.transform.rewrite(text)
    except NotApplicable as err:
        return FileOutcome(path, Status.NOT_APPLICABLE, f"{path}: {err} (code moved or removed?)")
    except (TargetSyntaxError, TransformFailed) as err:
        return FileOutcome(path, Status.FAILED, f"{path}: {err}")
    if result.changed == 0 and result.present == want:
        return FileOutcome(path, Status.ALREADY_APPLIED, f"{path}: fix already present ({want} site(s))")
    if result.changed + result.present != want or result.changed == 0:
        return FileOutcome(
            path, Status.FAILED,
            f"{path}: match contract expects {want} site(s) for {change.transform.description!r}, "
            f"found {result.changed} to change and {result.present} already fixed")
    problem = check_result(change, result.source) if fixed_point else None
    if problem:
        return FileOutcome(path, Status.FAILED, f"{path}: {problem}")
    if result.present and (result.added or result.already):  # a partly fixed file: say which parts
        partly = (f"{path}: already there: {', '.join(result.already) or f'{result.present} site(s)'}; "
                  f"this patch adds: {', '.join(result.added) or f'{result.changed} site(s)'}")
        return FileOutcome(path, Status.APPLIED, f"{path}: {result.changed} site(s) changed, {result.present} "
                           f"already there ({partly.split(': ', 1)[1]})", result.source, partly=partly)
    placed = f" ({result.evidence})" if result.evidence else ""
    return FileOutcome(path, Status.APPLIED, f"{path}: {result.changed} site(s) changed{placed}", result.source,
                       evidence=result.evidence)


def check_result(change: FileChange, new_text: str) -> str | None:
    """The transformed text must parse, hold the contract and be a fixed point.
    A transform that judges its own result (the diff engine: the result is the
    source with exactly the diff's lines changed, engines/port.check_edit) is
    not ported a second time: a second port may refuse a right result (a hunk
    whose added lines re-create its context elsewhere), and says nothing more."""
    if getattr(change.transform, "judges_its_result", False):
        return None
    try:
        again = change.transform.rewrite(new_text)
    except (NotApplicable, TargetSyntaxError, TransformFailed) as err:
        return f"transformed text is broken: {err}"
    if again.changed or again.present != change.sites:
        return (f"transformation is not idempotent: second run changed {again.changed}, "
                f"found {again.present} of {change.sites} fixed")
    return None


def apply_fix(fix: Fix, read: Callable[[str], bytes | None],
              missing: Callable[[str], str] = lambda path: "not in this upstream",
              pre_image: Callable[[str, str | None], tuple[bytes, str] | None] = lambda path, object_id: None,
              whole_tree: bool = False, fixed_point: bool = True) -> FixOutcome:
    """Apply every file change of `fix`; `read(path)` returns None when absent,
    which is reported as `<path>: <missing(path)>`; `pre_image(path, blob id)`:
    the file a diff was made on and where it was found, where it is at hand (apply/run.found_pre_image).
    A diff's result must use only what the tree has (check_uses; `whole_tree`:
    `read` reads every file). `fixed_point`: as apply_change's."""
    outcomes, before, pre_images = [], {}, {}
    for change in fix.changes:
        if hasattr(change.transform, "place"):  # a file the fix adds, deletes or renames: judged by presence
            outcomes += change.transform.place(read)
            continue
        data = read(change.path)
        if data is None:
            outcomes.append(FileOutcome(change.path, Status.NOT_APPLICABLE, f"{change.path}: {missing(change.path)}",
                                        optional=change.optional, absent=True))
            continue
        try:
            text = decode(change.path, data)
        except Unreadable as err:
            outcomes.append(FileOutcome(change.path, Status.FAILED, str(err)))
            continue
        found = pre_image_of(change, pre_image)
        outcomes.append(apply_change(change, text, found, fixed_point))
        before[change.path] = text
        if found is not None:
            pre_images[change.path] = found[0]
    return summarise(fix, check_uses(fix, tuple(outcomes), before, read, whole_tree, pre_images))


def check_uses(fix: Fix, outcomes: tuple[FileOutcome, ...], before: dict[str, str], read,
               whole_tree: bool, pre_images: dict[str, str] | None = None) -> tuple[FileOutcome, ...]:
    """A diff's applied file fails where its added lines use what the tree lacks
    (engines/uses.py, remembered: apply/remembered_uses.py; C/C++: engines/uses_cpp.py, which also says what
    it could not check), the other files read as the fix leaves them. Only a
    result that is whole: where a file fails or is missing, that is the answer."""
    if any(f.status not in (Status.APPLIED, Status.ALREADY_APPLIED) for f in outcomes if not f.optional):
        return outcomes
    after = {f.path: f.new_text for f in outcomes if f.status is Status.APPLIED}

    def tree(path: str) -> bytes | None:
        return after[path].encode() if after.get(path) is not None else read(path)

    judged = {c.path for c in fix.changes if getattr(c.transform, "judges_its_result", False)}
    checked = []
    for f in outcomes:
        if f.status is Status.APPLIED and f.path in judged and f.path in before:
            old, new = before[f.path].removeprefix(BOM), f.new_text.removeprefix(BOM)
            if f.path.endswith(CPP):
                problems, unchecked = unresolved_calls(f.path, old, new, tree, (pre_images or {}).get(f.path))
                if unchecked and not problems:
                    note = (f"not checked: the added call(s) {', '.join(f'`{n}`' for n in unchecked[:5])}"
                            f"{' ...' if len(unchecked) > 5 else ''} (no file of this tree names them; a system or "
                            "library header may declare them)")
                    f = dataclasses.replace(f, detail=f"{f.detail}; {note}", unchecked=note)
            else:
                problems = unresolved_uses(f.path, old, new, tree, whole_tree)
            if problems:
                f = FileOutcome(f.path, Status.FAILED, f"{f.path}: {problems[0]}")
        checked.append(f)
    return tuple(checked)


def pre_image_of(change: FileChange, pre_image: Callable[[str, str | None], tuple[bytes, str] | None]) \
        -> tuple[str, str] | None:
    """The text of the file a diff's change was made on, and where it was found, where it is at hand (a
    diff's transform only)."""
    if not hasattr(change.transform, "old_blob"):
        return None
    found = pre_image(change.path, change.transform.old_blob)
    try:
        return (found[0].decode("utf-8"), found[1]) if found is not None else None
    except UnicodeDecodeError:
        return None


def summarise(fix: Fix, files: tuple[FileOutcome, ...]) -> FixOutcome:
    counted = [f for f in files if not f.optional] or list(files)
    by = {s: [f for f in counted if f.status is s] for s in Status}
    detail = "; ".join(f.detail + (" (optional, skipped)" if f.optional else "") for f in files)
    if by[Status.FAILED]:
        return FixOutcome(fix, Status.FAILED, "; ".join(f.detail for f in by[Status.FAILED]), files)
    if absent := [f for f in counted if f.absent]:  # a target file the tree lacks: not this tree's fix
        return FixOutcome(fix, Status.NOT_APPLICABLE, "; ".join(f.detail for f in absent), files)
    if by[Status.NOT_APPLICABLE] and by[Status.APPLIED]:
        # Never emit half a fix: a partial patch would look like success.
        return FixOutcome(fix, Status.FAILED, "partial match, refusing half a fix: " + detail, files)
    if by[Status.NOT_APPLICABLE]:
        return FixOutcome(fix, Status.NOT_APPLICABLE, detail, files)
    if by[Status.APPLIED]:
        new = {f.path: f.new_text for f in by[Status.APPLIED]}
        partly = [f.partly for f in files if f.partly]
        note = ("Parts of this fix were already in the tree.\n" + "\n".join(partly)) if partly else ""
        return FixOutcome(fix, Status.APPLIED, detail, files, new, message_note=note)
    return FixOutcome(fix, Status.ALREADY_APPLIED, detail, files)
