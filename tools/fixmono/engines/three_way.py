"""Placing a diff's hunks through its pre-image: where the file the diff was
made on is at hand (its blob in the checkout's objects), its lines are aligned
to the target's, and each run of changed lines goes where its own lines and
both its neighbours sit, side by side, in the target: the context around them
may have changed since (what a hunk-only port must refuse), the lines the diff
edits may not. Anything else, and the hunk ladder decides as without it.
`git merge-file` is the same idea; here the stricter rule: a change whose
neighbour line is not where the pre-image has it is not placed this way."""
from __future__ import annotations

from difflib import SequenceMatcher

from fixmono.model.patchfile import Hunk


def verified(pre: list[str], hunks: tuple[Hunk, ...]) -> bool:
    """Every hunk's old lines stand in `pre` at the line it names: `pre` is the diff's pre-image."""
    return all(pre[h.start - 1:h.start - 1 + len(h.old)] == h.old if h.old else h.start <= len(pre) + 1
               for h in hunks)


def placements(pre: list[str], target: list[str], hunks: tuple[Hunk, ...]) -> list[tuple] | None:
    """For each hunk (in order): (start, stop, replacement, rows of added lines in it) on `target`
    as it is before any hunk; None when one change of one hunk cannot be placed by the alignment."""
    here = aligned(pre, target)
    out = []
    for hunk in hunks:
        placed = placement(hunk, here, target, len(pre))
        if placed is None:
            return None
        out.append(placed)
    ends = [(start, stop) for start, stop, _, _ in out]
    if any(stop > start_next for (_, stop), (start_next, _) in zip(ends, ends[1:])):
        return None  # two hunks over one line of the target
    return out


def aligned(pre: list[str], target: list[str]) -> dict[int, int]:
    """pre-image line -> target line, for the lines the alignment finds unchanged."""
    found = {}
    for a, b, size in SequenceMatcher(None, pre, target, autojunk=False).get_matching_blocks():
        found.update((a + i, b + i) for i in range(size))
    return found


def placement(hunk: Hunk, here: dict[int, int], target: list[str], pre_size: int):
    """The hunk's changes, each where its own lines and its neighbours are in the target, as one
    replacement of the target's lines from its first change to its last (the target's own lines between)."""
    changes = []  # (target start, target stop, added lines)
    at = hunk.start - 1 if hunk.old else hunk.start  # the pre-image line the hunk's rows walk
    rows = list(hunk.lines)
    i = 0
    while i < len(rows):
        if rows[i][0] == " ":
            at, i = at + 1, i + 1
            continue
        j = i
        while j < len(rows) and rows[j][0] != " ":
            j += 1
        removed = sum(k == "-" for k, _ in rows[i:j])
        spot = target_span(at, removed, here, len(target), pre_size)
        if spot is None:
            return None
        changes.append((*spot, [t for k, t in rows[i:j] if k == "+"]))
        at, i = at + removed, j
    if not changes:
        return None
    start, stop = changes[0][0], changes[-1][1]
    replacement, new_rows, cursor = [], [], start
    for begin, end, added in changes:
        replacement += target[cursor:begin]
        new_rows += range(len(replacement), len(replacement) + len(added))
        replacement += added
        cursor = end
    return start, stop, replacement, new_rows


def target_span(at: int, removed: int, here: dict[int, int], target_size: int, pre_size: int):
    """Where pre-image lines [at, at + removed) are in the target: there unchanged and side by side, and
    between them and the nearest unchanged line above, and below, as many lines as in the pre-image
    (lines changed in place; none added or removed beside the change; the file's edges count as lines)."""
    above = next((i for i in range(at - 1, -1, -1) if i in here), -1)
    below = next((i for i in range(at + removed, pre_size) if i in here), pre_size)
    above_t = here.get(above, -1)
    below_t = here.get(below, target_size)
    start = above_t + (at - above)
    stop = start + removed
    if any(here.get(at + n) != start + n for n in range(removed)):
        return None
    return (start, stop) if below_t - stop == below - (at + removed) else None
