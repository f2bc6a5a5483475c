"""Placing a diff's changes by the syntax of its pre-image (Python), where the
line alignment (three_way.py) places nothing: a statement reflowed over other
lines, a comment or blank line added beside the change, a def moved.

The pre-image, its post-image and the target are read as units: a logical
line (a statement, or a compound statement's header, over however many lines),
compared by its tokens (formatting, line breaks and a trailing comma aside);
a comment line; a blank line. Each change of the diff is widened to whole
units on both sides (pre-image units replaced by post-image units), the
pre-image's units are aligned to the target's (in order, then inside each def
or class found elsewhere by its name), and a change is placed where:
- every unit it removes has its partner in the target, side by side, with
  the same comments (a statement the release reflowed is replaced whole by
  the diff's text; one it changed is not placed);
- the code unit beside it (above or below; both for an insertion) is there
  too, with no other statement between (comment and blank lines aside);
- each unit it removes or adds is in the block of the same statement as in
  the diff (the enclosing header's partner; where the release changed that
  header, one that opens the same kind of block: `def f` with other
  arguments, not the `enum` made an array initializer).
The added lines are the diff's, re-indented by what the release's partner
lines moved; the target's other bytes stay as they are. Anything else: None,
and the hunks decide as without the pre-image."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from difflib import SequenceMatcher

from fixmono.engines.three_way import Conflict, indentation as indent_width, moved_key as three_way_key, \
    apart, decorator_head, repeats_changed, statement_start
from fixmono.engines.trees import parse
from fixmono.model.patchfile import Hunk, ending, lines_of

SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENCODING, tokenize.ENDMARKER}


@dataclass(frozen=True)
class Unit:
    start: int  # first line (0-based)
    stop: int  # one past its last line
    key: str  # its tokens (code), its stripped text (a comment line), "" (a blank line)
    code: bool
    indent: str  # the first line's
    comments: tuple[str, ...] = ()  # the comments inside a code unit
    spans_lines: bool = False  # a string token over several lines (re-indenting it would change its value)
    nests: bool = True  # it can head a block (a C/C++ directive at column 0 heads none)


def without_trailing_commas(run: list) -> list:
    """A token run (tokens, or (token, line) pairs) without the commas that stand before a closing bracket."""
    text = [t if isinstance(t, str) else t[0] for t in run]
    return [t for n, t in enumerate(run) if not (text[n] == "," and n + 1 < len(run) and text[n + 1] in ")]}")]


def units_of(lines: list[str]) -> list[Unit] | None:
    """The units of a Python text, in order, covering every line; None where it does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    logical: list[tuple[int, int, list]] = []  # (first line, stop, tokens) of each logical line
    current: list = []
    for tok in tokens:
        if tok.type == tokenize.NEWLINE or (tok.type == tokenize.ENDMARKER and current):
            logical.append((current[0].start[0] - 1, max(tok.end[0], current[-1].end[0]), current))
            current = []
        elif tok.type not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
                              tokenize.ENDMARKER) and (current or tok.type != tokenize.COMMENT):
            current.append(tok)
    out, line = [], 0
    for start, stop, toks in logical:
        stop = min(stop, len(lines))
        out += [trivia(n, lines[n]) for n in range(line, start)]
        code = [t.string for t in toks if t.type not in SKIPPED]
        text = lines[start]
        out.append(Unit(start, stop, " ".join(without_trailing_commas(code)), True, text[:len(text) - len(text.lstrip())],
                        tuple(t.string for t in toks if t.type == tokenize.COMMENT),
                        any(t.type == tokenize.STRING and t.end[0] > t.start[0] for t in toks)))
        line = stop
    out += [trivia(n, lines[n]) for n in range(line, len(lines))]
    return out


def trivia(n: int, line: str) -> Unit:
    return Unit(n, n + 1, line.strip(), False, line[:len(line) - len(line.lstrip())])


@dataclass
class Read:
    """A text's lines and units, and the unit each line is in."""
    lines: list[str]
    units: list[Unit]
    syntax: Syntax

    def __post_init__(self):
        self.owner = [0] * len(self.lines)
        for n, unit in enumerate(self.units):
            for line in range(unit.start, unit.stop):
                self.owner[line] = n
        self.starts = {u.start for u in self.units} | {len(self.lines)}

    def unit_at(self, line: int) -> int:
        """The unit that starts at `line` (a unit boundary), or len(units) at the end."""
        return self.owner[line] if line < len(self.lines) else len(self.units)

    def text_of(self, n: int) -> str:
        return "".join(self.lines[self.units[n].start:self.units[n].stop])

    @cached_property
    def kinds(self) -> list[tuple[str, str] | None]:
        """The kind of block each unit opens (None for comment and blank lines)."""
        return [self.syntax.block_kind(self.text_of(m)) if u.code else None for m, u in enumerate(self.units)]

    @cached_property
    def header_keys(self) -> set[str]:
        """The keys of the units that open a block (as moved_key has them)."""
        return {three_way_key(u.key) for u in self.units if u.code and u.nests}

    @cached_property
    def counts(self) -> Counter:
        return Counter(self.kinds)

    def kind_of(self, n: int) -> tuple[tuple[str, str], int]:
        """(the kind of block unit `n` opens, how many code units of this text open that kind)."""
        return self.kinds[n], self.counts[self.kinds[n]]

    def body_keys(self, n: int) -> list[str]:
        """The keys of the statements in the block unit `n` opens (down to the next code unit indented as
        much as `n` or less; blank lines, comments and lone braces aside)."""
        width, out = len(self.units[n].indent.expandtabs()), []
        for unit in self.units[n + 1:]:
            if not unit.code or unit.key in ("{", "}", "};"):
                if unit.code and unit.key != "{" and len(unit.indent.expandtabs()) <= width:
                    break
                continue
            if len(unit.indent.expandtabs()) <= width:
                break
            out.append(unit.key)
        return out

    def parent(self, n: int) -> int | None:
        """The header of the block unit `n` is in: the nearest code unit above with less indentation."""
        width = len(self.units[n].indent.expandtabs())
        return next((m for m in range(n - 1, -1, -1) if self.units[m].code and self.units[m].nests
                     and len(self.units[m].indent.expandtabs()) < width), None)


@dataclass
class Change:
    pre: tuple[int, int]  # lines of the pre-image it replaces
    post: tuple[int, int]  # lines of the post-image it puts there
    hunks: set


def post_image(pre: list[str], hunks: tuple[Hunk, ...]) -> tuple[list[str], list[int | None], list[Change]]:
    """The diff's post-image, the pre-image line of each of its lines (None: added), and each run of
    changed lines as a Change (the hunks verified on `pre`)."""
    post, origin, changes, cursor = [], [], [], 0
    for n, hunk in enumerate(hunks):
        first = hunk.first
        for i, j, before in hunk.runs():
            at = first + before
            post += pre[cursor:at]
            origin += range(cursor, at)
            removed = sum(kind == "-" for kind, _ in hunk.lines[i:j])
            added = [text for kind, text in hunk.lines[i:j] if kind == "+"]
            changes.append(Change((at, at + removed), (len(post), len(post) + len(added)), {n}))
            post += added
            origin += [None] * len(added)
            cursor = at + removed
    return post + pre[cursor:], origin + list(range(cursor, len(pre))), changes


def widened(changes: list[Change], pre: Read, post: Read) -> list[Change]:
    """Each change over whole units on both sides (the unchanged lines it takes in are the same on both);
    changes that come to touch are one (a unit over both: widening one takes in the other, so the lines
    beyond stay the same on both sides)."""
    out: list[Change] = []
    at = 0
    while at < len(changes):
        (a, b), (c, d), hunks = changes[at].pre, changes[at].post, set(changes[at].hunks)
        at += 1
        while True:
            if out and a <= out[-1].pre[1]:  # into (or onto) the change before: one change
                last = out.pop()
                a, c, hunks = last.pre[0], last.post[0], hunks | last.hunks
            if at < len(changes) and b >= changes[at].pre[0]:  # into (or onto) the change after
                (_, b), (_, d) = changes[at].pre, changes[at].post
                hunks |= changes[at].hunks
                at += 1
            elif a not in pre.starts or c not in post.starts:
                a, c = a - 1, c - 1
            elif b not in pre.starts or d not in post.starts:
                b, d = b + 1, d + 1
            else:
                break
        out.append(Change((a, b), (c, d), hunks))
    return out


def aligned(pre: Read, target: Read, pre_defs: dict, target_defs: dict, swapped: dict | None = None) -> dict[int, int]:
    """Pre-image unit -> target unit: in order by their keys, then inside each def/class the order did not
    find (moved) by its qualified name, else its name where one def has it on each side, else its body;
    the header of a def found so is its partner even where the release changed it (the only partners
    whose keys differ). A def whose namesake has another def's body is matched to neither: into `swapped`
    go its span -> the other def's header unit."""
    keys_pre, keys_target = [u.key for u in pre.units], [u.key for u in target.units]
    found: dict[int, int] = {}
    for a, b, size in SequenceMatcher(None, keys_pre, keys_target, autojunk=False).get_matching_blocks():
        found.update((a + i, b + i) for i in range(size))
    by_name: dict[str, list] = {}
    for qualified, span in target_defs.items():
        by_name.setdefault(qualified[-1], []).append(span)
    names_pre: dict[str, int] = {}
    for qualified in pre_defs:
        names_pre[qualified[-1]] = names_pre.get(qualified[-1], 0) + 1
    named = {q[-1] for q in pre_defs}
    for qualified, (first, last) in sorted(pre_defs.items(), key=lambda item: item[1]):
        span = target_defs.get(qualified)
        if span is None and len(by_name.get(qualified[-1], ())) == 1 and names_pre[qualified[-1]] == 1:
            span = by_name[qualified[-1]][0]
        other = None if span is None else body_elsewhere(keys_pre[first + 1:last + 1], keys_target, span, target_defs)
        if other is not None:  # its name says one def, its body another (two defs' names swapped): nothing matched
            found = {a: b for a, b in found.items() if not first <= a <= last}
            if swapped is not None:
                swapped[(first, last)] = other[0]
            continue
        if first in found and target.units[found[first]].key == pre.units[first].key:
            continue
        if span is None:  # renamed and moved: the one def (a def, a class) of a name the pre-image lacks with this body
            sort = pre.syntax.block_kind(pre.text_of(first))[0]
            span = alike(keys_pre[first + 1:last + 1], keys_target,
                         [s for q, s in target_defs.items()
                          if q[-1] not in named and target.syntax.block_kind(target.text_of(s[0]))[0] == sort])
        if span is None:
            continue
        # what the order matched of either def is dropped: the def is matched to its namesake alone
        found = {a: b for a, b in found.items() if not first <= a <= last and not span[0] <= b <= span[1]}
        local = SequenceMatcher(None, keys_pre[first:last + 1], keys_target[span[0]:span[1] + 1], autojunk=False)
        for a, b, size in local.get_matching_blocks():
            found.update((first + a + i, span[0] + b + i) for i in range(size))
        if first not in found and span[0] not in found.values():  # its header, changed (renamed, arguments)
            found[first] = span[0]
    return found


def body_elsewhere(body: list[str], keys: list[str], span: tuple[int, int], defs: dict) -> tuple[int, int] | None:
    """The span of another def whose body is more like `body` than that of the def at `span`, found by
    name (the other 80% alike or more, and by 0.3 more than the named one); None where there is none."""
    def statements(run: list[str]) -> list[str]:  # (blank lines, comments and lone braces say nothing)
        return [key for key in run if key and key not in ("}", "};", "{") and not key.startswith(("#", "//"))]

    def ratio(a: int, b: int) -> float:
        return SequenceMatcher(None, body, statements(keys[a + 1:b + 1]), autojunk=False).ratio()

    body = statements(body)
    if len(body) < 3:
        return None
    named = ratio(*span)
    if named >= 0.7:
        return None
    return next((other for other in sorted(defs.values()) if other != span and
                 (r := ratio(*other)) >= 0.8 and r - named >= 0.3), None)


def alike(body: list[str], keys: list[str], spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The one span whose body (its units after the header) is like `body` (at least 3 units, 80% of them
    alike), where no other comes near it (within 10%)."""
    if len(body) < 3:
        return None
    scored = sorted(((SequenceMatcher(None, body, keys[a + 1:b + 1], autojunk=False).ratio(), (a, b))
                     for a, b in spans), reverse=True)
    if not scored or scored[0][0] < 0.8 or len(scored) > 1 and scored[1][0] > scored[0][0] - 0.1:
        return None
    return scored[0][1]


def defs_of(read: Read) -> dict[tuple[str, ...], tuple[int, int]] | None:
    """Qualified def/class name -> (its header's unit, its last unit); a name given twice is left out;
    None where the text does not parse."""
    try:
        tree = parse("".join(read.lines))
    except (SyntaxError, ValueError):
        return None
    out: dict = {}
    twice = set()

    def walk(node, chain):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = (*chain, child.name)
                if name in out:
                    twice.add(name)
                out[name] = (read.owner[child.lineno - 1], read.owner[child.end_lineno - 1])
                walk(child, name)
            else:
                walk(child, chain)

    walk(tree, ())
    return {name: span for name, span in out.items() if name not in twice}



def placements(pre_lines: list[str], target_lines: list[str], hunks: tuple[Hunk, ...],
               syntax: Syntax | None = None) -> list[tuple] | Conflict | None:
    """For each hunk (in order): (start, stop, replacement, rows of added lines in it, the hunk as it edits
    the target) on `target_lines`; None where one change cannot be placed by the units; a Conflict where a
    change is in a def whose name and body say two defs of the target (their names swapped): the hunks'
    text, which follows the name, must not decide that either."""
    syntax = syntax or PYTHON
    post_lines, origin, changes = post_image(pre_lines, hunks)
    units = [syntax.units(lines) for lines in (pre_lines, post_lines, target_lines)]
    if None in units:
        return None
    pre, post, target = (Read(lines, u, syntax) for lines, u in zip((pre_lines, post_lines, target_lines), units))
    defs = [syntax.defs(read) for read in (pre, target)]
    if None in defs:
        return None
    swapped: dict = {}
    partner = aligned(pre, target, *defs, swapped)
    per_hunk: dict[int, list] = {}
    changes = widened(changes, pre, post)
    for (first, last), other in swapped.items():
        change = next((c for c in changes if pre.units[first].start <= c.pre[0] and c.pre[1] <= pre.units[last].stop),
                      None)
        if change is not None:
            label = hunks[min(change.hunks)].label
            mine, theirs = pre.lines[pre.units[first].start].strip(), target.lines[target.units[other].start].strip()
            return Conflict(f"{label}: `{mine}` of the diff's pre-image has another body here, and its body is that "
                            f"of `{theirs}`: which of the two the diff means the text cannot tell")
    for change in changes:
        if len(change.hunks) != 1:
            return None  # one statement edited by two hunks: not placed this way
        spot = placed(change, pre, post, target, partner, origin)
        if spot is None or isinstance(spot, Conflict):
            return spot and Conflict(f"{hunks[min(change.hunks)].label}: {spot}")
        per_hunk.setdefault(next(iter(change.hunks)), []).append(spot)
    out, end = [], 0
    for n in range(len(hunks)):
        spots = per_hunk.get(n)
        if not spots:
            return None  # a hunk with no change of its own (all of it in another's statement)
        if spots[0][0] < end or any(s[1] > t[0] for s, t in zip(spots, spots[1:])):
            return None
        start, stop = spots[0][0], spots[-1][1]
        replacement, new_rows, rows, cursor = [], [], [], start
        for begin, finish, added in spots:
            rows += [(" ", line) for line in target_lines[cursor:begin]]
            replacement += target_lines[cursor:begin]
            rows += [("-", line) for line in target_lines[begin:finish]] + [("+", line) for line in added]
            new_rows += range(len(replacement), len(replacement) + len(added))
            replacement += added
            cursor = finish
        out.append((start, stop, replacement, new_rows, Hunk(tuple(rows), start + 1, hunks[n].header)))
        end = stop
    return out


def placed(change: Change, pre: Read, post: Read, target: Read, partner: dict[int, int], origin: list):
    """(target start line, stop line, the lines put there) for one change, or None."""
    first, last = pre.unit_at(change.pre[0]), pre.unit_at(change.pre[1])  # units [first, last)
    removed = range(first, last)
    if any(n not in partner or pre.units[n].key != target.units[partner[n]].key for n in removed):
        return merged_in_place(change, first, last, pre, post, target, partner)  # (a def's changed header)
    mine = [partner[n] for n in removed]
    if mine and mine != list(range(mine[0], mine[0] + len(mine))):
        return None  # not side by side in the target
    if any(pre.units[n].comments != target.units[partner[n]].comments for n in removed):
        return None  # a comment the release has in a statement the diff replaces
    above = next((n for n in range(first - 1, -1, -1) if pre.units[n].code), None)
    below = next((n for n in range(last, len(pre.units)) if pre.units[n].code), None)

    def next_to(n: int | None, side: int, at: int) -> bool:
        """Code unit `n` of the pre-image has its partner nearest target unit `at` (comment and blank lines
        aside) on `side` (-1 above, +1 from it down); no unit (the file's edge): the target has none there."""
        if n is not None and n not in partner:
            return False
        step = range(at - 1, -1, -1) if side < 0 else range(at, len(target.units))
        nearest = next((m for m in step if target.units[m].code and m not in mine), None)
        return nearest == (partner[n] if n is not None else None)

    if mine:
        t_first, t_last = mine[0], mine[-1] + 1
        beside = [next_to(above, -1, t_first), next_to(below, +1, t_last)]
        if not any(beside) or not all(beside) and repeated(target, mine):
            return None  # (where its statements stand twice, one neighbour does not tell which)
        start, stop = target.units[t_first].start, target.units[t_last - 1].stop
    else:
        start = stop = insertion(change, above, below, pre, target, partner)
        if start is None:
            return None
        t_first = t_last = target.unit_at(start)
        if not (next_to(above, -1, t_first) and next_to(below, +1, t_first)):
            return None
    shift = indentation(pre, target, partner, [n for n in (*removed, above, below) if n is not None])
    added = None if shift is None else moved_by(post, change.post, shift)
    if added is not None and target.lines:  # the release's line breaks (a CRLF file stays CRLF)
        eol = ending(target.lines[min(start, len(target.lines) - 1)]) or "\n"
        added = [line[:len(line) - len(ending(line))] + eol if ending(line) else line for line in added]
    if added is None or not same_blocks(change, pre, post, target, partner, origin, (start, stop), added):
        return None
    if decorates_one_def((pre.lines, target.lines), change.pre[0], start, change.pre[1] - change.pre[0], added):
        return None  # a decorator of another def here (the defs below them, which the hunk may not show)
    return start, stop, added


def repeated(target: Read, mine: list[int]) -> bool:
    """The code units `mine` of the target (side by side) stand, in the same order, elsewhere in their
    block too (under the same header: a second forward pass in one def, not another def's lines)."""
    keys = [target.units[n].key for n in mine]
    code = [n for n, u in enumerate(target.units) if u.code]
    run, header = len(keys), target.parent(mine[0])
    return any(code[i] != mine[0] and [target.units[m].key for m in code[i:i + run]] == keys and
               target.parent(code[i]) == header for i in range(len(code) - run + 1))


def merged_in_place(change: Change, first: int, last: int, pre: Read, post: Read, target: Read, partner: dict):
    """The one statement a change edits, changed by the release too, in place (its neighbours' partners
    have one statement between them, in the same block, at the same indentation): both edits, where they
    touch different tokens with one token between (a token-level `git merge-file` over the statement's
    lines; the release's formatting kept but where the diff edits). None otherwise."""
    post_units = range(post.unit_at(change.post[0]), post.unit_at(change.post[1]))
    if last - first != 1 or len(post_units) != 1 or not pre.units[first].code or not post.units[post_units[0]].code:
        return None
    above = next((n for n in range(first - 1, -1, -1) if pre.units[n].code), None)
    below = next((n for n in range(last, len(pre.units)) if pre.units[n].code), None)
    if any(n is not None and n not in partner for n in (above, below)):
        return None
    low = partner[above] + 1 if above is not None else 0
    high = partner[below] if below is not None else len(target.units)
    between = [m for m in range(low, high) if target.units[m].code]
    if len(between) != 1 or between[0] in set(partner.values()) and partner.get(first) != between[0]:
        return None
    mine, theirs = pre.units[first], target.units[between[0]]
    if mine.indent != theirs.indent or not same_header(pre, pre.parent(first), target, target.parent(between[0]),
                                                       partner, set(partner.values())):
        return None
    texts = ["".join(read.lines[u.start:u.stop]) for read, u in
             ((pre, mine), (post, post.units[post_units[0]]), (target, theirs))]
    merged = merged_tokens(*texts, syntax=pre.syntax)
    return merged if merged is None or isinstance(merged, Conflict) else (theirs.start, theirs.stop, lines_of(merged))


def merged_tokens(base: str, ours: str, theirs: str, syntax: Syntax | None = None) -> str | Conflict | None:
    """`theirs` (the release's statement) with the edits that make `base` `ours` (the diff's), where no edit
    of `theirs` touches them: the text between the unchanged tokens around each edit is the diff's. A
    Conflict where an edit of the diff's is in code the statement repeats and the release edited it too."""
    syntax = syntax or PYTHON
    b, o, t = (syntax.tokens(text) for text in (base, ours, theirs))
    if b is None or o is None or t is None:
        return None
    words = [[tok.string for tok in side] for side in (b, o, t)]
    ours_edits = [e for e in SequenceMatcher(None, words[0], words[1], autojunk=False).get_opcodes() if e[0] != "equal"]
    theirs_edits = [e for e in SequenceMatcher(None, words[0], words[2], autojunk=False).get_opcodes()
                    if e[0] != "equal"]
    spans = sorted([(i1, i2) for _, i1, i2, _, _ in ours_edits] + [(i1, i2) for _, i1, i2, _, _ in theirs_edits])
    if not ours_edits or any(first[1] >= second[0] for first, second in zip(spans, spans[1:])):
        return None  # nothing of the diff's, or two edits that meet (the same edit made by both too)
    theirs_tokens = [(i1, i2, words[2][j1:j2]) for _, i1, i2, j1, j2 in theirs_edits]
    if repeats_changed(words[0], theirs_tokens, [w for _, _, _, j1, j2 in ours_edits for w in words[1][j1:j2]]):
        return None  # what the diff adds repeats what the release changed
    if not apart(words[0], [(i1, i2, words[1][j1:j2]) for _, i1, i2, j1, j2 in ours_edits], theirs_tokens):
        return None  # an edit of one side inside brackets the other side's edits open and close
    if theirs_edits and any(repeated_around(words[0], i1, i2) for _, i1, i2, _, _ in ours_edits):
        # (the hunk's own text may name a neighbour the release moved too: not left to it)
        return Conflict("it edits code its statement holds more than once (nested blocks of one text), and the "
                        "release changed that statement elsewhere: which copy it means, only the positions say")
    same = {}
    for i, k, size in SequenceMatcher(None, words[0], words[2], autojunk=False).get_matching_blocks():
        same.update((i + n, k + n) for n in range(size))
    text = theirs
    for _, i1, i2, j1, j2 in reversed(ours_edits):
        if i1 == 0 or i2 == len(b) or i1 - 1 not in same or i2 not in same:
            return None  # an edit at the statement's edge: no unchanged token on both sides
        start, stop = t[same[i1 - 1]].end, t[same[i2]].start  # offsets in `theirs`
        if any(mark in theirs[start:stop] for mark in syntax.comment_starts):
            return None  # a comment of the release's where the diff edits
        gap = ours[o[j1 - 1].end:o[j2].start]
        if "\n" in theirs[start:stop] and "\n" not in gap:  # the release breaks the line there: kept
            gap = gap.rstrip() + theirs[start:stop][theirs[start:stop].rindex("\n"):]
        text = text[:start] + gap + text[stop:]
    expected = list(words[0])
    for _, i1, i2, j1, j2 in sorted(ours_edits + theirs_edits, key=lambda e: -e[1]):
        expected[i1:i2] = (words[1] if (_, i1, i2, j1, j2) in ours_edits else words[2])[j1:j2]
    found = syntax.tokens(text)
    return text if found is not None and [tok.string for tok in found] == expected else None


def repeated_around(base: list[str], start: int, stop: int, width: int = 3) -> bool:
    """Base tokens [start, stop) with `width` tokens on each side stand elsewhere in `base` too."""
    run = base[max(0, start - width):stop + width]
    return sum(base[n:n + len(run)] == run for n in range(len(base) - len(run) + 1)) > 1


@dataclass(frozen=True)
class Token:
    string: str
    start: int  # offsets in the text
    end: int


def code_tokens(text: str) -> list[Token] | None:
    """The code tokens of a statement's text (no comments, line breaks or indentation), with their offsets."""
    starts = [0]
    for line in lines_of(text):
        starts.append(starts[-1] + len(line))
    try:
        return [Token(tok.string, starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1])
                for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type not in SKIPPED]
    except (tokenize.TokenError, SyntaxError):
        return None


def insertion(change: Change, above, below, pre: Read, target: Read, partner: dict) -> int | None:
    """The target line where lines the diff inserts at pre-image unit `first` go: right after the code unit
    above where the diff puts them right after it, right before the one below where there, else at the
    same place among the same comment and blank lines."""
    after = pre.units[above].stop if above is not None else 0
    before = pre.units[below].start if below is not None else len(pre.lines)
    if above is not None and above not in partner or below is not None and below not in partner:
        return None
    t_after = target.units[partner[above]].stop if above is not None else 0
    t_before = target.units[partner[below]].start if below is not None else len(target.lines)
    if t_after > t_before:
        return None
    if above is None and change.pre[0] == before:
        return t_before  # (at the file's start: below a shebang, coding or license lines the release put there)
    if change.pre[0] == after:
        return t_after
    if change.pre[0] == before and all(not line.strip() for line in target.lines[t_after:t_before]):
        return t_before
    if pre.lines[after:before] == target.lines[t_after:t_before]:
        return t_after + change.pre[0] - after
    return None


def indentation(pre: Read, target: Read, partner: dict, around: list[int]) -> tuple[str, str] | None:
    """(pre-image indentation, target indentation) by which the release moved the units around the change
    (a def moved into a class: 4 more spaces); None where they moved by different amounts."""
    shifts = set()
    for n in around:
        if n in partner and pre.units[n].code:
            mine, theirs = pre.units[n].indent, target.units[partner[n]].indent
            common = 0
            while common < min(len(mine), len(theirs)) and mine[-1 - common] == theirs[-1 - common]:
                common += 1
            shifts.add((mine[:len(mine) - common], theirs[:len(theirs) - common]))
    return shifts.pop() if len(shifts) == 1 else None if shifts else ("", "")


def moved_by(post: Read, lines: tuple[int, int], shift: tuple[str, str]) -> list[str] | None:
    """The post-image's lines [a, b), each non-blank line re-indented from shift[0] to shift[1]."""
    block = post.lines[lines[0]:lines[1]]
    old, new = shift
    if old == new:
        return block
    if any(post.units[n].spans_lines for n in {post.owner[i] for i in range(*lines)}):
        return None  # a string over several lines: its text would change
    out = []
    for line in block:
        if not line.strip():
            out.append(line)
        elif line.startswith(old):
            out.append(new + line[len(old):])
        else:
            return None
    return out


def same_blocks(change: Change, pre: Read, post: Read, target: Read, partner: dict, origin: list,
                lines: tuple[int, int], added: list[str]) -> bool:
    """Each code unit the change removes or adds is in the block of the same header as in the diff: the
    header's partner in the target (or a header neither side aligns), or an added header at the same place."""
    taken = set(partner.values())
    first, last = pre.unit_at(change.pre[0]), pre.unit_at(change.pre[1])
    if not all(same_header(pre, pre.parent(n), target, target.parent(partner[n]), partner, taken)
               for n in range(first, last) if pre.units[n].code):
        return False
    # the added lines in place, read as units: within the module-level statements around them (their headers
    # are there), so that a change costs the lines of its def, not the file's
    t_first, t_last = target.unit_at(lines[0]), target.unit_at(lines[1])
    def outermost(n: int) -> bool:
        return target.units[n].code and target.units[n].nests and not target.units[n].indent

    w_first = next((n for n in range(t_first - 1, -1, -1) if outermost(n)), 0)
    w_last = next((n for n in range(t_last, len(target.units)) if outermost(n)), len(target.units))
    w0 = target.units[w_first].start if target.units else 0
    w1 = target.units[w_last].start if w_last < len(target.units) else len(target.lines)
    spliced = target.lines[w0:lines[0]] + added + target.lines[lines[1]:w1]
    units = target.syntax.units(spliced)
    if units is None:
        return False
    here = Read(spliced, units, target.syntax)
    post_first, post_last = post.unit_at(change.post[0]), post.unit_at(change.post[1])
    here_first = here.unit_at(lines[0] - w0)
    if here_first < len(here.units) and here.units[here_first].start != lines[0] - w0 or \
            here.unit_at(lines[0] - w0 + len(added)) - here_first != post_last - post_first:
        return False
    for k in range(post_last - post_first):
        mine, theirs = post_first + k, here_first + k
        if post.units[mine].key != here.units[theirs].key:
            return False
        if not post.units[mine].code:
            continue
        want, got = post.parent(mine), here.parent(theirs)
        if want is not None and want >= post_first:  # an added header: the same one here
            if got != here_first + (want - post_first):
                return False
            continue
        if got is not None and got >= here_first:
            return False
        if want is not None and origin[post.units[want].start] is None:
            return False  # its header is another change's
        header = None if want is None else pre.owner[origin[post.units[want].start]]
        if not same_header(pre, header, target, None if got is None else w_first + got, partner, taken):
            return False
    return True


def same_header(pre: Read, mine: int | None, target: Read, theirs: int | None, partner: dict, taken: set) -> bool:
    """Pre-image unit `mine` and target unit `theirs` (None: the module) are one block's header: partners,
    or both without a partner and opening the same kind of block (`def forward` with other arguments, `if`
    with another test; not an `enum` the release made an array)."""
    if mine is None or theirs is None:
        return mine is None and theirs is None
    if partner.get(mine) == theirs:
        return True
    return mine not in partner and theirs not in taken and same_kind(pre, mine, target, theirs)


class Headers:
    """Whether a change the line alignment placed (three_way.py) is in the block of the same header as in
    the pre-image: the header statements (the nearest code unit above indented less than the change, as
    Read.parent) are partners in the alignment, or each changed by the release (no partner) and opening the
    same kind of block (`def f(a)` made `def f(a, b)`; not `enum Kind {` made `static const int kinds[] = {`);
    or the top level on both sides. The texts are read as units only where the lines alone do not show it."""

    def __init__(self, pre_lines: list[str], target_lines: list[str], syntax: Syntax):
        self.lines, self.syntax = (pre_lines, target_lines), syntax
        self.reads: list[Read] | None = None
        self.taken: set[int] | None = None
        self.conflict = ""  # the first change found in another block

    def same(self, here: dict[int, int], at: int, spot: int, rows: list[tuple[str, str]]) -> bool:
        """The change of `rows` (hunk lines) at pre-image line `at`, placed at target line `spot`: in the
        same block, and that block in the same block, up to the top level (a method of the same class, not
        of another class with a method of the same text)."""
        width = indent_width(next((text for _, text in rows if text.strip()), ""))
        outer = False
        while width > 0:
            headers = self.headers(here, at, spot, width, outer)
            if headers is None:
                return False
            at, spot = headers
            if at is None:
                return True
            width, outer = indent_width(self.lines[0][at]), True
        return True

    def decorate_one_def(self, at: int, spot: int, removed: int, added: list[str]) -> bool:
        """A change in a decorator (or that is one) at pre-image line `at`, placed at target line `spot`: the
        decorators of defs of one name (a decorator's block is the def below it, which the hunk may not show:
        `@pytest.mark.parametrize` four deep above `def test_bwd`, a test of the same decorators added above)."""
        why = decorates_one_def(self.lines, at, spot, removed, added)
        self.conflict = self.conflict or why
        return not why

    def headers(self, here: dict[int, int], at: int, spot: int, width: int, outer: bool = False) -> tuple | None:
        """The first lines of the headers of the blocks that hold a line of indentation `width` at pre-image
        line `at` and target line `spot` ((None, None) at the top level), where they head one block; else
        None. `outer`: the blocks around the change's own (judge())."""
        mine, theirs = (less_indented(lines, line, width) for lines, line in zip(self.lines, (at, spot)))
        if mine is not None and theirs is not None and here.get(mine) == theirs:
            first, other = statement_start(self.lines[0], mine), statement_start(self.lines[1], theirs)
            if first is not None and here.get(first) == other and starts_a_statement(self.lines[0], first):
                return first, other  # the same statement heads both blocks (its first line the same, and aligned)
        if self.reads is None:
            units = [self.syntax.units(lines) for lines in self.lines]
            if None in units:  # not read as statements: only the same line heads both blocks
                return (mine, theirs) if self.judge(here, mine, theirs, None, outer) else None
            self.reads = [Read(lines, u, self.syntax) for lines, u in zip(self.lines, units)]
        pre, target = self.reads
        mine, theirs = header_unit(pre, at, width), header_unit(target, spot, width)
        units = None if mine is None or theirs is None else (mine, theirs)
        lines = (None if mine is None else pre.units[mine].start, None if theirs is None else target.units[theirs].start)
        return lines if self.judge(here, *lines, units, outer) else None

    def judge(self, here: dict, mine: int | None, theirs: int | None, units: tuple | None, outer: bool = False) -> bool:
        """Header lines `mine` (pre-image) and `theirs` (target), None at the top level, head one block;
        `units`: their units, where the texts were read as units (else only the same line heads both)."""
        pre, target = self.lines
        if mine is None or theirs is None:
            if mine is None and theirs is None:
                return True
            self.conflict = self.conflict or ("its lines are in a block here, at the top level in the diff's "
                                              "pre-image" if mine is None else "its lines are at the top level "
                                              "here, in a block in the diff's pre-image")
            return False
        if self.taken is None:
            self.taken = set(here.values())
        paired = here.get(mine) == theirs  # (a header over lines: its first line, where it names the block)
        if paired and (not units or self.reads[0].units[units[0]].key == self.reads[1].units[units[1]].key
                       or self.reads[0].kind_of(units[0])[0][1] in re.findall(r"\w+", pre[mine])):
            return True
        # (around the change's own block, a def the pre-image has and the release lacks may be the release's
        # def that still holds its lines: `_iter` split out of `__iter__` in main, the release's `__iter__`)
        if units and (paired or mine not in here and (theirs not in self.taken or outer and absent_name(
                self.reads[0], units[0], self.reads[1]))) and \
                same_kind(self.reads[0], units[0], self.reads[1], units[1]):
            return True
        twin = None if not units or mine in here else twin_of(self.reads[0], units[0], self.reads[1], units[1])
        if twin is not None:
            copy = target[self.reads[1].units[twin].start].strip()
            self.conflict = self.conflict or f"`{pre[mine].strip()}` of the diff's pre-image is renamed here, and " \
                f"both `{target[theirs].strip()}` and `{copy}` have its body: which one the text cannot tell"
        self.conflict = self.conflict or f"its lines are in another block here (`{target[theirs].strip()}` " \
                                         f"where the diff's pre-image has `{pre[mine].strip()}`)"
        return False


DECORATED = re.compile(r"\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")


def decorated_name(lines: list[str], at: int) -> str | None:
    """The name of the def or class a change at line `at` decorates, where it is in a
    decorator or is one (`@pytest.mark.parametrize(...)`, four deep above `def test_bwd`, its list of cases
    as long as it is); None elsewhere."""
    head = decorator_head(lines, at)
    if head is None:
        return None
    level = indent_width(lines[head])
    for line in lines[head + 1:]:
        text = line.strip()
        if not text or indent_width(line) > level or text[0] in "@#)]}":
            continue  # the decorators' own lines, their arguments, comments
        found = DECORATED.match(line)
        return found[1] if found else None
    return None


def change_decorates(lines: list[str], at: int, removed: int, added: list[str]) -> str | None:
    """The def a change at line `at` (`removed` lines there, `added` put in) decorates: lines it removes in a
    decorator; a decorator it adds (the def below); lines it adds inside a decorator's arguments (the lines
    on both sides in that decorator). None for any other change (lines added at the end of the method above
    a decorator are that method's)."""
    if removed:
        return decorated_name(lines, at)
    first = next((line for line in added if line.strip()), "")
    if first.lstrip().startswith("@"):
        return next((found[1] for line in lines[at:] if (found := DECORATED.match(line))), None)
    head = decorator_head(lines, at)
    return decorated_name(lines, at) if head is not None and head < at and decorator_head(lines, at - 1) == head \
        else None


def decorates_one_def(lines: tuple[list[str], list[str]], at: int, spot: int, removed: int, added: list[str]) -> str:
    """'' where the change at pre-image line `at`, target line `spot`, is in no decorator or in those of defs of
    one name, or of a def the release renamed (neither name in the other file); else why not."""
    mine, theirs = (change_decorates(text, line, removed, added) for text, line in zip(lines, (at, spot)))
    if mine == theirs or mine and theirs and not any(
            (found := DECORATED.match(line)) and found[1] == name for text, name in zip(lines, (theirs, mine))
            for line in text):
        return ""
    return f"its lines decorate `{theirs}` here, `{mine}` in the diff's pre-image"


def absent_name(pre: Read, mine: int, target: Read) -> bool:
    """Pre-image unit `mine` opens a def or class of a name the target has nowhere."""
    kind = pre.kind_of(mine)[0]
    return kind[0] in RENAMED and bool(kind[1]) and not any(k and k[1] == kind[1] for k in target.counts)


def same_kind(pre: Read, mine: int, target: Read, theirs: int) -> bool:
    """Pre-image unit `mine` and target unit `theirs` open the same block: the same kind, one block of
    its name in each file where it has a name (two overloads of `Put`, a property's getter and setter, are
    told apart by nothing but their place); or a def of a name the release has nowhere (renamed, or its
    lines not yet moved out of the def that holds them here: `_activation_checkpointing_enable`'s lines in
    the release's `gradient_checkpointing_enable`) whose lines stand here in a def of the same sort."""
    (kind, count), (other, other_count) = pre.kind_of(mine), target.kind_of(theirs)
    if kind[0] not in RENAMED and moved_header(pre, mine, target, theirs):
        return False
    if kind == other:
        return not kind[1] or kind[0] == "statement" or count == other_count == 1
    return kind[0] == other[0] and kind[0] in RENAMED and bool(kind[1]) and bool(other[1]) and \
        kind not in target.counts and twin_of(pre, mine, target, theirs) is None


def moved_header(pre: Read, mine: int, target: Read, theirs: int) -> bool:
    """The pre-image's header statement stands elsewhere in the target, or the target's elsewhere in the
    pre-image (`elif` and `if` alike): two blocks the release swapped or reordered (`if mode == "loss"`
    where the pre-image has `if mode == "predict"`, which is the target's `elif`), not one header changed.
    For branches and statements (a def or class is told by its name, and `def __iter__` may stand in both
    files beside the pre-image's `_iter`)."""
    keys = [three_way_key(read.units[n].key) for read, n in ((pre, mine), (target, theirs))]
    return keys[0] != keys[1] and (keys[0] in target.header_keys or keys[1] in pre.header_keys)


def twin_of(pre: Read, mine: int, target: Read, theirs: int) -> int | None:
    """Another block's header unit of the sort of target unit `theirs`, of a name the pre-image lacks,
    whose body is at least 80% like that of pre-image unit `mine` and as like it as `theirs`' (within 10%):
    a def renamed and copied, where which of the two the rename means the text cannot tell; else None."""
    body = pre.body_keys(mine)
    if len(body) < 3:
        return None
    sort = target.kind_of(theirs)[0][0]

    def ratio(n: int) -> float:
        return SequenceMatcher(None, body, target.body_keys(n), autojunk=False).ratio()

    chosen = ratio(theirs)
    return next((n for n, kind in enumerate(target.kinds) if kind and kind[0] == sort and kind not in pre.counts
                 and n != theirs and (r := ratio(n)) >= 0.8 and r >= chosen - 0.1), None)


RENAMED = {"def", "class", "function", "enum", "struct", "union", "namespace"}  # what a release renames (no label)


def less_indented(lines: list[str], at: int, width: int) -> int | None:
    """The nearest line above `at` indented less than `width` (blank and comment lines, and C/C++
    directives, aside); None at the top level."""
    pad = " " * width
    for n in range(at - 1, -1, -1):
        if lines[n].startswith(pad):
            continue  # (indented as much at least: the common case, cheaply)
        text = lines[n].lstrip()
        if text and not text.startswith(("#", "//", "/*", "*")) and \
                indent_width(lines[n]) < width:
            return n
    return None


def starts_a_statement(lines: list[str], n: int) -> bool:
    """Line `n` begins with a name or a decorator and the code line above it leaves nothing open."""
    if not re.match(r"\s*[A-Za-z_@]", lines[n]):
        return False
    above = next((lines[m].rstrip() for m in range(n - 1, -1, -1) if lines[m].strip()), "")
    return not above.endswith(("(", "[", ",", "\\", "=", "+", "-", "*", "/", "&&", "||", "and", "or"))


def header_unit(read: Read, line: int, width: int) -> int | None:
    """The header of the block a line of indentation `width` at `line` is in: the nearest code unit that
    starts above `line` and is indented less (the statement over lines it is inside, where it is)."""
    for n in range(read.owner[line - 1] if 0 < line <= len(read.lines) else len(read.units) - 1, -1, -1):
        unit = read.units[n]
        if unit.code and unit.nests and unit.start < line and len(unit.indent.expandtabs()) < width:
            return n
    return None


@dataclass(frozen=True)
class Syntax:
    """What the units need of a language: its units, its code tokens with their offsets, its defs by
    qualified name, and how a comment starts."""
    units: Callable[[list[str]], list[Unit] | None]
    tokens: Callable[[str], list[Token] | None]
    defs: Callable[[Read], dict[tuple[str, ...], tuple[int, int]] | None]
    comment_starts: tuple[str, ...]
    block_kind: Callable[[str], tuple[str, str]]  # what a block's header opens: (def, forward), (if, ), (enum, Kind)


def block_kind(header: str) -> tuple[str, str]:
    """What kind of block a Python header opens: (`def`/`class`, its name), (`except`/`case`, what it catches
    or matches), else (its first word or sign, "") (`if`, `with`, `)` closing a header over lines)."""
    if named := re.match(r"\s*(?:async\s+)?(def|class)\s+(\w+)", header):
        return named[1], named[2]
    if labelled := re.match(r"\s*(except|case)\b\s*(.*?)\s*(?:\bas\s+\w+\s*)?:", header):  # what it catches, matches
        return labelled[1], " ".join(labelled[2].split())
    if not re.sub(r"#[^\n]*", "", header).rstrip().endswith(":"):  # a statement over lines, no block header
        return statement_kind(header)
    first = re.match(r"\s*(\w+|\S)", header)
    word = first[1] if first else ""
    return ("if" if word == "elif" else word), ""  # a branch made the first or a later one: one test still


def statement_kind(text: str) -> tuple[str, str]:
    """A statement over lines that holds the change (no block header): ("statement", the first function it
    calls, else its first name); there may be several of one name in a file, its place tells them apart."""
    called = re.search(r"([A-Za-z_]\w*)\s*\(", text)
    first = re.search(r"[A-Za-z_]\w*", text)
    return "statement", called[1] if called else first[0] if first else ""


PYTHON = Syntax(units_of, code_tokens, defs_of, ("#",), block_kind)
