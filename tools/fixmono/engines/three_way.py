"""Placing a diff's hunks through its pre-image: where the file the diff was
made on is at hand (its blob in the checkout's objects), its lines are aligned
to the target's, and each run of changed lines goes where its own lines and
both its neighbours sit, side by side, in the target: the context around them
may have changed since (what a hunk-only port must refuse), the lines the diff
edits may not. Anything else, and the hunk ladder decides as without it.
`git merge-file` is the same idea; here the stricter rule: a change whose
neighbour line is not where the pre-image has it is not placed this way.
A line the diff edits that the target changed too (in place, line for line)
takes both edits where they touch different tokens of it (`f(a)` made
`g(a)` by the diff, `f(a, b)` by the release: `g(a, b)`); else it is not
placed. Lines inserted need their neighbours: one unchanged, the other at most
edited in place (beside_its_neighbours). Given the language's block kinds, a
change must also be in the block of the same header (or one the release
changed that opens the same kind of block): an enum's entries the release
moved into an array take no new entry."""
from __future__ import annotations

import bisect
import dataclasses
import keyword
import re
from difflib import SequenceMatcher, get_close_matches

from fixmono.model.patchfile import Hunk


def verified(pre: list[str], hunks: tuple[Hunk, ...]) -> bool:
    """Every hunk's old lines stand in `pre` at the line it names: `pre` is the diff's pre-image."""
    return all(pre[h.start - 1:h.start - 1 + len(h.old)] == h.old if h.old else h.start <= len(pre) + 1
               for h in hunks)


PRESENT = "present"  # every change of a hunk stands in the target as the diff makes it


class Conflict(str):
    """Why a change whose lines and neighbours the target has is not placed: the block around them is
    another kind of block there."""


def placements(pre: list[str], target: list[str], hunks: tuple[Hunk, ...], headers=None,
               by_text=lambda hunk: False) -> list[tuple | None] | str | None:
    """For each hunk (in order): (start, stop, replacement, rows of added lines in it, the hunk as it edits
    the target) on `target` as it is before any hunk, its rows made to fit the target where they had to be
    (a line both changed, merged; a name the target renamed). PRESENT where every
    hunk's changes stand in the target already; None where one change cannot be placed by the
    alignment, or some hunks are there and some not. `headers` (structure.Headers, for a language it
    reads): each change must also be in the block of the same header as in the pre-image, else a Conflict.
    A hunk the alignment does not place for which `by_text(hunk)` holds (one-line imports) is None in the
    list, left to its text, where others are placed."""
    here = aligned(pre, target)
    moved = moved_lines(pre, target, here)
    out = []
    for hunk in hunks:
        placed = placement(hunk, here, pre, target, headers, moved)
        if placed is None and (headers and headers.conflict or not by_text(hunk)):
            return Conflict(f"{hunk.label}: {headers.conflict}") if headers and headers.conflict else None
        out.append(placed)
    if None in out and all(placed in (None, PRESENT) for placed in out):
        return None  # nothing placed by the alignment: the hunks judge it
    if all(placed == PRESENT for placed in out):
        return PRESENT  # every hunk's changes stand there already, as the diff makes them
    if PRESENT in out:
        return None  # some hunks there, some not: the hunks judge it
    ends = [(placed[0], placed[1]) for placed in out if placed is not None]
    if any(stop > start_next for (_, stop), (start_next, _) in zip(ends, ends[1:])):
        return None  # two hunks over one line of the target
    return out


def beside_its_neighbours(at: int, spot: int, here: dict[int, int], pre: list[str], target: list[str],
                          added: list[str]) -> bool:
    """Lines `added` before pre-image line `at`, at target line `spot`: the code lines nearest above and
    below them (blank lines between passed over alike on both sides; one indented less than the first
    added line is outside their block, and says nothing) are there, one of them unchanged and telling (not
    a bracket, `pass`; the file's edge counts), the other, where no blank line stands between, at least
    at the same indentation (not `fh.write(data)` moved into a `with` block; the last line of a def whose
    body the release replaced has no unchanged neighbour in its block)."""
    width = indentation(next((line for line in added if line.strip()), ""))
    unchanged = 0
    for mine, theirs, step in ((at - 1, spot - 1, -1), (at, spot, 1)):
        apart = False  # blank lines between the added lines and this one
        while 0 <= mine < len(pre) and 0 <= theirs < len(target) and not pre[mine].strip() \
                and not target[theirs].strip() and here.get(mine) == theirs:
            mine, theirs, apart = mine + step, theirs + step, True
        if 0 <= mine < len(pre) and pre[mine].strip() and indentation(pre[mine]) < width and \
                (here.get(mine) == theirs or not 0 <= theirs < len(target) or indentation(target[theirs]) < width):
            continue  # the block's header or what follows the block: the Headers check judges the block
        if mine < 0 or mine >= len(pre):
            unchanged += theirs < 0 or theirs >= len(target)
        elif here.get(mine) == theirs:
            unchanged += telling(pre[mine])
        elif not apart and (not 0 <= theirs < len(target) or indentation(pre[mine]) != indentation(target[theirs])):
            return False  # (beyond a blank line, what the release changed is no neighbour of the added lines)
    return unchanged > 0


def telling(line: str) -> bool:
    """A line that says where it is: some name or number in it, not only `pass`, `else:`, `return`."""
    return bool(re.search(r"\w", line)) and line.strip().rstrip(":;") not in (
        "pass", "else", "return", "break", "continue", "try", "finally", "default", "public", "private")


def indentation(line: str) -> int:
    return len(line.expandtabs()) - len(line.lstrip().expandtabs())


def aligned(pre: list[str], target: list[str]) -> dict[int, int]:
    """pre-image line -> target line, for the lines the alignment finds unchanged: as `git diff
    --patience` does it (common ends; then the lines found once in each side, in an order both keep,
    as anchors; the same between them), with difflib's longest matches where no line is unique.
    Whole files of a release through difflib alone took most of the port's time."""
    found: dict[int, int] = {}
    todo = [(0, len(pre), 0, len(target))]
    while todo:
        a0, a1, b0, b1 = todo.pop()
        while a0 < a1 and b0 < b1 and pre[a0] == target[b0]:
            found[a0] = b0
            a0, b0 = a0 + 1, b0 + 1
        while a0 < a1 and b0 < b1 and pre[a1 - 1] == target[b1 - 1]:
            a1, b1 = a1 - 1, b1 - 1
            found[a1] = b1
        if a0 == a1 or b0 == b1:
            continue
        anchors = unique_in_order(pre, a0, a1, target, b0, b1)
        if not anchors:
            for a, b, size in SequenceMatcher(None, pre[a0:a1], target[b0:b1], autojunk=False).get_matching_blocks():
                found.update((a0 + a + i, b0 + b + i) for i in range(size))
            continue
        for a, b in anchors:
            found[a] = b
            todo.append((a0, a, b0, b))
            a0, b0 = a + 1, b + 1
        todo.append((a0, a1, b0, b1))
    return found


def unique_in_order(pre: list[str], a0: int, a1: int, target: list[str], b0: int, b1: int) -> list[tuple[int, int]]:
    """The lines found exactly once in pre[a0:a1] and once in target[b0:b1], as (pre line, target line),
    the longest run of them in the same order on both sides."""
    once_pre, once_target = unique_rows(pre, a0, a1), unique_rows(target, b0, b1)
    pairs = [(a, once_target[line]) for line, a in once_pre.items() if line in once_target]
    pairs.sort()
    tails: list[int] = []  # patience sorting: the longest increasing run of target lines
    tail_at: list[int] = []
    back = [-1] * len(pairs)
    for n, (_, b) in enumerate(pairs):
        k = bisect.bisect_left(tails, b)
        back[n] = tail_at[k - 1] if k else -1
        tails[k:k + 1], tail_at[k:k + 1] = [b], [n]
    run, n = [], tail_at[-1] if tail_at else -1
    while n >= 0:
        run.append(pairs[n])
        n = back[n]
    return run[::-1]


def unique_rows(lines: list[str], start: int, stop: int) -> dict[str, int]:
    """The lines of lines[start:stop] found there once, each with its index."""
    seen: dict[str, int] = {}
    for n in range(start, stop):
        seen[lines[n]] = -1 if lines[n] in seen else n
    return {line: n for line, n in seen.items() if n >= 0}


def moved_lines(pre: list[str], target: list[str], here: dict[int, int]) -> set[str]:
    """The telling lines that stand, unaligned, on both sides (as moved_key has them): lines the release
    moved (two defs or branches that trade places), which line for line beside a change are no edit in
    place."""
    taken = set(here.values())
    mine = {moved_key(line) for n, line in enumerate(pre) if n not in here and telling(line)}
    return mine & {moved_key(line) for n, line in enumerate(target) if n not in taken and telling(line)}


def moved_key(line: str) -> str:
    """A line as moving it may leave it: its indentation aside, a branch's `elif`/`else if` as `if` (the
    first branch of a chain the release reordered is an `if`)."""
    return ELSE_IF.sub("if", line.strip())


ELSE_IF = re.compile(r"^(?:\}\s*)?(?:elif|else\s+if)\b")


def statement_start(lines: list[str], n: int) -> int | None:
    """The first line of the statement line `n` ends (`def f(` above `) -> None:`; the header above a lone
    `{`), by its brackets, as far as 50 lines up; None where that does not tell."""
    depth = 0
    for m in range(n, max(n - 50, -1), -1):
        text = re.sub(r"(#|//).*", "", re.sub(r"'[^']*'|\"[^\"]*\"", "", lines[m])).strip()
        if m == n and text == "{":
            continue  # (Allman: the header is above its brace)
        depth += sum(text.count(c) for c in ")]}") - sum(text.count(c) for c in "([{")
        if depth <= 0 and text:
            return m
    return None


DEF_LINE = re.compile(r"\s*(?:async\s+)?(?:def|class)\s")


def decorator_head(lines: list[str], at: int) -> int | None:
    """The `@` line of the decorator line `at` is, or is inside the arguments of (a parametrize list written
    over lines, black's way: `[` above the changed line), as far as 400 lines up; None where it is in none."""
    if at < len(lines) and lines[at].lstrip().startswith("@"):
        return at
    width = indentation(next((line for line in lines[at:] if line.strip()), ""))
    if not width:
        return None  # a decorator's arguments are indented
    depth = 0  # brackets opened above `at` and still open there
    for m in range(min(at, len(lines)) - 1, max(at - 400, -1), -1):
        text = re.sub(r"(#|//).*", "", re.sub(r"'[^']*'|\"[^\"]*\"", "", lines[m])).strip()
        depth += sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
        if text.startswith("@") and depth > 0:
            return m
        if text and (depth <= 0 and indentation(lines[m]) < width or DEF_LINE.match(lines[m])):
            return None  # the block the line is in opens here (a def is never in a decorator's arguments)
    return None


SMALL_BLOCK = 40  # lines above a change within which the headers of its blocks are looked for
CLAUSE = re.compile(r"\s*(?:\}\s*)?(?:elif|else|except|finally|catch)\b")  # a compound statement's later clause


def enclosing_blocks(lines: list[str], at: int, width: int) -> int:
    """The first line of the outermost block around line `at` (of indentation `width`) inside its def or
    class, within SMALL_BLOCK lines above it: each header from its first line (`elif (` above `):`), a later
    clause from its compound's head (`if` above `else:`); `at` where there is none."""
    top = at
    while True:
        header = next((n for n in range(top - 1, max(at - SMALL_BLOCK, 0) - 1, -1)
                       if lines[n].strip() and indentation(lines[n]) < width), None)
        if header is None:
            return top
        header = statement_start(lines, header) or header
        if defines_a_function(lines[header]) or re.match(r"\s*(class|struct|namespace|@)\b", lines[header]):
            return top
        while CLAUSE.match(lines[header]):
            head = next((n for n in range(header - 1, max(at - SMALL_BLOCK, 0) - 1, -1) if lines[n].strip()
                         and indentation(lines[n]) <= indentation(lines[header])), None)
            if head is None or indentation(lines[head]) < indentation(lines[header]):
                break
            header = statement_start(lines, head) or head
        top, width = header, indentation(lines[header])


def decorated(lines: list[str], at: int) -> int:
    """The def line below the decorator that line `at` is in or is (decorator_head), within SMALL_BLOCK
    lines; -1 where it is in none."""
    head = decorator_head(lines, at)
    if head is None:
        return -1
    return next((n for n in range(head + 1, min(head + SMALL_BLOCK, len(lines)))
                 if indentation(lines[n]) == indentation(lines[head]) and defines_a_function(lines[n])), -1)


def crossed(at: int, removed: int, width: int, here: dict[int, int], pre: list[str], target: list[str],
            moved: set[str]) -> bool:
    """From the first line of the blocks the change at pre-image lines [at, at + removed) is in, inside its
    def (enclosing_blocks: its lines of indentation `width`; within SMALL_BLOCK lines above: a whole class
    holds moved lines of no concern), or the nearest aligned line above it where that is nearer, down to
    the nearest aligned line below it, a line that differs from its target line (by its place from the aligned line above it)
    where one of the two stands elsewhere on the other side (moved): the change's place is taken line for
    line across a move (a method's header where the release swapped two methods of one body; a branch's
    lines where it swapped two branches), no place."""
    top = enclosing_blocks(pre, at, width)
    top = min(top, next((i for i in range(at - 1, -1, -1) if i in here), -1) + 1)
    below = next((i for i in range(at + removed, len(pre)) if i in here), len(pre))
    below = max(below, decorated(pre, at) + 1)  # (a decorator's lines: down to the def it decorates)
    above = next((i for i in range(top - 1, -1, -1) if i in here), -1)
    for n in range(top, below):
        if n in here:
            above = n
            continue
        theirs = here.get(above, -1) + (n - above)
        if 0 <= theirs < len(target) and pre[n] != target[theirs] and \
                (moved_key(pre[n]) in moved or moved_key(target[theirs]) in moved):
            return True
    return False


def placement(hunk: Hunk, here: dict[int, int], pre: list[str], target: list[str], headers=None,
              moved: set[str] = frozenset()):
    """The hunk's changes, each where its own lines and its neighbours are in the target, as one
    replacement of the target's lines from its first change to its last (the target's own lines between).
    Names the target renamed on the hunk's lines (`data` -> `blob`) are renamed in the lines it adds.
    None where a change's place is taken across lines the release moved (`moved`, crossed())."""
    rename = renamed_names(hunk, here, pre, target)
    rows = [(k, renamed(t, rename) if k == "+" else t) for k, t in hunk.lines]
    edited = {r: t for r, (k, t) in enumerate(rows) if t != hunk.lines[r][1]}  # row -> its text here
    changes = []  # (target start, target stop, added lines)
    present = []  # changes the target holds already, line for line where the pre-image has their lines
    first = hunk.first  # the pre-image line of the hunk's first row
    for i, j, before in hunk.runs():
        at = first + before
        removed = sum(k == "-" for k, _ in rows[i:j])
        added = [t for k, t in rows[i:j] if k == "+"]
        spot = target_span(at, removed, here, len(target), len(pre))
        if spot is None and not removed:
            spot = beside_lines_it_lacks(at, here, pre, target, added)
        if spot is not None and not removed and not beside_its_neighbours(at, spot[0], here, pre, target, added):
            return None
        if spot is None:
            spot = in_place(at, removed, here, len(target), len(pre))
            if spot is None or removed != len(added):
                return None
            theirs = target[spot[0]:spot[1]]
            if theirs == added:  # the target holds this change already (in the block of the same header)
                if headers and not headers.same(here, at, spot[0], rows[i:j]):
                    return None
                present.append(True)
                continue
            added = [merge_line(pre[at + n], added[n], theirs[n]) for n in range(removed)]
            if None in added:
                return None
            minus = [r for r in range(i, j) if rows[r][0] == "-"]
            plus = [r for r in range(i, j) if rows[r][0] == "+"]
            edited.update({minus[n]: theirs[n] for n in range(removed)})
            edited.update({plus[n]: added[n] for n in range(removed)})
        if headers and not headers.same(here, at, spot[0], rows[i:j]) or \
                moved and crossed(at, removed, indentation(next((t for _, t in rows[i:j] if t.strip()), "")), here,
                                  pre, target, moved) or \
                headers and not headers.decorate_one_def(at, spot[0], removed, added):
            return None
        changes.append((*spot, added))
    if present and not changes:
        return PRESENT
    if not changes or present:  # some of it here already, some not: the hunks judge it
        return None
    start, stop = changes[0][0], changes[-1][1]
    replacement, new_rows, cursor = [], [], start
    for begin, end, lines in changes:
        replacement += target[cursor:begin]
        new_rows += range(len(replacement), len(replacement) + len(lines))
        replacement += lines
        cursor = end
    return start, stop, replacement, new_rows, with_merged(hunk, edited)


def with_merged(hunk: Hunk, edited: dict[int, str]) -> Hunk:
    """The hunk as it edits the target: `edited` {row of hunk.lines: its text here}."""
    lines = tuple((kind, edited.get(row, text)) for row, (kind, text) in enumerate(hunk.lines))
    return dataclasses.replace(hunk, lines=lines) if edited else hunk


def renamed_names(hunk: Hunk, here: dict[int, int], pre: list[str], target: list[str]) -> dict[str, str]:
    """Names the target renamed, consistently, on the hunk's old lines that it changed in place (each
    such line the same but for names swapped one for one); a name still on any of them, or anywhere in
    the target's function around them (a parameter the release still has: `Clamp(n)` made `Clamp(kMax)`
    renames no `n`), is not renamed, nor is a keyword."""
    found: dict[str, set] = {}
    seen_here: set[str] = set()
    at = hunk.start - 1
    spots = []
    for n in range(len(hunk.old)):
        spot = None if at + n in here else in_place(at + n, 1, here, len(target), len(pre))
        if spot is None:
            continue
        spots.append(spot[0])
        old, new = TOKEN.findall(pre[at + n]), TOKEN.findall(target[spot[0]])
        seen_here |= set(new)
        swapped = [(a, b) for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
                   if tag != "equal" for a, b in (zip(old[i1:i2], new[j1:j2]) if i2 - i1 == j2 - j1 else [("", "")])]
        if all(NAME.fullmatch(a) and NAME.fullmatch(b) and not {a, b} & KEYWORDS for a, b in swapped) and \
                not any(member(old, i) for i, token in enumerate(old) if any(token == a for a, _ in swapped)):
            for a, b in swapped:  # the line the same but for names swapped, none a member or a qualified name
                found.setdefault(a, set()).add(b)
    if found:
        first, last = enclosing_def(target, min(spots)), enclosing_def(target, max(spots))
        seen_here |= {t for line in target[first[0]:last[1]] for t in NAME.findall(line)}
        mine = pre[enclosing_def(pre, at)[0]:enclosing_def(pre, at + len(hunk.old) - 1)[1]]
        found = {a: b for a, b in found.items() if binds(mine, a)}
    return {a: b.pop() for a, b in found.items() if len(b) == 1 and a not in seen_here}


def binds(lines: list[str], name: str) -> bool:
    """`name` is a local of the function `lines` hold (its first line the header): a parameter, or assigned,
    looped over or bound by `as` in it; a module, a namespace or a function it calls is none (`np.min` made
    `torch.min`, `gelu(h)` made `silu(h)`: the release calls another thing, no variable was renamed)."""
    word = re.escape(name)
    header = lines[0].split("(", 1)[1] if lines and "(" in lines[0] else ""
    return re.search(rf"\b{word}\b", header) is not None or any(
        re.search(rf"\b{word}\s*(?:=(?!=)|:[^:]|,[^=]*=[^=])|\b(?:for|as)\s+{word}\b", line) for line in lines[1:])


KEYWORDS = set(keyword.kwlist) | {"auto", "break", "case", "catch", "class", "const", "constexpr", "continue",
                                  "default", "delete", "do", "else", "enum", "for", "if", "namespace", "new",
                                  "nullptr", "return", "sizeof", "static", "struct", "switch", "template", "this",
                                  "throw", "try", "typedef", "typename", "union", "using", "virtual", "void",
                                  "volatile", "while",  # and C/C++'s own types: a type changed is no rename
                                  "bool", "char", "double", "float", "int", "long", "short", "signed", "unsigned",
                                  "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
                                  "uint32_t", "uint64_t"}


def member(tokens: list[str], at: int) -> bool:
    """tokens[at] is a member or a qualified name (`self.mask`, `at::empty`, `stream->Sync`): not a local."""
    code = [t for t in tokens[:at] if not t.isspace()][-2:]
    return code[-1:] == ["."] or code == [":", ":"] or code == ["-", ">"]


CONTROL = {"if", "elif", "else", "for", "while", "with", "try", "except", "finally", "switch", "case", "do",
           "catch", "return", "match"}


def defines_a_function(line: str) -> bool:
    """A Python def line, or a C/C++ function's header: a name and its arguments opening a body (`{` there,
    or next: `)` ends it), no control statement, nothing assigned or called on an object before them."""
    words, text = re.findall(r"[A-Za-z_]\w*", line), line.strip()
    if words[:1] in (["def"], ["async"]):
        return True
    head = text.split("(", 1)[0]
    return bool(words) and "(" in text and text.endswith(("{", ")")) and words[0] not in CONTROL and \
        not any(mark in head for mark in ("=", ".", "->", "return", "class ", "struct "))


def enclosing_def(lines: list[str], at: int, level: int | None = None) -> tuple[int, int]:
    """(first line, one past the last) of the def or function line `at` is in (a line of indentation
    `level` there, where given), by indentation: the nearest less indented header above that defines one
    (`def`, a C/C++ header with arguments that is no control statement), else the unindented statement
    above; down to the next line indented as little (a closing brace or parenthesis, a comment, a
    directive or a blank line aside)."""

    def code(n: int) -> bool:
        text = lines[n].strip()
        return bool(text) and not text.startswith(("}", ")", "#", "//", "/*", "*"))

    if level is None:  # the line's own indentation (a blank line: the next code line's)
        below = next((n for n in range(at, len(lines)) if lines[n].strip()), None)
        level = indentation(lines[below]) if below is not None else 0
    header = at
    while level > 0:
        above = next((n for n in range(header - 1, -1, -1) if code(n) and indentation(lines[n]) < level), None)
        if above is None:
            break
        header, level = above, indentation(lines[above])
        if defines_a_function(lines[above]):
            break
    stop = next((n for n in range(max(at, header) + 1, len(lines)) if code(n) and indentation(lines[n]) <= level),
                len(lines))
    return header, stop


def renamed(line: str, rename: dict[str, str]) -> str:
    """`line` with the names `rename` maps renamed, where they are names: not an attribute (`self.mask`) nor
    a keyword argument (`gate(h, mask=mask)`: the callee's parameter keeps its name)."""
    if not rename:
        return line
    tokens = TOKEN.findall(line)
    if "".join(tokens) != line:
        return line
    code = [n for n, t in enumerate(tokens) if not t.isspace()]
    out, depth = list(tokens), 0
    for i, n in enumerate(code):
        token = tokens[n]
        depth += (token in "([{") - (token in ")]}")
        if token not in rename:
            continue
        after = [tokens[m] for m in code[i + 1:i + 3]]
        keyword_argument = depth > 0 and after[:1] == ["="] and after[1:2] != ["="]
        if not member(tokens, n) and not keyword_argument:
            out[n] = rename[token]
    return "".join(out)


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


def beside_lines_it_lacks(at: int, here: dict[int, int], pre: list[str], target: list[str], added: list[str]):
    """Where lines added before pre-image line `at` go when the target lacks the pre-image's lines on one
    side of them, and nothing stands in their stead: one neighbour unchanged beside them, the next line the
    target has on the other side right after it (the release deleted the lines between, or never had them:
    `self._starting_state_dict = None` added in main after the line the diff's line follows). None where
    a line it lacks stands elsewhere in the target, or one much like it (moved: the added lines' order to
    it is unknown), or it assigns what the `added` lines read (they need it)."""
    above = next((i for i in range(at - 1, -1, -1) if i in here), -1)
    below = next((i for i in range(at, len(pre)) if i in here), len(pre))
    above_t, below_t = here.get(above, -1), here.get(below, len(target))
    if below_t != above_t + 1 or (above != at - 1) == (below != at):
        return None  # lines of the target between, or it lacks lines on both sides (or on neither)
    lacking = [pre[n].strip() for n in range(above + 1, below) if pre[n].strip()]
    first, last = enclosing_def(target, min(above_t + 1, len(target) - 1)) if target else (0, 0)
    nearby = [line.strip() for line in target[first:last] if line.strip()]  # (its function: a look-alike
    # line elsewhere in the file is another's)
    if set(lacking) & {line.strip() for line in target} or \
            any(get_close_matches(line, nearby, n=1, cutoff=0.85) for line in lacking) or \
            binds_what_it_reads(lacking, added):
        return None  # (moved, maybe reworded: `Dropout(cfg.p)` now `Dropout(p=cfg.p)` at the list's end)
    return above_t + 1, above_t + 1


def binds_what_it_reads(lacking: list[str], added: list[str]) -> bool:
    """A name the lines the release lacks assign (`self.tokenizer = load(...)`) is read by the added lines:
    they need those lines, which the release does not have."""
    bound = {m[1] for line in lacking if (m := re.match(r"\s*([A-Za-z_][\w.]*)\s*(?::[^=]*)?=(?!=)", line))}
    return any(re.search(rf"(?<![\w.]){re.escape(name)}\b", line) for name in bound for line in added)


def in_place(at: int, removed: int, here: dict[int, int], target_size: int, pre_size: int):
    """Where pre-image lines [at, at + removed) are in the target as lines changed in place: between
    the nearest unchanged lines above and below, as many lines in the target as in the pre-image."""
    above = next((i for i in range(at - 1, -1, -1) if i in here), -1)
    below = next((i for i in range(at + removed, pre_size) if i in here), pre_size)
    above_t, below_t = here.get(above, -1), here.get(below, target_size)
    if not removed or below_t - above_t != below - above or any(at + n in here for n in range(removed)):
        return None  # (a line the alignment found unchanged elsewhere was not changed here)
    start = above_t + (at - above)
    return start, start + removed


NAME = re.compile(r"[A-Za-z_]\w*")
TOKEN = re.compile(r"\s+|\w+|'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"|\S")


def merge_line(base: str, ours: str, theirs: str) -> str | None:
    """`base` with the diff's edit (to `ours`) and the target's (to `theirs`), where they touch
    different tokens with at least one between, or are the same edit (a token-level `git merge-file`);
    None where they meet."""
    if theirs == base:
        return ours
    b, o, t = (TOKEN.findall(line) for line in (base, ours, theirs))
    if any(token in ("'", '"') for token in b + o + t):
        return None  # part of a string the line does not close: its text is no code to merge
    ours_edits, theirs_edits = edits_of(b, o), edits_of(b, t)
    if repeats_changed(b, theirs_edits, [token for _, _, added in ours_edits for token in added]):
        return None
    edits = sorted(ours_edits + [e for e in theirs_edits if e not in ours_edits])  # one edit both made: once
    if any(first[1] >= second[0] or not "".join(b[first[1]:second[0]]).strip()
           for first, second in zip(edits, edits[1:])):
        return None  # the two edits overlap or touch (nothing but spaces between: `>` made `>=`, `0` made `1`)
    if not apart(b, [e for e in ours_edits if e not in theirs_edits], [e for e in theirs_edits if e not in ours_edits]):
        return None
    out, cursor = [], 0
    for start, stop, tokens in edits:
        out += b[cursor:start] + tokens
        cursor = stop
    return "".join(out + b[cursor:])


OPENS, CLOSES = "([{", ")]}"


def apart(base: list[str], ours: list[tuple[int, int, list[str]]], theirs: list[tuple[int, int, list[str]]]) -> bool:
    """No edit of one side falls inside the base tokens that an edit of the other side opens a bracket
    before and closes it after (`n` made `int(n)` is two edits, `int(` and `)`, around `n )`: the
    release's `, stream` after `n` would go inside the new call)."""
    def spans(edits):
        out, depth, start = [], 0, None
        for i1, i2, tokens in edits:
            removed = base[i1:i2]
            depth += sum(t in OPENS for t in tokens) - sum(t in CLOSES for t in tokens) \
                - sum(t in OPENS for t in removed) + sum(t in CLOSES for t in removed)
            start = i1 if start is None else start
            if depth == 0:
                out.append((start, i2))
                start = None
        return out + ([(start, len(base))] if start is not None else [])

    for mine, other in ((spans(ours), theirs), (spans(theirs), ours)):
        if any(start < i2 and i1 < stop or start < i1 == i2 < stop for start, stop in mine for i1, i2, _ in other):
            return False
    return True


def repeats_changed(base: list[str], theirs: list[tuple[int, int, list[str]]], added: list[str]) -> bool:
    """The diff's added tokens repeat code the release changed: the base tokens an edit of the release
    replaces, with up to two tokens before and one after (`args[1]` made `args[0]` by the release, and the
    diff adds `... arg.args[1] in cache`: its index may mean another thing there). Spaces aside."""
    words = [token for token in added if token.strip()]
    for start, stop, _ in theirs:
        if start == stop:
            continue  # an insertion changes no code the diff may repeat
        before = [token for token in base[:start] if token.strip()][-2:]
        after = [token for token in base[stop:] if token.strip()][:1]
        run = before + [token for token in base[start:stop] if token.strip()] + after
        if any(words[n:n + len(run)] == run for n in range(len(words) - len(run) + 1)):
            return True
    return False


def edits_of(base: list[str], other: list[str]) -> list[tuple[int, int, list[str]]]:
    return [(i1, i2, other[j1:j2]) for tag, i1, i2, j1, j2 in
            SequenceMatcher(None, base, other, autojunk=False).get_opcodes() if tag != "equal"]
