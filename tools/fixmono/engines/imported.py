"""A fix folder made of a diff (`fixmono import`): its fix.patch declared as a
Fix, with what the catalogue's tests need made from the diff itself, so no
upstream file is copied and nothing is written by hand:

- a fixture per file: every hunk's pre-image lines, each made to stand alone
  as module code (wrapped in the blocks its indentation needs, the innermost
  one named as git's section header names it; brackets it closes or leaves
  open balanced; every name it reads bound at the top);
- an applied case (the hunks' post-image in the same frame: the engine's
  output must equal it, byte for byte) and an already-applied case;
- validate: every hunk of the diff is in the result, and none was before;
- the hot-fix (runtime/diff_hotfix.py): the changed functions swapped in.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from fixmono.engines.port import DEF, DiffTransform, diff_fix, header_name, scope_of
from fixmono.model.errors import FixDeclarationError, NotApplicable, TargetSyntaxError, TransformFailed, UserError
from fixmono.model.fix import Case, Fix, Fixture, HotFix, Rewrite, ValidationNote, lazy
from fixmono.model.patchfile import FileDiff, Hunk, PatchFile, read_patch
from fixmono.model.projects import PROJECTS, installed_module

PATCH = "fix.patch"
CLAUSE = re.compile(r"(elif\b|else\s*:|except\b|finally\s*:)")
OPENERS, CLOSERS = "([{", ")]}"
QUOTES = ('"""', "'''")
STRING_OPENERS = tuple(f"_ = {q}" for q in QUOTES)
OPENING = {")": "_fragment(", "]": "[", "}": "{"}  # a call's parenthesis holds keyword arguments too


def declare(fix_py: str, id: str, upstream: str, fixed_when: dict | None = None, **fields) -> Fix:
    """The Fix of the fix.patch beside `fix_py` (a fix folder's fix.py passes
    its __file__). `fields` are Fix fields written by hand (title, hotfix,
    reproduce, references ...): they replace what the diff gives.
    `fixed_when` {path: (def name, lines)}: where the diff does not fit a
    release, that def holding every one of those lines means the fix is there
    in another form (already-applied): what a reader of the release knows and
    a diff cannot."""
    folder = Path(fix_py).parent
    try:
        return diff_fix_of(read_patch(folder / PATCH), id, upstream, fixed_when or {}, **fields)
    except UserError as err:
        raise FixDeclarationError(f"{folder.name}/{PATCH}: {err}") from None


def check_fixed_when(fixed_when: dict, patch: PatchFile) -> None:
    """Each entry {path: (def name, lines)} names a Python file of the diff all of
    whose hunks are in that def (a form of the whole file's change), and lines."""
    files = {f.path: f for f in patch.files}
    for path, form in fixed_when.items():
        if path not in files:
            raise UserError(f"fixed_when names {path}, which the diff does not change")
        if not (isinstance(form, tuple) and len(form) == 2 and isinstance(form[0], str) and form[0]
                and isinstance(form[1], (tuple, list)) and form[1] and all(isinstance(x, str) for x in form[1])):
            raise UserError(f"fixed_when[{path!r}]: give (def name, (line, ...)) with at least one line")
        outside = [h.label for h in files[path].hunks if form[0] not in (scope_of(h) or [header_name(h)])]
        if outside:
            raise UserError(f"fixed_when[{path!r}]: hunks outside def {form[0]} ({', '.join(outside)}): a form of "
                            "one def cannot stand for them")


class OrFixedForm(DiffTransform):
    """A file's hunks, and a form of the fix they may be found in instead
    (declared by hand in fix.py): already-applied where the diff does not fit
    and the named def holds every line of that form."""

    def __init__(self, diff: DiffTransform, scope: str, lines: Sequence[str]):
        super().__init__(diff.path, diff.hunks, diff.old_blob)
        self.scope, self.lines = scope, tuple(lines)

    def rewrite(self, source: str) -> Rewrite:
        try:
            return super().rewrite(source)
        except (NotApplicable, TransformFailed) as err:
            if not self.holds_form(source):
                raise
            why = f"the fix in the form fix.py declares ({self.scope}: `{self.lines[0]}`); the diff: {err}"
            return Rewrite(source, 0, len(self.hunks), (), (why,))

    def holds_form(self, source: str) -> bool:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return False
        text = source.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == self.scope:
                body = {" ".join(line.split()) for line in text[node.lineno - 1:node.end_lineno]}
                if all(" ".join(line.split()) in body for line in self.lines):
                    return True
        return False


def diff_fix_of(patch: PatchFile, id: str, upstream: str, fixed_when: dict | None = None, **fields) -> Fix:
    fix = diff_fix(patch, upstream, id)
    check_fixed_when(fixed_when or {}, patch)
    fix = dataclasses.replace(fix, changes=tuple(
        dataclasses.replace(c, transform=OrFixedForm(c.transform, *fixed_when[c.path]))
        if c.path in (fixed_when or {}) else c for c in fix.changes))
    frames = {f.path: Frames(f) for f in patch.files}
    changes = tuple(dataclasses.replace(c, fixture=Fixture(source=frames[c.path].before)) for c in fix.changes)
    fix = dataclasses.replace(fix, changes=changes, cases=DiffCases(frames),
                              validate=lambda before, after: validate(fix, before, after))
    return dataclasses.replace(fix, **{"hotfix": runtime_form(fix), **fields})


def runtime_form(fix: Fix) -> HotFix | None:
    """The diff's hot-fix (fixmono.runtime.diff_hotfix, imported when it is turned
    on) where every file is a Python module changed in place."""
    if not all(isinstance(c.transform, DiffTransform) and c.transform.engine == "python" for c in fix.changes):
        return None
    return HotFix(apply=functools.partial(lazy("fixmono.runtime.diff_hotfix:enable"), fix),
                  remove=functools.partial(lazy("fixmono.runtime.diff_hotfix:disable"), fix),
                  trigger=installed_module(PROJECTS[fix.upstream], fix.changes[0].path))


def validate(fix: Fix, before: dict, after: dict) -> str | None:
    """Structural, not behavioural: each file's hunks are all in `after` (the
    diff finds its post-image there) and were not all in `before`."""
    for change in fix.changes:
        if change.path not in after:
            continue
        try:
            result = change.transform.rewrite(after[change.path])
        except (NotApplicable, TargetSyntaxError, TransformFailed) as err:
            return f"{change.path}: the diff cannot be read in the result: {err}"
        if result.changed:
            return f"{change.path}: not in the result: {', '.join(result.added)}"
        if before.get(change.path) == after[change.path]:
            return f"{change.path}: the result is the unchanged file"
    return ValidationNote(f"the diff's hunks are in the result ({sum(c.sites for c in fix.changes)} hunk(s); "
                          "a structural check: this fix declares no behavioural one)")


class DiffCases(Sequence):
    """The cases of a diff fix, made when a test first asks (declaring the fix stays cheap)."""

    def __init__(self, frames: dict[str, "Frames"]):
        self.frames = frames

    @cached_property
    def cases(self) -> list[Case]:
        cases = []
        for path, frame in self.frames.items():
            cases.append(Case(f"{path}: the diff's own pre-image", frame.before(), frame.after(), path=path))
            cases.append(Case(f"{path}: the diff's own post-image", frame.after(), expect="already-applied",
                              path=path))
        return cases

    def __getitem__(self, index):
        return self.cases[index]

    def __len__(self) -> int:
        return len(self.cases)


class Frames:
    """One file of a diff as a stand-alone text: before (its hunks' old lines)
    and after (their new lines), each hunk in the same frame on both sides."""

    def __init__(self, diff: FileDiff):
        self.diff = diff

    @cached_property
    def texts(self) -> tuple[str, str]:
        if not self.diff.path.endswith((".py", ".pyi")):  # no syntax to satisfy: the lines as they are
            return ("\n".join("".join(h.old) for h in self.diff.hunks),
                    "\n".join("".join(h.new) for h in self.diff.hunks))
        olds, news, lines = [], [], 0
        for hunk in self.diff.hunks:
            frame = stand_alone(hunk, named=header_name(hunk) != last_def(olds))
            if frame is None:
                raise FixDeclarationError(f"{self.diff.path}: {hunk.label}: no stand-alone fixture can be made of "
                                          "it (give this file a Fixture by hand)")
            (head, old, tail), (_, new, _) = frame
            pad = "\n" * max(hunk.start - 1 - lines - head.count("\n"), 1)  # the hunk at the line it names
            olds.append(pad + head + old + tail)
            news.append(pad + head + new + tail)
            lines += olds[-1].count("\n")
        names = bound_names("".join(news) + "\n" + "".join(olds))  # at the end: the hunks keep their lines
        return "".join(olds) + names, "".join(news) + names

    def before(self) -> str:
        return self.texts[0]

    def after(self) -> str:
        return self.texts[1]


def last_def(texts: list[str]) -> str | None:
    """The name of the last def/class line of the frames so far: where a hunk's
    header names it, the hunk continues that function (no wrapper of that name)."""
    names = [m[2] for text in texts for m in [DEF.match(line) for line in text.splitlines()] if m]
    return names[-1] if names else None


def stand_alone(hunk: Hunk, named: bool = True) -> tuple[tuple[str, str, str], tuple[str, str, str]] | None:
    """The hunk's old and new lines framed so that both parse as module code
    and the engine finds the hunk's scope: (head, old, tail), (head, new,
    tail); None when no frame does."""
    old, new = "".join(hunk.old), "".join(hunk.new)
    code_before = False
    for in_string in (False, True):  # inside a docstring only where its old lines are not code
        for lines in (hunk.old, hunk.new):
            for head, tail in frames(lines, hunk, named):
                if bool(head and head[-1].lstrip().startswith(STRING_OPENERS)) != in_string:
                    continue
                head, tail = "".join(head), "".join(tail)
                if parses(head + old + tail):
                    code_before = code_before or not in_string
                    if parses(head + new + tail):
                        return (head, old, tail), (head, new, tail)
        if code_before:
            return None  # its old lines are code, its new ones are not (a string would hide anything)
    return None


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def frames(lines: list[str], hunk: Hunk, named: bool = True):
    """Candidate (head, tail) line lists around `lines`, most likely first:
    for each string the fragment may start inside (none, a docstring), each
    statement its unopened brackets may belong to, and each way to end it."""
    eol = next((line[len(line.rstrip("\r\n")):] for line in lines if line.endswith("\n")), "\n")
    for quote in (None, *QUOTES):
        closed, left_open, depths, closing, end_quote = brackets(lines, quote)
        statements = [(indent(line), line.strip()) for line, depth in zip(lines, depths)
                      if depth == 0 and line.strip() and not line.strip().startswith("#")]
        starts = [indent(line) for line, depth in zip(lines, depths) if depth == 0 and line.strip()][:1]
        if quote:  # the fragment starts inside a string: open it first
            closed, opener_indents = "", [*starts, ""]
        elif closed:
            opener_indents = [indent(lines[closing]), *starts, ""]
        else:
            opener_indents = [""]
        for name in (header_name(hunk) if named else None, None):
            for where in dict.fromkeys(opener_indents):
                for opener in openers(closed, quote, lines[closing].rstrip().endswith(":"), name):
                    head = [f"{where}{opener}{eol}"] if opener else []
                    wrap = wrappers([(where, opener)] * bool(opener) + statements, name, hunk.header, eol)
                    for tail in tails(left_open, end_quote, statements, eol):
                        yield wrap + head, tail


def openers(closed: str, quote: str | None, header: bool, name: str | None) -> list[str]:
    """Lines that open what the fragment closes: a string, or brackets (of a
    block header where the closing line ends with ':', a def named as git's
    section header names one)."""
    if quote:
        return [f"_ = {quote}"]
    if not closed:
        return [""]
    brackets = "".join(OPENING[c] for c in reversed(closed))
    bare = brackets.replace("_fragment(", "(True")  # `(True` before `and x`, `_fragment(` before `x=1`
    if header:
        return [f"def {name or '_fragment'}{brackets.removeprefix('_fragment')}", f"if {brackets}", f"if {bare}"]
    return [f"_ = {brackets}", f"_ = {bare}"]


def tails(left_open: str, end_quote: str | None, statements: list, eol: str):
    """What may end the fragment: its string and open brackets closed, and a
    body for a block header (or a function for a decorator) left last."""
    closers = f"{end_quote or ''}{''.join(CLOSERS[OPENERS.index(c)] for c in reversed(left_open))}"
    close = [f"{closers}{eol}"] if closers else []
    last = statements[-1][0] if statements else ""
    yield close
    yield close + [f"{last}    pass{eol}"] + ([f"{last}finally:{eol}", f"{last}    pass{eol}"]
                                             if statements and statements[-1][1] == "try:" else [])
    yield close + [f"{last}def _fragment():{eol}", f"{last}    pass{eol}"]
    if left_open:  # a def or if whose brackets are still open: its colon and body
        yield [f"{closers}:{eol}", f"{last}    pass{eol}"]


def wrappers(statements: list[tuple[str, str]], name: str | None, header: str, eol: str) -> list[str]:
    """Block headers for every indentation the fragment's statements go out to,
    below its first one. The innermost one no else/except follows is git's
    section header where the diff names one (so the engine sees the scope it
    expects); at module level that def/class stands above the fragment."""
    if not statements:
        return []
    first = statements[0][0]
    levels = sorted({i for i, _ in statements if len(i) < len(first)} | {""}, key=len)
    levels = [level for level in levels if level != first]
    kinds = []
    for level in levels:
        following = [text for i, text in statements if i == level]
        kinds.append(block_for(following[0]) if following else "if True:")
    out = []
    if name:
        kind = "class" if re.match(r"\s*class\b", header) else "def"
        named = f"{kind} {name}{'(*args, **kwargs)' if kind == 'def' else ''}:"
        free = [n for n, level in enumerate(levels)
                if not any(i == level and CLAUSE.match(text) for i, text in statements)]
        if free:
            kinds[free[-1]] = named
        elif not DEF.match(f"{first}{statements[0][1]}"):
            out += [f"{first}{named}{eol}", f"{first}    pass{eol}"]
    out += [f"{level}{kind}{eol}" for level, kind in zip(levels, kinds)]
    if CLAUSE.match(statements[0][1]):  # it starts with else:/except ...: give that its block
        out += [f"{first}{block_for(statements[0][1])}{eol}", f"{first}    pass{eol}"]
    return out


def block_for(clause: str) -> str:
    """A block header that `clause` (the first statement seen at its level) may follow."""
    return "try:" if re.match(r"(except\b|finally\s*:)", clause) else "if True:"


def indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def brackets(lines: list[str], quote: str | None = None) -> tuple[str, str, list[int], int, str | None]:
    """The closers the lines have no opener for (in order), the openers left
    open at the end, each line's bracket depth at its start (counting the
    brackets opened before the fragment that it closes; 1 inside a string),
    the line holding the last closer without an opener, and the triple quote
    left open at the end. Strings and comments are skipped; `quote`: the
    fragment starts inside that string."""
    stack: list[str] = []
    closed, raw, closing = "", [], 0
    depth = 0
    for row, line in enumerate(lines):
        raw.append(depth if not quote else None)
        i = 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(quote, i):
                    i += len(quote)
                    quote = None
                    continue
            elif c == "#":
                break
            elif c in "'\"":
                quote = c * 3 if line.startswith(c * 3, i) else c
                i += len(quote)
                continue
            elif c in OPENERS:
                stack.append(c)
                depth += 1
            elif c in CLOSERS:
                if stack:
                    stack.pop()
                else:
                    closed, closing = closed + c, row
                depth -= 1
            i += 1
        if quote and len(quote) == 1 and not line.rstrip("\r\n").endswith("\\"):  # a one-quote string ends here
            quote = None
    depths = [d + len(closed) if d is not None else 1 for d in raw]
    return closed, "".join(stack), depths, closing, quote


def bound_names(text: str) -> str:
    """Module lines binding every name `text` reads (the arguments, locals and
    globals the hunks' lines had in the upstream file), so that the engine's
    name check passes on the fragment alone."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    free = sorted(read - set(dir(builtins)))
    if not free:
        return ""
    return "\n\n# names the diff's lines read, bound here so that its hunks stand alone\n" + \
        "".join(f"{name} = None\n" for name in free)
