"""A patch of a series whose lines a later patch of the series edits again, on a tree that has the
whole series (upstream merged it): its own lines are not there, only as the later patch left them,
so alone it fails. It is already-applied where the series from its pre-image on is: its pre-image
found (its blob), it and each later patch of that file applied in turn exactly as the diffs say (each
made on the one before: its pre-image blob the text so far), every later one already-applied here,
and the diff from its pre-image to the last one's result present in the tree (the port engine's
presence check, with that pre-image)."""
from __future__ import annotations

import dataclasses

from fixmono.engines import structure, three_way
from fixmono.engines.port import DiffTransform
from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed, UserError
from fixmono.model.outcome import FixOutcome, Status
from fixmono.model.patchfile import git_blob_id, lines_of, parse_patch, unified_diff


def superseded(outcomes: list[FixOutcome], read, pre_image) -> list[FixOutcome]:
    """`outcomes` (run order) with each failed diff patch that the later patches of its files carry,
    present here, made already-applied. `read(path)`: the tree's bytes; `pre_image(path, blob)`:
    (bytes, where) of a blob, or None."""
    out = list(outcomes)
    for k, outcome in enumerate(outcomes):
        if outcome.status is not Status.FAILED or outcome.validation == "failed":
            continue
        notes = {}  # path -> why it is here
        for change in outcome.fix.changes:
            done = next((f for f in outcome.files if f.path == change.path), None)
            if done is not None and done.status is Status.ALREADY_APPLIED:
                continue
            note = carried(change, outcomes[k + 1:], read, pre_image)
            if note is None:
                break
            notes[change.path] = note
        else:
            if notes:
                files = tuple(dataclasses.replace(f, status=Status.ALREADY_APPLIED, detail=notes[f.path])
                              if f.path in notes else f for f in outcome.files)
                out[k] = dataclasses.replace(outcome, status=Status.ALREADY_APPLIED, detail="; ".join(notes.values()),
                                             files=files)
    return out


def carried(change, later: list[FixOutcome], read, pre_image) -> str | None:
    """"PATH: present as the series leaves it (...)" where the later patches of `change`'s file carry
    it and are here; None otherwise."""
    path, transform = change.path, change.transform
    if not isinstance(transform, DiffTransform) or not transform.old_blob:
        return None
    found, data = pre_image(path, transform.old_blob), read(path)
    if found is None or data is None:
        return None
    try:
        pre, here = found[0].decode("utf-8"), data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text, after = exactly(pre, transform.hunks), []
    for outcome in later:
        edits = [c for c in outcome.fix.changes if c.path == path]
        if not edits:
            continue
        other = edits[0].transform
        if outcome.status is not Status.ALREADY_APPLIED or text is None or not isinstance(other, DiffTransform) \
                or not other.old_blob or not git_blob_id(text.encode("utf-8")).startswith(other.old_blob):
            return None  # not here, or not made on this patch's result
        text = exactly(text, other.hunks)
        after.append(outcome.fix.id)
    if not after or text is None or text == pre:
        return None
    try:
        composed = DiffTransform(path, parse_patch(unified_diff(lines_of(pre), lines_of(text), path), path).files[0].hunks)
        if composed.rewrite(here, pre).changed:
            return None
    except (TransformFailed, NotApplicable, TargetSyntaxError, UserError):
        return None
    return f"{path}: present as the series leaves it ({', '.join(after)} edit its lines again, and are here)"


def exactly(text: str, hunks) -> str | None:
    """`text` with `hunks` applied at the lines they name, where it is their pre-image; else None."""
    lines = lines_of(text)
    return "".join(structure.post_image(lines, hunks)[0]) if three_way.verified(lines, hunks) else None
