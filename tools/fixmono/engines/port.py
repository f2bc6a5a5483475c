"""The port engine: a unified diff's hunks applied by syntax, never guessed.

Each hunk of one file is a DiffTransform site. In the target it is found:
1. exactly (its context and removed lines, byte for byte, as `git apply`
   finds them): where that is unique, or at the line the hunk names, the
   result is what `git apply` writes;
2. else as normalised lines (indentation, runs of spaces, trailing comments
   and blank lines ignored), re-indenting the added lines to the target;
3. else with up to MAX_TRIM context lines dropped at either end (never a
   removed line), only where the hunk's scope confirms the place.
The scope of a hunk is what the diff itself says of it: the def/class lines
in its context above the first change (they enclose it) and git's section
header (`@@ ... @@ def name(`). A candidate place must lie inside those
scopes in the target (Python: its class/def chain, from `ast`). Two places
left, or none with the removed lines there, is `failed` naming the hunk and
the line; a scope or code that is not in the file is `not-applicable`.

The presence check is the diff itself: a hunk whose post-image is there and
whose pre-image is not is already applied. The result must parse, and every
name the added lines read must be bound somewhere in the module (an import
of something this release lacks, a helper that does not exist here): else
`failed` with that name.
"""
from __future__ import annotations

import ast
import bisect
import builtins
import dataclasses
import difflib
import functools
import keyword
import re
from collections import Counter
from pathlib import Path

from fixmono.engines import structure, structure_cpp, three_way, trees
from fixmono.engines.structure import without_trailing_commas
from fixmono.engines.remembered import diff_code, remembered
from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed
from fixmono.model.errors import UserError
from fixmono.model.fix import Dep3, FileChange, Fix, Rewrite
from fixmono.model.limits import target_over_cap
from fixmono.model.outcome import FileOutcome, Status
from fixmono.model.patchfile import FileDiff, Hunk, PatchFile, ending, git_blob_id, lines_of, resolve_strip
from fixmono.model.projects import PROJECTS, any_project

MAX_TRIM = 3  # context lines `patch --fuzz=3` may ignore at each end; here only with the scope confirmed
DEF = re.compile(r"^(\s*)(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
IMPORT = re.compile(r"^(?:import\s+[\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*"
                    r"|from\s+[\w.]+\s+import\s+[\w\s,*]+?)\s*(?:#.*)?$")


def scope_of(hunk: Hunk) -> list[str]:
    """The def/class names the diff shows above its first change that enclose it, outermost first."""
    first = next((i for i, (k, _) in enumerate(hunk.lines) if k != " "), 0)
    indent = min((len(t) - len(t.lstrip()) for k, t in hunk.lines[first:] if k != " " and t.strip()), default=0)
    chain = []
    for kind, text in reversed(hunk.lines[:first]):
        match = DEF.match(text)
        if match and len(match[1]) < indent:
            chain.insert(0, match[2])
            indent = len(match[1])
    return chain


def cpp_scope_of(hunk: Hunk) -> list[str]:
    """The C/C++ function (or class) whose header line the diff shows above its
    first change, at the left margin as git's default header takes them, with
    no closing brace at the margin between: it encloses the change."""
    first = next((i for i, (k, _) in enumerate(hunk.lines) if k != " "), 0)
    for at in range(first - 1, -1, -1):
        text = hunk.lines[at][1]
        if text.startswith("}"):
            return []
        if re.match(r"[A-Za-z_$]", text) and (name := cpp_name(text)):
            return [] if declares_only(hunk.lines[at:]) else name
    return []


def declares_only(rows) -> bool:
    """The statement the first row begins ends in `;` before any `{` (as the file was): a declaration (a
    prototype over lines), which encloses nothing."""
    for kind, text in rows:
        code = re.sub(r"/\*.*?\*/|//.*", "", text) if kind != "+" else ""
        ends = [at for at in (code.find(";"), code.find("{")) if at >= 0]
        if ends:
            return code[min(ends)] == ";"
    return False


def header_name(hunk: Hunk) -> str | None:
    """The def/class git's section header names (the nearest one above the hunk, which may not enclose it)."""
    match = DEF.match(hunk.header)
    return match[2] if match else None


def norm(line: str, comment: str = "#") -> str:
    """A line as tokens: spaces collapsed, a comment dropped (a trailing one only where no string could hold it)."""
    text = line.strip()
    if text.startswith(comment):
        return ""
    if comment in text and "'" not in text and '"' not in text:
        text = text.split(comment, 1)[0].rstrip()
    return " ".join(text.split())


def norm_cpp(line: str) -> str:
    """A C/C++ line as tokens (`#` lines are preprocessor code, kept); a namespace's closing brace keeps its
    comment, which names it (`}  // namespace cpu` is not the brace of `namespace cuda`)."""
    text = line.strip()
    if NAMESPACE_END.match(text):
        return " ".join(text.split())
    return norm(line, comment="//")


NAMESPACE_END = re.compile(r"\}\s*//\s*(end of\s+)?namespace\b")


def indent_of(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


class Scopes:
    """The class/def chain of every line of a Python source."""

    def __init__(self, source: str, tree: ast.AST | None = None):
        """`tree`: the source's, where it is parsed already (the tree is not kept: it is the most memory)."""
        try:
            tree = trees.parse(source) if tree is None else tree
        except (SyntaxError, ValueError) as err:
            where = f" at line {err.lineno}" if getattr(err, "lineno", None) else ""
            raise TargetSyntaxError(f"Python syntax error{where}: {getattr(err, 'msg', err)}") from None
        defs = [n for n in statements(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        self.spans = [(n.lineno, n.end_lineno, n.name) for n in defs]
        self.names = {name for _, _, name in self.spans}
        self.functions = [(n.lineno, n.end_lineno, n.name) for n in defs if not isinstance(n, ast.ClassDef)]
        self.chains = Chains(self.spans)

    norm = staticmethod(norm)

    def has(self, names: list[str]) -> bool:
        return names[-1] in self.names

    def chain(self, line: int) -> list[str]:
        """Names of the defs/classes enclosing 1-based `line` (its own def line included), outermost first."""
        return self.chains.at(line)

    def innermost_def(self, line: int) -> str | None:
        return innermost(self.functions, line)

    @staticmethod
    def header_above(lines: list[str], at: int, name: list[str]) -> bool:
        return header_above(lines, at, name[-1])


def innermost(functions: list[tuple[int, int, str]], line: int) -> str | None:
    """The name of the innermost of `functions` (start, end, name) holding 1-based `line`."""
    holding = [(start, name) for start, end, name in functions if start <= line <= end]
    return max(holding)[1] if holding else None


def statements(tree: ast.AST):
    """Every statement of `tree` (and its except and case clauses): where a def or
    class can be, without walking the expressions as ast.walk does."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo.extend(getattr(node, field, ()))


CPP_SCOPE = re.compile(r"\b(?:class|struct|union|namespace)\s+([A-Za-z_]\w*)")
CPP_CALLABLE = re.compile(r"([A-Za-z_~][\w~]*)\s*\(")
CPP_NOT_NAMES = {"if", "for", "while", "switch", "return", "sizeof", "catch", "decltype", "static_assert",
                 "__launch_bounds__", "__attribute__", "__declspec", "alignas"}  # (attributes: not the name)


def cpp_name(line: str) -> list[str]:
    """The function, class or namespace a C/C++ header line names, with its
    qualifiers (`absl::Status Foo<T>::Bar(int x) {` -> [Foo, Bar]); [] for none."""
    line = re.sub(r"/\*.*?\*/|//.*", "", line)  # not a name in a comment (`}  // namespace xla`)
    if match := CPP_SCOPE.search(line):
        return [match[1]]
    match = next((m for m in CPP_CALLABLE.finditer(line) if m[1] not in CPP_NOT_NAMES), None)
    if match is None:
        return []
    if macro := macro_block(line[match.start(1):]):
        return [macro]
    qualified = re.sub(r"<[^<>]*>", "", line[:match.end(1)]).split()[-1]  # Foo<T>::Bar -> Foo::Bar
    return [part for part in qualified.split("::") if re.fullmatch(r"[A-Za-z_~][\w~]*", part)]


MACRO_BLOCK = re.compile(r"([A-Z][A-Z0-9_]*)\s*\(([^()]*)\)")


def macro_block(text: str) -> str | None:
    """A block a macro opens (`TEST(GemmTest, Half)`, `TORCH_LIBRARY_IMPL(te, CUDA, m)`) is named by the macro
    and its arguments (`TEST(GemmTest,Half)`): by the macro alone, every test of a file had one name."""
    match = MACRO_BLOCK.match(text.strip())
    return f"{match[1]}({','.join(arg.strip() for arg in match[2].split(','))})" if match else None


def wrapped_macro(header: str) -> str | None:
    """git's section header where a formatter wrapped a block macro's arguments (`TEST(GemmTest,` over
    `     Half) {`): the start of the name macro_block gives each such block (`TEST(GemmTest,`)."""
    match = re.fullmatch(r"\s*([A-Z][A-Z0-9_]*)\s*\(([^()]*)", header.rstrip())
    return f"{match[1]}({','.join(arg.strip() for arg in match[2].split(','))}" if match else None


CONTROL = re.compile(r"\s*(?:\}\s*)?(?:(?:async\s+)?(?:with|for)|if|elif|else|while|try|except|finally|match|case|"
                     r"switch|do|catch|default)\b")  # the first line of a block inside a function


class CppScopes:
    """The function/class/namespace chain of every line of a C/C++ source
    (tree-sitter, after masking macros; engines/cpp.py). An out-of-line
    definition `Foo::Bar` counts as inside Foo too."""

    norm = staticmethod(norm_cpp)

    def __init__(self, source: str):
        from fixmono.engines.cpp import CppDocument

        doc = CppDocument(source)
        doc.check_parses()
        self.spans, self.functions = [], []
        for node in doc.nodes("function_definition", "class_specifier", "struct_specifier", "union_specifier",
                              "namespace_definition"):
            start, end = node.start_point[0] + 1, node.end_point[0] + 1
            if node.type == "function_definition":
                declarator = node.child_by_field_name("declarator")
                macro = macro_block(doc.text(declarator)) if declarator is not None else None
                names = [macro] if macro else re.findall(r"[A-Za-z_~][\w~]*", doc.qualified_name(node).split("(")[0])
                self.spans += [(start, end, n, name) for n, name in enumerate(names)]
                self.functions += [(start, end, names[-1])] if names else []
            elif node.type in ("class_specifier", "struct_specifier", "union_specifier", "namespace_definition") \
                    and node.child_by_field_name("body") is not None and node.child_by_field_name("name") is not None:
                self.spans.append((start, end, 0, doc.text(node.child_by_field_name("name"))))
        self.names = {name for *_, name in self.spans}
        self.errors = len(doc.errors())
        self.chains = Chains(self.spans)
        self.starts: dict[str, list[int]] = {}  # name -> the first lines of its spans
        for start, _, _, name in self.spans:
            self.starts.setdefault(name, []).append(start)

    def chain(self, line: int) -> list[str]:
        return self.chains.at(line)

    def innermost_def(self, line: int) -> str | None:
        return innermost(self.functions, line)

    def has(self, names: list[str]) -> bool:
        """A function or class of that qualified name is here (Worker::Run, not just some Run)."""
        return any(fits(self.chain(start), names) for start in self.starts.get(names[-1], ()))

    @staticmethod
    def header_above(lines: list[str], at: int, name: list[str]) -> bool:
        """git's default section header for a block at `at` (the nearest line above
        that starts with a letter, `_` or `$`) names `name` (qualifiers included)."""
        line = next((line for line in lines_above(lines, at) if re.match(r"[A-Za-z_$]", line)), None)
        return line is not None and cpp_name(line)[-len(name):] == name


def cpp_read(source: str) -> tuple[CppScopes | None, int]:
    """A C/C++ file's scopes and its parse errors; no scopes where tree-sitter cannot read it whole (a long
    stretch of macros or #if branches): its hunks are then placed by their text alone, as `git apply` does."""
    try:
        found = scopes_of(CppScopes, source)
    except TargetSyntaxError:
        from fixmono.engines.cpp import CppDocument

        return None, len(CppDocument(source).errors())
    return found, found.errors


LAST_READ: dict = {}  # (kind, text) -> its scopes: a result is read again by the presence check


def scopes_of(kind: type, text: str, tree: ast.AST | None = None):
    """kind(text) (Scopes, CppScopes), kept for the next call on the same text (one text at a time)."""
    key = (kind, text)
    found = LAST_READ.get(key)
    if found is None:  # (read, not cleared and refilled, by a thread beside this one: never a KeyError)
        found = kind(text) if tree is None else kind(text, tree)
        LAST_READ.clear()
        LAST_READ[key] = found
    return found


def lines_above(lines: list[str], at: int):
    """The lines above index `at`, nearest first: reversed(lines[:at]) without copying them."""
    return (lines[i] for i in reversed(range(len(lines))[:at]))


class Chains:
    """The names of the spans (start, end, ..., name: 1-based lines) enclosing
    each line, outermost first, as sorted(spans) lists them: worked out once
    for each run of lines between two span ends, then found by bisection."""

    def __init__(self, spans: list[tuple]):
        spans = sorted(spans)
        bounds = sorted({s[0] for s in spans} | {s[1] + 1 for s in spans})
        starting, ending = {}, {}
        for n, span in enumerate(spans):
            starting.setdefault(span[0], []).append(n)
            ending.setdefault(span[1] + 1, []).append(n)
        self.bounds, self.names, active = bounds, [], set()
        for bound in bounds:
            active.difference_update(ending.get(bound, ()))
            active.update(n for n in starting.get(bound, ()) if spans[n][1] >= bound)
            self.names.append(tuple(spans[n][-1] for n in sorted(active)))

    def at(self, line: int) -> list[str]:
        where = bisect.bisect_right(self.bounds, line) - 1
        return list(self.names[where]) if where >= 0 else []


def alike_after(hunks: tuple[Hunk, ...]) -> list[int]:
    """Per hunk, how many hunks from it on make its same edit (the same old and new lines)."""
    seen, out = {}, []
    for hunk in reversed(hunks):
        key = (tuple(hunk.old), tuple(hunk.new))
        seen[key] = seen.get(key, 0) + 1
        out.append(seen[key])
    return out[::-1]


class Lines(list):
    """A file's lines as the hunks rewrite them (only ever `lines[start:stop] =
    new`), knowing where each text stands: exact() looks up the block's rarest
    line instead of scanning the file. Positions are kept as of the last
    rebuild, with the spans rewritten since in order (as a diff's hunks come:
    each at or after the lines the one before wrote) kept apart; a rewrite above
    an earlier one rebuilds (once per such hunk, one pass over the file)."""

    def __init__(self, lines: list[str]):
        super().__init__(lines)
        self.rebuild()

    def rebuild(self) -> None:
        self.at: dict[str, list[int]] = {}  # text -> its indexes at the rebuild
        for i, text in enumerate(self):
            self.at.setdefault(text, []).append(i)
        self.starts: list[int] = []  # the rewritten spans since, as indexes at the rebuild, in order
        self.stops: list[int] = []
        self.shifts: list[int] = []  # lines added (or removed, < 0) up to and including each span
        self.written: dict[str, list[int]] = {}  # text -> current indexes of the lines those spans wrote
        self.end = 0  # the end of the last span written: the next one must start here or below

    def __setitem__(self, key, value) -> None:
        span = key.indices(len(self)) if isinstance(key, slice) else None
        new = list(value) if span else [value]
        super().__setitem__(key, new if span else value)
        if span is None or span[2] != 1 or span[0] < self.end:
            self.rebuild()
            return
        start, stop = span[0], max(span[1], span[0])
        shift = self.shifts[-1] if self.shifts else 0
        self.starts.append(start - shift)
        self.stops.append(stop - shift)
        self.shifts.append(shift + len(new) - (stop - start))
        for n, text in enumerate(new):
            self.written.setdefault(text, []).append(start + n)
        self.end = start + len(new)

    def __delitem__(self, key) -> None:
        self[key if isinstance(key, slice) else slice(key, key + 1)] = []

    def positions(self, text: str) -> list[int]:
        """The current indexes of the lines that are `text`, in order."""
        out = []
        for i in self.at.get(text, ()):
            span = bisect.bisect_right(self.starts, i) - 1  # the last span rewritten at or above it
            if span < 0:
                out.append(i)
            elif i >= self.stops[span]:  # below it: moved by the lines the spans added
                out.append(i + self.shifts[span])
        return sorted(out + self.written.get(text, []))

    def find(self, block: list[str]) -> list[int]:
        """Every index where `block` starts, in order."""
        rarest = min(range(len(block)), key=lambda n: len(self.at.get(block[n], ())) +
                     len(self.written.get(block[n], ())))
        size = len(block)
        return [p for p in (i - rarest for i in self.positions(block[rarest]))
                if p >= 0 and self[p:p + size] == block]


def fits(chain: list[str], wanted: list[str]) -> bool:
    """The names of `wanted` enclose the place too, in the same order (others may lie between)."""
    names = iter(chain)
    return all(name in names for name in wanted)


CPP = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hh", ".hpp", ".cuh", ".inc")


class DiffTransform:
    """The hunks of one file of a diff, as a Transform. `engine` is the kind of
    file it edits (patch-env and patch-wheel take a Python one like a libcst
    transform). Python and C/C++ files have their scopes read (ast,
    tree-sitter); in other files only the exact step runs (as `git apply`,
    with the presence check)."""

    judges_its_result = True  # check_edit: apply/contract.py ports it no second time

    def __init__(self, path: str, hunks: tuple[Hunk, ...], old_blob: str | None = None):
        # in the order of the lines they edit (a hand-edited diff may list them otherwise; GNU patch takes them so)
        self.path, self.hunks, self.old_blob = path, tuple(sorted(hunks, key=lambda h: h.first)), old_blob
        self.engine = "python" if path.endswith((".py", ".pyi")) else "cpp" if path.endswith(CPP) else "text"
        self.description = f"the diff's {len(hunks)} hunk(s) to {path}"

    def rewrite(self, source: str, pre_image: str | None = None, found_in: str = "") -> Rewrite:
        """The hunks ported onto `source`, or what they gave on the same text before (remembered.py).
        `pre_image`: the file the diff was made on, where it is at hand (three_way.py, structure.py);
        `found_in`: where (the checkout's objects, --history's, --base), for the evidence."""
        if problem := target_over_cap(source):
            raise TransformFailed(f"{problem}; refusing to port the diff onto it")
        seen = blob_id(pre_image) if pre_image is not None else None
        return remembered(diff_code(self.path, (self.hunks, self.old_blob, seen, found_in)), source,
                          lambda text: self._rewrite(text, pre_image, found_in))

    def _rewrite(self, source: str, pre_image: str | None = None, found_in: str = "") -> Rewrite:
        for before, after in zip(self.hunks, self.hunks[1:]):
            if before.first + len(before.old) > after.first:
                raise TransformFailed(f"{before.label} and {after.label} edit the same lines of the file the diff "
                                      "was made on; refusing the diff")
        aligned: dict[str, str] = {}  # the evidence the port's alignment gave, not worked out twice
        try:
            with trees.gc_paused():
                return self._port(source, pre_image, found_in, aligned)
        except (TransformFailed, NotApplicable) as err:  # say why the pre-image did not place it either
            if pre_image is None or "pre-image (" in str(err):  # evidence given already
                raise
            evidence = aligned.get("evidence") or self.through_pre_image(source, pre_image, False, found_in)[1]
            raise type(err)(f"{err} ({evidence})") from None

    def _port(self, source: str, pre_image: str | None, found_in: str = "", aligned: dict | None = None) -> Rewrite:
        python = self.engine == "python"
        scopes = errors = None
        if python:
            scopes = Mapped(scopes_of(Scopes, source), source, renames(self.hunks))  # the target must parse
            scopes.removed = removed_defs(self.hunks)
        elif self.engine == "cpp":
            found, errors = cpp_read(source)  # errors as written (macros, #if): not to grow
            scopes = Mapped(found, source) if found else None
        lines = Lines(lines_of(source))
        changed, present, absent = [], [], []
        offset = drift = 0  # lines added before the next hunk; how far from its named line the last one sat
        # line numbers decide between places only where the file is the diff's own pre-image (its blob id),
        # where the hunk before was placed by its text alone (the next one is as far from it as in the diff),
        # or between places of the scope the diff names, at exactly the line it names (place())
        is_pre_image = self.old_blob is not None and blob_id(source).startswith(self.old_blob)
        planned, evidence = self.through_pre_image(source, pre_image, is_pre_image, found_in)
        if aligned is not None and not is_pre_image:
            aligned["evidence"] = evidence
        if planned == three_way.PRESENT:  # each change stands where the pre-image has its lines, as the diff makes it
            return Rewrite(source, 0, len(self.hunks), (), tuple(h.label for h in self.hunks), evidence)
        by_text = False  # the hunk before was placed by its text alone (no line number chose)
        alike = alike_after(self.hunks)
        pre = lines_of(pre_image) if pre_image is not None else None
        for n, hunk in enumerate(self.hunks):
            expected = hunk.start - 1 + offset + drift  # as git apply looks first: shifted as the hunk before
            anchored = is_pre_image or n > 0 and (pre is not None or by_text) and self.follows(n, lines, expected,
                                                                                               pre)
            by_line: list[int] = []  # filled where the line number chose among several places
            if planned and planned[n] is not None:  # where the alignment put it, in the lines as hunks before left them
                start, stop, replacement, new_rows, hunk = planned[n]  # checked below as the lines it edits here
                result = (start + offset, stop + offset, replacement, new_rows)
            else:
                result = place(hunk, lines, expected, scopes, alike[n], by_line if not anchored else None,
                               drift == 0)
            by_text = not by_line
            if result == "present":
                present.append(hunk.label)
                spots = exact(hunk.new, lines)
                if moved := removed_elsewhere(hunk, lines, scopes, spots, pre_image, python):
                    raise TransformFailed(f"{hunk.label}: the lines it removes are gone from between its context "
                                          f"lines, but {moved} stands in the same scope (moved there?); cannot tell "
                                          "whether it is applied")
                if len(spots) == 1:  # where its post-image sits: the drift too
                    drift = spots[0] - (hunk.new_start - 1 + offset)
            elif result == "absent":
                absent.append(hunk.label)
            else:
                start, stop, replacement, new_rows = result
                if pre is not None and not is_pre_image and not (planned and planned[n] is not None) and scopes and \
                        (other := self.another_block(hunk, start, pre, lines_of(source), scopes)):
                    raise TransformFailed(f"{hunk.label}: its text fits here, but {other}; refusing to put it there "
                                          "(by the diff's pre-image)")
                if pre is not None and not is_pre_image and self.engine == "cpp" and \
                        (other := another_directive(self.hunks[n], pre, lines, start, replacement)):
                    raise TransformFailed(f"{hunk.label}: {other}; refusing to put it there (by the diff's pre-image)")
                later = next((p for p in (planned or ())[n + 1:] if p is not None), None)
                if later is not None and stop > later[0] + offset:  # (placed by its text, below a later hunk)
                    raise TransformFailed(f"{hunk.label}: its text fits below the place of a later hunk; refusing "
                                          "to take the hunks out of order")
                drift = start - (hunk.start - 1 + offset)
                if scopes:
                    scopes.replaced(start, stop, lines[start:stop], replacement, new_rows)
                lines[start:stop] = replacement
                offset += len(replacement) - (stop - start)
                changed.append(hunk)
        if absent and (changed or present):
            raise TransformFailed(f"{', '.join(absent)}: its code is not in this file while the other hunks are "
                                  "(refusing half a diff)")
        if absent:
            raise NotApplicable(f"the code the diff changes ({absent[0]})")
        new = "".join(lines)
        check_edit(source, new, changed)
        if changed and python:
            try:
                tree = trees.parse(new)
            except SyntaxError as err:
                raise TransformFailed(f"the result does not parse (line {err.lineno}: {err.msg})") from None
            check_result(lambda: trees.parse(source), tree, new, scopes.added(), scopes.shown(), self.path,
                         bound_by([text for hunk in changed for kind, text in hunk.lines if kind == "-"]))
            scopes_of(Scopes, new, tree)  # the presence check reads the result next
        if changed and self.engine == "cpp" and (after := cpp_read(new)[1]) > errors:
            raise TransformFailed(f"the result would add parse errors ({errors} -> {after}); refusing it")
        return Rewrite(new, len(changed), len(present), tuple(h.label for h in changed), tuple(present),
                       evidence if changed else "")

    def follows(self, n: int, lines: list[str], expected: int, pre: list[str] | None) -> bool:
        """Hunk `n`'s named line, shifted as the hunk before, is where it goes (the line may decide between
        places): the hunk before stands whole as many lines above `expected` as in the diff, and (with the
        pre-image) the lines between are the pre-image's. Not where the release moved a method of the same
        text in between, or the hunk before was placed by its trimmed context."""
        before, start = self.hunks[n - 1], self.hunks[n].start - 1
        gap = start - (before.start - 1 + len(before.old))
        at = expected - gap - len(before.new)
        return at >= 0 and lines[at:at + len(before.new)] == list(before.new) and (
            pre is None or lines[expected - gap:expected] == pre[start - gap:start])

    def another_block(self, hunk: Hunk, start: int, pre: list[str], target: list[str], scopes) -> str | None:
        """Where the hunks' text placed `hunk` (at current line `start`): a line of it (shown or changed)
        whose block inside a function (its header, the nearest line above it indented less: `elif kind ==
        "silu":`, `with autocast(dtype=bf16):`) is another block than in the diff's pre-image (`if kind ==
        "relu":`, `with autocast():`), which the release still has: why. The hunk's text fit only by the
        lines of a block of one body the release added beside the edited one (the next clause, the line after
        it)."""
        olds = [n for n, (kind, _) in enumerate(hunk.lines) if kind != "+"]
        rows = [(n, k) for k, n in enumerate(olds)] + [(i, before) for i, _, before in hunk.runs()]
        known = None
        for row, before in rows:
            width = three_way.indentation(hunk.lines[row][1])
            original = scopes.original_line(start + before + 1)
            if not scopes.norm(hunk.lines[row][1]) or not width or original is None or \
                    scopes.written(start + before, 1) or before >= len(hunk.old) or \
                    target[original - 1].strip() != hunk.old[before].strip():
                continue  # (a comment, a line its trimmed context dropped, or an earlier hunk's: not where the diff
                # has it)
            mine = structure.less_indented(pre, hunk.first + before, width)
            shift = three_way.indentation(target[original - 1]) - three_way.indentation(hunk.old[before])
            theirs = structure.less_indented(target, original - 1, width + shift)  # (the release re-indented it)
            if mine is None or theirs is None or not CONTROL.match(pre[mine]) or not CONTROL.match(target[theirs]):
                continue  # (a def's lines: the scopes judge them; a method the release moved has new neighbours)
            ours, here = scopes.norm(pre[mine]), scopes.norm(target[theirs])
            known = {scopes.norm(line) for line in target} if known is None else known
            if ours != here and ours in known:
                return f"its lines are in the block `{here}` here, in `{ours}` in the diff's pre-image"
        return None

    def through_pre_image(self, source: str, pre_image: str | None, is_pre_image: bool, found_in: str = ""):
        """(the hunks' places found by aligning the diff's pre-image to `source`, or None; what placed them)."""
        blob = f"blob {self.old_blob}" if self.old_blob else "no blob named: every hunk stands in it at its line"
        if is_pre_image:  # every hunk at its own lines, as git apply puts it: no scope to confirm
            planned = None
            if three_way.verified(lines_of(source), self.hunks):
                planned = [(h.first, h.first + len(h.old), h.new, added_rows(h), h) for h in self.hunks]
            return planned, f"the file is the diff's pre-image ({blob})"
        if pre_image is None:
            return None, ""
        pre = lines_of(pre_image)
        blob += f", {found_in}" if found_in else ""
        if not three_way.verified(pre, self.hunks):
            return None, f"by its hunks: the pre-image ({blob}) does not hold them"
        syntax = {"python": structure.PYTHON, "cpp": structure_cpp.CPP}.get(self.engine)
        target = lines_of(source)
        planned = three_way.placements(pre, target, self.hunks, syntax and structure.Headers(pre, target, syntax),
                                       by_text=only_imports)
        if planned == three_way.PRESENT:
            return planned, f"its changes stand here where its pre-image ({blob}) has their lines"
        conflict = planned if isinstance(planned, three_way.Conflict) else None
        if conflict or planned is None and syntax:
            planned = structure.placements(pre, target, self.hunks, syntax)
            if isinstance(planned, three_way.Conflict):
                conflict = planned
            elif planned is not None:
                return planned, f"placed by the syntax of the diff's pre-image ({blob})"
        if conflict:  # the hunks' text alone would put it there: what the pre-image shows is no guess
            raise TransformFailed(f"{conflict}; refusing to put it there (by the diff's pre-image ({blob}))")
        if planned is None:
            return None, f"by its hunks: the lines a change edits, their neighbours or the header of their block " \
                         f"differ here from its pre-image ({blob})"
        imports = "; its one-line imports by their text" if None in planned else ""
        return planned, f"placed through the diff's pre-image ({blob}){imports}"


def only_imports(hunk: Hunk) -> bool:
    """Every line the hunk adds or removes is an unindented one-line import."""
    changed = [t for k, t in hunk.lines if k != " " and t.strip()]
    return bool(changed) and all(IMPORT.match(t) and not indent_of(t) and "(" not in t for t in changed)


def check_edit(source: str, new: str, hunks: list[Hunk]) -> None:
    """The result is the source with exactly the lines the changed `hunks` remove
    gone and the lines they add there (as sets of lines with their counts,
    indentation and blank lines aside; a line one hunk removes and another adds
    is moved): the diff's own post-image, judged on the result, whatever a
    second port of the diff would find in it."""
    def count(lines) -> Counter:
        return Counter(stripped for line in lines if (stripped := line.strip()))

    old_lines, new_lines = lines_of(source), lines_of(new)
    head = 0  # the lines both share at the start and the end count the same on both sides: left out
    while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while tail < min(len(old_lines), len(new_lines)) - head and old_lines[-1 - tail] == new_lines[-1 - tail]:
        tail += 1
    before = count(old_lines[head:len(old_lines) - tail])
    after = count(new_lines[head:len(new_lines) - tail])
    net = Counter()
    for hunk in hunks:
        net.update(count(t for k, t in hunk.lines if k == "+"))
        net.subtract(count(t for k, t in hunk.lines if k == "-"))
    wrong = next((line for line in before | after | +net | -net if after[line] - before[line] != net[line]), None)
    if wrong is None:
        return
    hunk = next((h for h in hunks if any(k != " " and t.strip() == wrong for k, t in h.lines)), None)
    if hunk is None:
        raise TransformFailed(f"the result changes `{wrong}`, which no hunk of the diff changes; refusing it")
    side = "removes" if net[wrong] < 0 else "adds"
    state = "still in the result" if net[wrong] < 0 else "not in the result"
    if net[wrong] == 0:
        side, state = "moves", "not where the diff puts it"
    raise TransformFailed(f"{hunk.label}: a line it {side}, `{wrong}`, is {state}; refusing it")


def blob_id(text: str) -> str:
    """git's blob id of `text` (as `git hash-object` gives it, SHA-1)."""
    return git_blob_id(text.encode("utf-8", "surrogatepass"))


def removed_defs(hunks: tuple[Hunk, ...]) -> set[str]:
    """The def/class names whose lines the diff removes and does not add again."""
    def names(kind: str) -> set[str]:
        return {m[2] for hunk in hunks for k, t in hunk.lines if k == kind and (m := DEF.match(t))}
    return names("-") - names("+")


def renames(hunks: tuple[Hunk, ...]) -> dict[str, str]:
    """The defs and classes the diff renames: a removed and an added def/class line
    at the same indentation in one hunk, with other names."""
    found = {}
    for hunk in hunks:
        removed = [m for k, t in hunk.lines if k == "-" and (m := DEF.match(t))]
        added = [m for k, t in hunk.lines if k == "+" and (m := DEF.match(t))]
        for old, new in zip(removed, added):
            if old[1] == new[1] and old[2] != new[2]:
                found[old[2]] = new[2]
    return found


class Mapped:
    """The scopes of the text as it was, read through a map from the lines as
    they are now (earlier hunks applied) back to the original lines: one parse
    per file, a half-rewritten text need not parse, and a name an earlier hunk
    renamed is still found by the name git's header gives."""

    def __init__(self, scopes, source: str, renamed: dict[str, str] | None = None):
        self.scopes, self.norm, self.names = scopes, scopes.norm, scopes.names
        self.renamed = renamed or {}  # def/class names the diff itself renames: old -> new
        self.removed: set[str] = set()  # def/class names the diff itself removes
        self.original = lines_of(source)
        self.origin: list[int | None] = list(range(len(self.original)))  # None: written by an earlier hunk
        self.hunks = [False] * len(self.origin)  # lines a hunk's block covers (the diff shows them)

    def has(self, names: list[str]) -> bool:
        return self.scopes.has(names)

    def def_of(self, at: int) -> tuple:
        """The def current line index `at` is in: its chain and its first line as it was (overloads apart)."""
        original = self.original_line(at + 1)
        if original is None:
            return ()
        holding = [start for start, end, _ in self.scopes.functions if start <= original <= end]
        return tuple(self.scopes.chain(original)), self.norm(self.original[max(holding) - 1]) if holding else ""

    def as_here(self, names: list[str]) -> list[str]:
        """`names` as this file has them: a scope the diff renames is found by its new name in its own post-image."""
        if not names or self.scopes.has(names) or names[-1] not in self.renamed:
            return names
        return [*names[:-1], self.renamed[names[-1]]]

    def header_above(self, lines: list[str], at: int, name: list[str]) -> bool:
        """git's header would name `name` for a block at current line index `at`:
        in the text as it is, or as it was before the diff's earlier hunks (git
        took it from the pre-image: a def they renamed or removed is still named)."""
        if self.scopes.header_above(lines, at, name):
            return True
        was = self.as_it_was(at)
        return was is not None and self.scopes.header_above(self.original, was, name)

    def as_it_was(self, at: int) -> int | None:
        """The index in the original text of the block starting at current line index `at`."""
        i = min(at, len(self.origin) - 1)
        while i >= 0 and self.origin[i] is None:
            i -= 1
        return self.origin[i] + (at > i) if i >= 0 else None

    def statement_above(self, lines: list[str], at: int, header: str) -> bool:
        """git's default section header for a block at `at` (the nearest line
        above it that starts with a letter, `_` or `$`; "" for none) would
        begin with `header`: in the text as it is, or as it was before the diff."""
        def above(text: list[str], at: int) -> str:
            return next((t.rstrip("\r\n") for t in lines_above(text, at) if re.match(r"[A-Za-z_$]", t)), "")

        def same(found: str) -> bool:
            return found.startswith(header.rstrip()) if header.strip() else not found

        if same(above(lines, at)):
            return True
        was = self.as_it_was(at)
        return was is not None and same(above(self.original, was))

    def chain(self, line: int) -> list[str]:
        """The chain of 1-based current `line`: its original line's, or (a written
        line) that of the nearest original line above it."""
        original = self.original_line(line)
        return self.scopes.chain(original) if original else []

    def innermost_def(self, line: int) -> str | None:
        """The innermost function holding 1-based current `line`, as `chain` finds it."""
        original = self.original_line(line)
        return self.scopes.innermost_def(original) if original else None

    def original_line(self, line: int) -> int | None:
        """The 1-based original line of current `line`, or of the nearest original line above a written one."""
        i = min(line - 1, len(self.origin) - 1)
        while i >= 0 and self.origin[i] is None:
            i -= 1
        return self.origin[i] + 1 if i >= 0 else None

    def written(self, start: int, count: int) -> bool:
        """Whether any of `count` current lines from `start` was written by an earlier hunk."""
        return any(o is None for o in self.origin[start:start + count])

    def replaced(self, start: int, stop: int, old: list[str], new: list[str], added_rows: list[int]) -> None:
        added, origin = set(added_rows), [None] * len(new)
        for a, b, size in difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks():
            for k in range(size):  # a kept line keeps its origin; an added one has none
                if b + k not in added:
                    origin[b + k] = self.origin[start + a + k]
        self.origin[start:stop] = origin
        self.hunks[start:stop] = [True] * len(new)

    def added(self) -> list[int]:
        return [i for i, o in enumerate(self.origin) if o is None]

    def shown(self) -> list[int]:
        return [i for i, covered in enumerate(self.hunks) if covered]


def kind_of(path: str) -> str:
    return "python" if path.endswith((".py", ".pyi")) else "cpp" if path.endswith(CPP) else "text"


class WholeFile:
    """A file the diff adds (`text`: its content) or deletes (`text`: the
    content it removes): placed by the file's presence, never merged. `place`
    gives the file's outcomes from the tree (`read(path)`: bytes, None when absent)."""

    def __init__(self, path: str, kind: str, text: str):
        self.path, self.kind, self.text = path, kind, text
        self.engine = kind_of(path)
        self.description = f"the diff {'adds' if kind == 'added' else 'deletes'} {path}"

    def place(self, read) -> list[FileOutcome]:
        data = read(self.path)
        here = None if data is None else data.decode("utf-8", "replace")
        if self.kind == "added":
            if here is None:
                return [FileOutcome(self.path, Status.APPLIED, f"{self.path}: added", self.text)]
            if here == self.text:
                return [FileOutcome(self.path, Status.ALREADY_APPLIED, f"{self.path}: already there as the diff adds it")]
            return [FileOutcome(self.path, Status.FAILED, f"{self.path}: the diff adds it, but a file of that name is "
                                                          "here with other text; refusing to overwrite it")]
        if here is None:
            return [FileOutcome(self.path, Status.ALREADY_APPLIED, f"{self.path}: already gone")]
        if here == self.text:
            return [FileOutcome(self.path, Status.APPLIED, f"{self.path}: deleted", None)]
        return [FileOutcome(self.path, Status.FAILED, f"{self.path}: the diff deletes it, but its text here is not "
                                                      "the text the diff removes; refusing to delete it")]

    def rewrite(self, source: str) -> Rewrite:  # the presence check on one text (patch-wheel's verify)
        (outcome,) = self.place(lambda path: source.encode())
        if outcome.status is Status.FAILED:
            raise TransformFailed(outcome.detail.split(": ", 1)[1])
        return Rewrite(source, 0, 1) if outcome.status is Status.ALREADY_APPLIED else Rewrite(source, 1, 0)


class Renamed:
    """A file the diff renames (`old` -> `path`), with its hunks ported onto the
    old file's text: both names judged together, never one without the other."""

    def __init__(self, old: str, path: str, hunks: tuple[Hunk, ...]):
        self.old, self.path, self.hunks = old, path, hunks
        self.engine = kind_of(path)
        self.description = f"the diff renames {old} to {path}"
        self.edit = DiffTransform(path, hunks) if hunks else None

    def place(self, read) -> list[FileOutcome]:
        old, new = read(self.old), read(self.path)
        if old is not None and new is not None:
            return [FileOutcome(self.path, Status.FAILED, f"{self.path}: the diff renames {self.old} to it, but both "
                                                          "names are here; refusing to overwrite it")]
        if old is None and new is None:
            return [FileOutcome(self.path, Status.NOT_APPLICABLE, f"{self.old}: not in this upstream", absent=True)]
        text = (old if new is None else new).decode("utf-8", "replace")
        try:
            result = self.edit.rewrite(text) if self.edit else Rewrite(text, 0, 0)
        except NotApplicable as err:
            return [FileOutcome(self.path, Status.NOT_APPLICABLE, f"{self.path}: {err}")]
        except (TargetSyntaxError, TransformFailed) as err:
            return [FileOutcome(self.path, Status.FAILED, f"{self.path}: {err}")]
        if new is not None:  # renamed already: its hunks must be there too
            if result.changed:
                return [FileOutcome(self.path, Status.FAILED, f"{self.path}: renamed here, but without the diff's "
                                                              f"changes ({', '.join(result.added)})")]
            return [FileOutcome(self.path, Status.ALREADY_APPLIED, f"{self.path}: already renamed from {self.old}")]
        return [FileOutcome(self.path, Status.APPLIED, f"{self.old} renamed to {self.path}", result.source),
                FileOutcome(self.old, Status.APPLIED, f"{self.old}: renamed away", None)]


def place(hunk: Hunk, lines: list[str], expected: int, scopes: "Mapped | None", alike: int = 1,
          by_line: list[int] | None = None, level: bool = False):
    """Where `hunk` goes in `lines` (`scopes`: the file's, None outside Python
    and C/C++): (start, stop, replacement lines, rows of added lines in the
    replacement), "present", or "absent"; TransformFailed when unsure.
    `alike`: how many hunks from this one on make this same edit. `by_line`:
    None where the line number may decide between places (the file is the
    pre-image, or the hunk before was placed by its text); else a list that
    gets the place where only the line number would tell (not taken: failed).
    `level`: the file above holds as many lines as the diff's (the line it
    names is the line here): between places of a scope the diff names, which
    the text cannot tell apart, that line decides, as `git apply` has it."""
    if scopes is None:
        return place_exactly(hunk, lines, expected, by_line)
    python = isinstance(scopes.scopes, Scopes)
    wanted = scopes.as_here(scope_of(hunk) if python else cpp_scope_of(hunk))
    header = scopes.as_here(([header_name(hunk)] if header_name(hunk) else []) if python
                            else cpp_name(hunk.header) if not wanted or CPP_SCOPE.search(hunk.header) else [])
    # (C/C++: a namespace or class git's header names holds the function the context shows: `cpu::Run`)
    if header and not wanted and not scopes.has(header) and (header[-1] in scopes.removed or
                                                             hunk.header.strip() in {x.strip() for x in lines}):
        header = []  # a def the diff itself removes (the text may be applied), or a line not a def here (a string)
        # (never a line the header only begins: `static void Foo(int a);` is the prototype of a Foo defined
        # elsewhere now, whose hunk must not go where its lines stand in another function)
    if (wanted and not scopes.has(wanted)) or (header and not scopes.has(header) and not wanted):
        missing = wanted[-1] if wanted else "::".join(header)
        if not any(scopes.norm(t) and scopes.norm(t) in {scopes.norm(x) for x in lines}
                   for k, t in hunk.lines if k == "-"):
            return "absent"
        raise TransformFailed(f"{hunk.label}: its scope `{missing}` is not in this file, but lines it removes are")

    if python and any((m := DEF.match(t)) and not m[1] for k, t in hunk.lines if k == " "):
        header = []  # the hunk shows its own top-level def/class: git's header names what lies above it
    decorators = python and decorates_unshown(hunk)
    if decorators:
        header = []  # git's header names the def above; the decorators' block is the def below them
        first = next(i for i, (kind, _) in enumerate(hunk.lines) if kind != " ")
        stacks = exact([text for kind, text in hunk.lines[first:] if kind != "+"], lines)
        if len(stacks) > 1:
            raise TransformFailed(f"{hunk.label}: the decorators it changes stand over {len(stacks)} defs here "
                                  f"(lines {', '.join(str(p + 1) for p in stacks[:5])}), and it does not show which "
                                  "def it decorates; refusing to guess")
    opened = not python and wrapped_macro(hunk.header)
    if opened and sum(name.startswith(opened) for name in scopes.scopes.names) > 1:
        level = False  # git's header is the first line of a macro's wrapped arguments: several blocks begin so
    unanchored = by_line is not None  # (not the pre-image itself, nor placed from the hunk before)
    if by_line is not None and level and (wanted or header or hunk.header.strip()) and not decorators:
        by_line = None  # the line it names, under the header it names, with as many lines above as the diff had

    # a hunk under a module-level statement (no def/class in its context above the change, git's header a
    # statement such as `REQUIRED = [` or `if _AVAILABLE:`, the nearest unindented line above it; a diff
    # without headers: every changed line unindented): where context was dropped, a place is confirmed only
    # under that same statement (git's header there the same line), and an unindented change only where the
    # target's line is unindented too
    first = next((i for i, (k, _) in enumerate(hunk.lines) if k != " "), 0)
    changed = [t for k, t in hunk.lines if k != " " and t.strip()]
    flat = all(not indent_of(t) for t in changed)
    imports = flat and all(IMPORT.match(t) for t in changed)  # one-line imports only: their place is the imports
    top_level = (python and not wanted and not header_name(hunk) and (hunk.header.strip() or flat)
                 and not any(DEF.match(t) for _, t in hunk.lines[:first]))
    # inside the statement git's header names: no unindented line of its own shown above its change
    under_header = top_level and not flat and not any(t.strip() and not indent_of(t) for _, t in hunk.lines[:first])

    unshown: list[str] = []  # defs a place with context dropped lay in that the diff does not name
    named = scopes.as_here([header_name(hunk)] if python and header_name(hunk) else cpp_name(hunk.header))

    def confirmed(start: int, probe: int, trimmed: bool = False) -> bool:
        """The place whose block starts at line index `start` and whose first
        change is at `probe` (`trimmed`: found with context dropped: then the
        def it lies in must be one the diff names, not only its class)."""
        if top_level and trimmed:  # (git's header over an import is the import above it: it differs by release)
            return (not flat or not indent_of(lines[min(probe, len(lines) - 1)])) and \
                (imports or scopes.statement_above(lines, start, hunk.header))
        if under_header and hunk.header.strip() and not scopes.statement_above(lines, start, hunk.header):
            return False  # inside another module-level statement (`_CONFIG_BASE = {` where git's header has LARGE)
        chain = scopes.chain(probe + 1)
        if not (fits(chain, wanted) and (not header or fits(chain, header) and header[-1] in chain
                                         or scopes.header_above(lines, start, header))):
            return False
        if trimmed and (inside := scopes.innermost_def(probe + 1)) and inside not in wanted + header + named:
            unshown.append(inside)
            return False
        return True

    old, new = hunk.old, hunk.new
    found_old = [p for p in exact(old, lines) if confirmed(p, p + probe_row(hunk, "-"))]
    found_new = [p for p in exact(new, lines) if confirmed(p, p + probe_row(hunk, "+"))
                 and not scopes.written(p, len(new)) and at_its_edge(hunk, p, len(new), len(lines))]
    # (an earlier hunk's own lines are not this one applied)
    if hunk.lines and hunk.lines[-1][0] == "+" and len(lines) - len(new) in found_new and old:
        return "present"  # lines the diff adds at the end of the file (no context after them) end this file
    if by_line is not None and not (wanted or header) and len(found_old) == 1 and not found_new and \
            len(alike_places := normalised_places(hunk, lines, scopes, confirmed)) > 1:
        raise TransformFailed(f"{hunk.label}: its lines fit {len(alike_places)} places once blank and comment lines "
                              f"are set aside (lines {', '.join(str(p + 1) for p in alike_places[:5])}), and only "
                              "those tell them apart; refusing to guess")
    if unanchored and under_header and len(found_old) + len(found_new) == 1 and \
            len(twins := block_twins(hunk, lines, scopes)) > 1:
        raise TransformFailed(f"{hunk.label}: the block it edits in `{hunk.header.strip()}` is one of {len(twins)} of "
                              f"its text here (lines {', '.join(str(p + 1) for p in twins[:5])}); only the lines of "
                              "a neighbouring block that it shows tell them apart (the release may have reordered "
                              "them); refusing to guess")
    if not python and hunk.header.strip():  # git's header the first line of one of several overloads its text fits
        found_old, found_new = by_signature(found_old, found_new, hunk, scopes)
    at = choose(hunk, found_old, found_new, expected, "its lines", (len(old), len(new)),
                expected + hunk.new_start - hunk.start, alike, by_line)
    if at is not None:
        return at if at == "present" else (at, at + len(old), new, added_rows(hunk))

    def in_scope(line: int) -> bool:
        chain = scopes.chain(line + 1)
        return fits(chain, wanted) and (not header or header[-1] in chain)

    unconfirmed = [p for p in exact(old, lines) if p not in found_old and not scopes.chain(p + 1)] \
        if old and not python else []  # (no scope read there: a C/C++ branch the preprocessor masks)
    return place_normalised(hunk, lines, scopes, confirmed, top_level, unshown, in_scope, unconfirmed)


DIRECTIVE = re.compile(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b")


def branch_of(lines: list[str], at: int) -> tuple[frozenset, str] | None:
    """The preprocessor branch line index `at` is in: (the conditions of its conditional's branches above
    it, the `#if` included; its own condition, or "#else"), each written as a condition (`#ifdef X`:
    `defined(X)`, `#elif X`: `X`, spaces collapsed); None outside every conditional."""
    depth, own, seen = 0, None, set()
    for n in range(min(at, len(lines)) - 1, -1, -1):
        if not (match := DIRECTIVE.match(lines[n])):
            continue
        word, rest = match[1], " ".join(lines[n][match.end():].split())
        if word == "endif":
            depth += 1
            continue
        if depth:
            depth -= word in ("if", "ifdef", "ifndef")
            continue
        condition = "#else" if word == "else" else f"defined({rest})" if word == "ifdef" else \
            f"!defined({rest})" if word == "ifndef" else rest
        own = condition if own is None else own
        seen.add(condition)
        if word in ("if", "ifdef", "ifndef"):
            return frozenset(seen - {"#else"}), own
    return None


def another_directive(hunk: Hunk, pre: list[str], lines: list[str], start: int, replacement: list[str]) -> str | None:
    """C/C++, with the diff's pre-image: the first line a placed hunk changes is under another preprocessor
    condition here than in the pre-image (the release swapped `#if`/`#elif` conditions of one body, or made
    `#ifdef USE_ROCM` `#ifndef`; an `#else` whose conditional lost a condition): why. Bodies of one text
    under several conditions are told apart by the conditions alone, which the alignment of lines pairs by
    their place. A condition the release put below a new one (`#if X` made `#elif X`) is the same; code
    under no condition on one side (main put a conditional around it) has no twin to be confused with."""
    first = next((i for i, (kind, _) in enumerate(hunk.lines) if kind != " "), None)
    if first is None:
        return None
    at = hunk.first + sum(kind != "+" for kind, _ in hunk.lines[:first])
    spot = start + next((k for k in range(len(replacement))
                         if start + k >= len(lines) or replacement[k] != lines[start + k]), len(replacement))
    mine, theirs = branch_of(pre, at), branch_of(lines, spot)
    if mine is None or theirs is None or mine[1] == theirs[1] and (mine[1] != "#else" or mine[0] <= theirs[0]):
        return None

    def said(branch: tuple[frozenset, str]) -> str:
        return f"#else of {' / '.join(sorted(branch[0]))}" if branch[1] == "#else" else branch[1]

    return f"its lines are under `{said(theirs)}` here, `{said(mine)}` in the diff's pre-image"


def by_signature(found_old: list[int], found_new: list[int], hunk: Hunk, scopes) -> tuple[list[int], list[int]]:
    """Of the places of the hunk's old and new lines, in several C/C++ functions between them, those in the
    function whose first line is git's header for the hunk (`T Sum(const T* x, T* out, int n) {`, not the
    `int64_t n` overload of one body beside it, fixed or not), where that tells; else both as they are."""
    defs = {(side, p): scopes.def_of(p + probe_row(hunk, side)) for side, found in (("-", found_old), ("+", found_new))
            for p in found}
    if len(set(defs.values())) < 2:
        return found_old, found_new
    named = {key for key, where in defs.items() if where and where[1] == scopes.norm(hunk.header)}
    if not named:
        return found_old, found_new
    return [p for p in found_old if ("-", p) in named], [p for p in found_new if ("+", p) in named]


def block_twins(hunk: Hunk, lines: list[str], scopes) -> list[int]:
    """Where the hunk's own block stands in `lines` under the statement git's header names: its rows
    around its change indented as deep as the change or deeper, with the line above that opens the block
    and the one below that closes it where the hunk shows them (`"large": {` ... `},`), not the lines of
    the blocks beside it (`"xl": {`), whose order the release may have changed."""
    rows = hunk.lines
    changed = [i for i, (kind, text) in enumerate(rows) if kind != " " and text.strip()]
    if not changed or not (width := min(len(indent_of(rows[i][1])) for i in changed)):
        return []
    inside = lambda i: not rows[i][1].strip() or len(indent_of(rows[i][1])) >= width  # noqa: E731
    first, stop = changed[0], changed[-1] + 1
    while first > 0 and inside(first - 1):
        first -= 1
    while stop < len(rows) and inside(stop):
        stop += 1
    own = [text for kind, text in rows[max(first - 1, 0):stop + 1] if kind != "+"]
    return [p for p in exact(own, lines) if scopes.statement_above(lines, p, hunk.header)] if own else []


def decorates_unshown(hunk: Hunk) -> bool:
    """The hunk changes a decorator whose def it does not show (`@pytest.mark.parametrize` four deep): the
    def below, which its text cannot tell from another def of the same decorators, is what it edits."""
    first = next((i for i, (kind, _) in enumerate(hunk.lines) if kind != " "), len(hunk.lines))
    shown = [text for _, text in hunk.lines[:first + 1]]  # its lines down to the first change
    return first < len(hunk.lines) and three_way.decorator_head(shown, first) is not None and \
        not any(DEF.match(text) for kind, text in hunk.lines[first:] if kind != "-")


def normalised_places(hunk: Hunk, lines: list[str], scopes, confirmed) -> list[int]:
    """The line indexes where the hunk's old lines stand once blank lines and
    comments are set aside (each place confirmed by its scope): a place found
    exactly is the only one only if no other place differs from it in those alone."""
    norm = scopes.norm
    olds = [(i, k, norm(t)) for i, (k, t) in enumerate(hunk.lines) if k != "+" and norm(t)]
    if not olds:
        return []
    targets = [(i, norm(t)) for i, t in enumerate(lines) if norm(t)]
    return [targets[p][0] for p in seq(olds, targets, hunk, lines) if confirmed(targets[p][0], probe(olds, targets, p))]


def probe_row(hunk: Hunk, side: str) -> int:
    """Index, in the hunk's old (side '-') or new ('+') lines, of the line its
    scope is judged at: the first changed line, or the context line just above it."""
    rows = [k for k, _ in hunk.lines if k in (" ", side)]
    first = next((i for i, k in enumerate(rows) if k == side), None)
    if first is None:  # this side has no changed line: the context line above the change
        first = next((i for i, (k, _) in enumerate(hunk.lines) if k != " "), 0)
        return max(first - 1, 0)
    return first


def place_exactly(hunk: Hunk, lines: list[str], expected: int, by_line: list[int] | None = None):
    """A file without scopes: the exact step alone; anything else is failed, never guessed."""
    old, new = hunk.old, hunk.new
    at = choose(hunk, exact(old, lines), exact(new, lines), expected, "its lines", (len(old), len(new)),
                by_line=by_line)
    if at is not None:
        return at if at == "present" else (at, at + len(old), new, added_rows(hunk))
    if not any(t.strip() and t in lines for k, t in hunk.lines if k == "-") and any(k == "-" for k, _ in hunk.lines):
        return "absent"
    raise TransformFailed(f"{hunk.label}: its lines are not in the file as they are in the diff (only the exact "
                          "step runs outside Python files); refusing to guess")


def choose(hunk: Hunk, found_old: list[int], found_new: list[int], expected: int | None, what: str,
           sizes: tuple[int, int] | None = None, expected_new: int | None = None, alike: int = 1,
           by_line: list[int] | None = None):
    """From the places of the hunk's old and new lines: "present", the one place
    to apply at (the line the hunk names where it is one of them; the first of
    as many places as there are hunks left making this same edit), or None
    when neither is there; TransformFailed when it cannot tell. `by_line`: not
    None where the line number is no evidence (the file is not the diff's
    pre-image): then it decides nothing between several places, and gets the
    place it would have taken."""
    pure_addition = not any(k == "-" for k, _ in hunk.lines)
    if by_line is not None and (len(found_old) > 1 or len(found_new) > 1):
        if expected in found_old:
            by_line.append(expected)
        expected = expected_new = None  # its named line sits in a file of other text: it tells nothing
    if expected is not None and expected in found_old:
        return expected  # its lines exactly at the line it names: where git apply puts it, whatever else is here
    if expected_new is not None and expected_new in found_new and pure_addition:
        return "present"  # its post-image exactly at the line it names there
    if sizes:  # new lines found inside a place of the old ones (lines removed at one end): not applied yet
        found_new = [q for q in found_new if not any(p <= q and q + sizes[1] <= p + sizes[0] for p in found_old)]
    if expected_new is not None and expected_new in found_new and not pure_addition:
        return "present"  # its post-image exactly at the line it names there, its old lines not: applied
    inside = [p for p in found_old if any(q <= p and p + sizes[0] <= q + sizes[1] for q in found_new)] if sizes else []
    # its old lines inside its new ones: applied there, unless an added line reads like its neighbours; the
    # old lines also standing somewhere without the addition: which of the two places is meant? (a sibling
    # def made the same fix: `forward_cached` has the lines the diff adds to `forward`)
    if pure_addition and found_new and (inside and like_its_neighbours(hunk) or len(inside) < len(found_old)):
        if like_its_neighbours(hunk):
            raise TransformFailed(f"{hunk.label}: the lines it adds are like the lines around them, so the file looks "
                                  "the same with and without it, and the line it names has moved: cannot tell "
                                  "whether it is applied")
        raise TransformFailed(f"{hunk.label}: its lines stand in the file both with and without the ones it adds, "
                              "and the line it names has moved: cannot tell whether it is applied")
    if found_new and (not found_old or pure_addition):  # context alone stays in the file once lines are added
        return "present"
    if found_new and expected not in found_old and len(found_old) != 1:
        raise TransformFailed(f"{hunk.label}: both its old and its new lines are in the file; cannot tell whether "
                              "it is applied")  # old lines at the named line, or at one place: git apply's place
    if found_old:
        if expected in found_old:
            return expected
        return found_old[0] if len(found_old) == alike > 1 and not found_new else one(found_old, hunk, what, by_line)
    return None


def at_its_edge(hunk: Hunk, start: int, size: int, total: int) -> bool:
    """A place of the post-image of a hunk that only removes lines, with context on one side only (the lines
    it removes end or begin the file): there only at that end of the file. Its context alone, elsewhere,
    is no sign that the lines are gone (the file's last def changed, not removed)."""
    kinds = [k for k, _ in hunk.lines]
    if "+" in kinds or "-" not in kinds or (kinds[0] == " ") == (kinds[-1] == " "):
        return True
    return start + size == total if kinds[0] == " " else start == 0


def like_its_neighbours(hunk: Hunk) -> bool:
    """An added line reads as the line above or below it (`None,` added to a
    run of `None,`): the file shows the hunk's old lines inside its new ones
    whether it is applied or not."""
    lines = [(k, " ".join(t.split())) for k, t in hunk.lines]
    return any(k == "+" and any(lines[j][1] == text for j in (i - 1, i + 1) if 0 <= j < len(lines))
               for i, (k, text) in enumerate(lines))


def added_rows(hunk: Hunk) -> list[int]:
    """Indexes, in the hunk's new lines, of the added ones."""
    return [i for i, kind in enumerate(k for k, _ in hunk.lines if k != "-") if kind == "+"]


def header_above(lines: list[str], at: int, name: str) -> bool:
    """git's section header for a block at `at` would be `name`: the nearest
    def/class line above it (git's python driver), or the nearest one at the
    top level (git's default, which takes unindented lines only)."""
    nearest = top = None
    for line in lines_above(lines, at):
        match = DEF.match(line)
        if match and nearest is None:
            nearest = match[2]
        if match and not match[1]:
            top = match[2]
            break
    return name in (nearest, top)


def one(places: list[int], hunk: Hunk, what: str, by_line: list[int] | None = None) -> int:
    if len(places) > 1:
        why = " (only its line number would tell, and this file is not the diff's pre-image)" if by_line else ""
        raise TransformFailed(f"{hunk.label}: {what} fit {len(places)} places (lines "
                              f"{', '.join(str(p + 1) for p in places[:5])}){why}; refusing to guess")
    return places[0]


def exact(block: list[str], lines: list[str]) -> list[int]:
    """Where `block` stands in `lines`, in order (Lines: looked up, not scanned)."""
    if not block:
        return []
    if isinstance(lines, Lines):
        return lines.find(block)
    return [i for i in range(len(lines) - len(block) + 1) if lines[i:i + len(block)] == block]


def place_normalised(hunk: Hunk, lines: list[str], scopes, confirmed, top_level: bool = False,
                     unshown: list[str] = (), in_scope=lambda line: True, unconfirmed: list[int] = ()):
    """Steps 2 and 3: normalised lines, then trimmed context with the scope
    confirmed (the hunk's def/class, git's header, or the module's top level).
    `unshown`: filled by `confirmed` with the defs it refused a trimmed place in;
    `in_scope(line index)`: the line lies in the scope the diff names; `unconfirmed`: where its old lines
    stand exactly but their scope was not read (a C/C++ `#else` branch): no trimmed place elsewhere."""
    norm = scopes.norm
    rows = [(i, k, norm(t)) for i, (k, t) in enumerate(hunk.lines) if norm(t)]
    targets = [(i, norm(t)) for i, t in enumerate(lines) if norm(t)]
    removed = [i for i, k, _ in rows if k == "-"]
    if not any(k != "+" for _, k, _ in rows):
        raise TransformFailed(f"{hunk.label}: no context to place its added lines by")
    olds = [(i, k, t) for i, k, t in rows if k != "+"]
    news = [(i, k, t) for i, k, t in rows if k != "-"]
    stream = Tokens(lines, norm)
    in_its_scope = {t for i, t in targets if in_scope(i)}
    # the context line heading the changed lines' block is not dropped where the block's name alone does not
    # tell it (a C/C++ function: its overloads; a property's setter, a typing.overload): without it a change
    # of a setter fits the getter, one of an overload another overload
    heading = telling_header_row(hunk, norm is norm_cpp)

    def headed(at: int, core: list) -> bool:
        """The place of `core` from line index `at` lies under the header the hunk shows (where it must)."""
        if heading is None or any(i == heading for i, _, _ in core):
            return True
        word = re.findall(r"[A-Za-z_]\w*", hunk.lines[heading][1])[:1]
        if word and word[0] in BRANCHES:  # the line as far above the place as the hunk has it, less indented
            first = next(i for i, _, _ in core)
            indentation = three_way.indentation
            width = indentation(lines[at]) - indentation(hunk.lines[first][1]) + \
                indentation(hunk.lines[heading][1])
            above = next((n for n in range(at - 1, -1, -1) if lines[n].strip() and
                          not lines[n].lstrip().startswith(("#", "//")) and indentation(lines[n]) <= width), None)
            return above is not None and norm(lines[above]) == norm(hunk.lines[heading][1])
        label = word in ([w] for w in LABELS)
        above = nearest_header(lines, at, norm is norm_cpp, label)
        if above is None:
            return False
        if norm is norm_cpp and not label:  # the same function, maybe given more parameters (not other types)
            return same_function(hunk.lines[heading][1], lines[above])
        return norm(lines[above]) == norm(hunk.lines[heading][1])

    def attempt(lead: int, tail: int):
        """(the place found in `targets` or "present" or None, core_old, core_new, kept rows) with `lead`
        and `tail` context lines dropped; None where that trim is not tried."""
        trim = lead + tail
        core_old = trimmed(olds, lead, tail)
        if core_old is None or (trim and not (top_level or scope_of(hunk) or header_name(hunk) or
                                              scopes.norm is norm_cpp and (cpp_scope_of(hunk)
                                                                           or cpp_name(hunk.header)))):
            return None
        if trim and not any(k == "-" for _, k, _ in core_old) and len(core_old) < 2:
            return None
        kept = {i for i, _, _ in core_old}
        if trim and any(DIRECTIVE.match(hunk.lines[i][1]) for i, _, _ in olds if i not in kept):
            return None  # a preprocessor condition it shows (`#ifdef USE_ROCM`) tells bodies of one text apart
        if not reaches_the_change(hunk, core_old, norm):
            return None
        keep = {i for i, _, _ in core_old}
        if trim and not anchored_in_its_block(hunk, keep, norm, in_its_scope):
            return None
        core_new = [r for r in news if r[1] == "+" or r[0] in keep]
        at_old = [p for p in seq(core_old, targets, hunk, lines) if confirmed(
            targets[p][0], probe(core_old, targets, p), trim > 0) and headed(targets[p][0], core_old)]
        at_new = [p for p in seq(core_new, targets, hunk, lines) if confirmed(
            targets[p][0], probe(core_new, targets, p), trim > 0) and headed(targets[p][0], core_new)
                  and at_its_edge(hunk, p, len(core_new), len(targets))
                  and not any(scopes.written(t, 1) for t, _ in targets[p:p + len(core_new)])
                  ] if joins_the_removal(hunk, keep, norm) else []
        p = choose(hunk, at_old, at_new, None, "its lines (as tokens)", (len(core_old), len(core_new)))
        return p, core_old, core_new, keep

    for trim in range(0, 2 * MAX_TRIM + 1):  # fewest context lines dropped first, at most MAX_TRIM at each end
        tried = [found for lead in range(max(trim - MAX_TRIM, 0), min(trim, MAX_TRIM) + 1)
                 if (found := attempt(lead, trim - lead)) is not None]
        for p, core_old, core_new, keep in tried:
            if p == "present":
                return p
            if p is None and joins_the_removal(hunk, keep, norm) and reflowed(
                    hunk, core_old, core_new, lines, stream,
                    lambda a, b, cut, core=core_new: confirmed(a, b, cut) and headed(a, core), trim > 0):
                return "present"  # its post-image here as the same tokens over other lines (wrapped, joined)
            if p is not None:
                matched = targets[p:p + len(core_old)]
                apart = [q for q, old, _, _ in tried if isinstance(q, int) and not overlapping(
                    matched, targets[q:q + len(old)])]
                if trim and unconfirmed and not any(u <= matched[-1][0] and matched[0][0] < u + len(hunk.old)
                                                    for u in unconfirmed):
                    raise TransformFailed(f"{hunk.label}: its lines stand whole at line {unconfirmed[0] + 1}, where "
                                          "their scope cannot be read (a preprocessor branch?), and trimmed at line "
                                          f"{matched[0][0] + 1}; refusing to guess")
                if apart:  # its lines above fit one place, those below another: which, the text cannot tell
                    q = apart[0]
                    raise TransformFailed(f"{hunk.label}: its context trimmed at one end fits line "
                                          f"{matched[0][0] + 1}, at the other line {targets[q][0] + 1}; "
                                          "refusing to guess")
                if [t for _, _, t in core_old] != [t for _, _, t in core_new]:
                    return splice(hunk, lines, matched, core_old, norm)
                try:  # blank and comment lines alone change: their text here tells applied from not
                    return splice(hunk, lines, matched, core_old, norm)
                except TransformFailed:
                    if post_image_here(hunk, lines, matched, core_old, norm):
                        return "present"
                    raise
    if other := in_their_place(hunk, targets, norm):
        gone = next(t.strip() for k, t in hunk.lines if k == "-" and norm(t))
        raise TransformFailed(f"{hunk.label}: the lines it removes (`{gone}`) are not here, and other code stands "
                              f"where they were (`{other}`); refusing to guess")
    evidence = [i for i in removed if not trivial(norm(hunk.lines[i][1]))]  # `else:`, `)`, `pass` are everywhere
    scoped = [t for t in targets if in_scope(t[0])]  # what the diff's scope holds here (the file, where none)
    if removed and not any(resembles(hunk, i, scoped, norm) for i in evidence):
        return "absent"  # nothing like the lines it removes is in the file: the code is not there
    if not removed and not any(t in {t for _, t in scoped} for _, k, t in rows if k == " " and not trivial(t)):
        return "absent"  # an addition none of whose context is here (trivial lines aside): the code is not there
    have = {t for _, t in targets}
    added = {t for _, k, t in rows if k == "+"}
    if removed and added and added <= have and not any(norm(hunk.lines[i][1]) in have for i in removed):
        raise TransformFailed(f"{hunk.label}: every line it adds is in the file and no line it removes is, but not "
                              "with its context: fixed there in another form? refusing to guess")
    if unshown:
        named = "::".join((scope_of(hunk) or cpp_scope_of(hunk))[-1:] or [header_name(hunk) or hunk.header.strip()])
        raise TransformFailed(f"{hunk.label}: its context is not all here, and what is lies in `{unshown[0]}`, a "
                              f"function the diff does not show: cannot tell which method of `{named}` it changes; "
                              "refusing to guess")
    differing = next((hunk.lines[i][1].strip() for i, k, _ in olds if k == "-" and
                      norm(hunk.lines[i][1]) not in have), None)
    raise TransformFailed(f"{hunk.label}: its context or removed lines are not in the file"
                          + (f" (e.g. `{differing}`)" if differing else "") + "; refusing to guess")


TOKEN = re.compile(r"""[A-Za-z_]\w*|\d[\w.]*|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|\S""")


def tokens(text: str) -> list[str]:
    """A normalised line as tokens (names, numbers, strings with one kind of quote,
    single punctuation characters)."""
    return ['"' + t[1:-1] + '"' if t[0] == "'" else t for t in TOKEN.findall(text)]


class Tokens:
    """The target's lines as one token stream (made when first asked), each token
    with its line: code found across other line breaks (an argument list wrapped
    or joined, a C++ statement over two lines) is found here."""

    def __init__(self, lines: list[str], norm):
        self.lines, self.norm = lines, norm

    @functools.cached_property
    def stream(self) -> tuple[str, list[int], list[int]]:
        run = without_trailing_commas([(t, row) for row, line in enumerate(self.lines) for t in tokens(self.norm(line))])
        starts, at = [], 0
        for token, _ in run:
            starts.append(at)
            at += len(token) + 1
        return "".join(f"{token}\0" for token, _ in run), starts, [row for _, row in run]

    def find(self, wanted: list[str]) -> list[tuple[int, int]]:
        """(first line, last line) of every place the token run `wanted` stands."""
        text, starts, rows = self.stream
        needle, found, at = "\0".join(wanted) + "\0", [], 0
        while wanted and (at := text.find(needle, at)) != -1:
            if at == 0 or text[at - 1] == "\0":
                first = bisect.bisect_left(starts, at)
                found.append((rows[first], rows[first + len(wanted) - 1]))
            at += 1
        return found


def reflowed(hunk: Hunk, core_old: list, core_new: list, lines: list[str], stream: Tokens, confirmed,
             trimmed: bool) -> bool:
    """The hunk's post-image (`core_new`) is in the file as tokens, on other line
    breaks, where its scope is, and its pre-image (`core_old`) is nowhere as tokens."""
    changed = [t for _, k, t in core_new + core_old if k != " "]
    if not changed or all(trivial(t) for t in changed):
        return False
    def places(rows):
        wanted = without_trailing_commas([t for _, _, text in rows for t in tokens(text)])
        return [(a, b) for a, b in stream.find(wanted) if confirmed(a, b, trimmed)]
    code = [n for n, line in enumerate(lines) if line.strip()]
    at_edge = [(a, b) for a, b in places(core_new)  # (the first and last code lines stand for the file's edges)
               if not code or at_its_edge(hunk, code.index(a), code.index(b) + 1 - code.index(a), len(code))]
    return bool(at_edge) and not places(core_old)


def hunk_span(hunk: Hunk, core: list, norm) -> tuple[int, int]:
    """The hunk rows that go with the kept lines `core`: from the first kept row
    to the last, widened over the added, blank and comment rows next to them."""
    first, last = core[0][0], core[-1][0]
    while first and (hunk.lines[first - 1][0] == "+" or not norm(hunk.lines[first - 1][1])):
        first -= 1
    while last + 1 < len(hunk.lines) and (hunk.lines[last + 1][0] == "+" or not norm(hunk.lines[last + 1][1])):
        last += 1
    return first, last


def reaches_the_change(hunk: Hunk, core: list, norm) -> bool:
    """Every added or removed line of the hunk is inside the span of the kept
    lines `core` or next to it (across blank and comment lines): context dropped
    between the kept lines and a changed one would leave it nowhere to go (an
    added line) or in the file (a removed comment)."""
    first, last = hunk_span(hunk, core, norm)
    return all(first <= i <= last for i, (kind, _) in enumerate(hunk.lines) if kind != " ")


def overlapping(one: list, other: list) -> bool:
    """Two runs of (line index, text) share a line."""
    return bool(one) and bool(other) and one[0][0] <= other[-1][0] and other[0][0] <= one[-1][0]


def anchored_in_its_block(hunk: Hunk, keep: set[int], norm, here: set[str]) -> bool:
    """Each run of lines the hunk only adds keeps, in `keep` (the context rows not trimmed), the code line
    right above it, or else the one right below it where that is indented as much as the added lines: a
    line indented less follows their block and tells not where in it (`else:` below a line added after
    `x = x.contiguous()`, which the release moved out of the branch: the line would go before it). And a
    line above it that was trimmed stands nowhere else here (`here`: the normalised lines of the scope the
    diff names): where the release moved it (a dataclass field the diff adds below `dropout`, now the last
    field), the added lines go with it or nowhere."""
    rows = hunk.lines
    for i, (kind, text) in enumerate(rows):
        if kind != "+" or i and rows[i - 1][0] == "+" or not text.strip():
            continue
        end = next((j for j in range(i, len(rows)) if rows[j][0] != "+"), len(rows))
        if any(k == "-" for k, _ in rows[max(i - 1, 0):end + 1]):
            continue  # a replacement: its removed lines place it
        above = next((j for j in range(i - 1, -1, -1) if norm(rows[j][1])), None)
        below = next((j for j in range(end, len(rows)) if norm(rows[j][1])), None)
        if above is None or above in keep:
            continue
        if norm(rows[above][1]) in here and not trivial(norm(rows[above][1])):
            return False
        width = three_way.indentation(text)
        if below is None or below not in keep or three_way.indentation(rows[below][1]) < width:
            return False
    return True


def probe(rows: list, targets: list, p: int) -> int:
    """The target line of the first changed row (or the row above it) of `rows` placed at `p`."""
    first = next((n for n, (_, k, _) in enumerate(rows) if k != " "), 0)
    return targets[p + max(first - (1 if rows[first][1] == " " else 0), 0)][0]


def telling_header_row(hunk: Hunk, cpp: bool) -> int | None:
    """The row of the hunk's context line that heads the block its first changed line is in (the nearest
    non-blank context line above it indented less), where its name alone does not tell that block: a
    C/C++ function's header (an overload has its name), a def under `@NAME.setter`/`.deleter` or
    `@overload`, a `case` or `except` label, a branch's header (`elif mode == "score":`); else None (a Python def made a method keeps its name: its
    header may differ)."""
    first = next((i for i, (k, t) in enumerate(hunk.lines) if k != " " and t.strip()), None)
    if first is None:
        return None
    width = len(indent_of(hunk.lines[first][1]).expandtabs())
    row = next((i for i in range(first - 1, -1, -1) if hunk.lines[i][0] == " " and hunk.lines[i][1].strip()
                and len(indent_of(hunk.lines[i][1]).expandtabs()) < width), None)
    if row is None:
        return None
    header = hunk.lines[row][1]
    words = re.findall(r"[A-Za-z_]\w*", header)
    if words and (words[0] in LABELS or words[0] in BRANCHES):  # a label or a test tells its branch: another's
        return row  # lines are another branch's (`elif mode == "score":` is not `elif mode == "predict":`)
    if cpp:
        return row if three_way.defines_a_function(header) else None
    above = [t.strip() for _, t in hunk.lines[:row] if t.strip()][-1:]
    decorated = bool(above) and re.match(r"@(\w+\.(setter|deleter)|(typing\.)?overload)\b", above[0])
    return row if decorated and DEF.match(header) else None


LABELS = ("case", "default", "except")
BRANCHES = ("if", "elif", "else", "for", "while", "with", "try", "finally", "switch", "do")


def same_function(mine: str, theirs: str) -> bool:
    """Two C/C++ function headers name one function: the same qualified name, and the first's parameters,
    in order, among the second's (a parameter added by the release; `Put(int v)` is not `Put(double v)`)."""
    def parts(header: str) -> tuple[list[str], list[str]]:
        head, _, rest = header.partition("(")
        depth, params, current = 0, [], ""
        for char in rest:
            if char == ")" and depth == 0:
                break
            depth += (char in "(<[") - (char in ")>]")
            if char == "," and depth == 0:
                params.append(" ".join(current.split()))
                current = ""
            else:
                current += char
        params.append(" ".join(current.split()))
        return cpp_name(head + "("), [p for p in params if p and p != "void"]

    (name, params), (other, others) = parts(mine), parts(theirs)
    found = iter(others)
    return bool(name) and name == other and all(param in found for param in params)


def nearest_header(lines: list[str], at: int, cpp: bool, label: bool) -> int | None:
    """The nearest header at or above line index `at` of the sort the hunk shows: a label (`case`,
    `default`, `except`: `label`), else a def line (Python) or a function header (C/C++: a call-like
    line that opens a block or ends in `)`, no control statement)."""
    for n in range(min(at, len(lines) - 1), -1, -1):
        if label and re.findall(r"[A-Za-z_]\w*", lines[n])[:1] in ([w] for w in LABELS) or not label and (
                three_way.defines_a_function(lines[n]) if cpp else DEF.match(lines[n])):
            return n
    return None


def trimmed(olds: list, lead: int, tail: int):
    """`olds` without `lead` leading and `tail` trailing context lines (None: a removed line would go)."""
    core = olds[lead:len(olds) - tail]
    if any(k == "-" for _, k, _ in olds[:lead] + olds[len(olds) - tail:]) or not core:
        return None
    return core


def seq(rows: list, targets: list, hunk: Hunk, lines: list[str]) -> list[int]:
    """Where the normalised `rows` are a run of the target's normalised lines, with
    one indentation shift for all of them (a line at another nesting depth is not the same line)."""
    wanted = [t for _, _, t in rows]
    have = [t for _, t in targets]
    out = []
    for p in range(len(have) - len(wanted) + 1):
        if have[p:p + len(wanted)] != wanted:
            continue
        shifts = {len(indent_of(lines[targets[p + n][0]])) - len(indent_of(hunk.lines[row][1]))
                  for n, (row, _, _) in enumerate(rows)}
        if len(shifts) == 1:
            out.append(p)
    return out


TRIVIAL_WORDS = {"else", "pass", "return", "try", "finally", "continue", "break", "None", "True", "False", "self",
                 "nullptr", "default", "public", "private", "protected", "0", "1"}


def removed_elsewhere(hunk: Hunk, lines: list[str], scopes, spots: list[int], pre_image: str | None,
                      python: bool = False) -> str | None:
    """A hunk that only removes lines, its post-image here (its context lines side by side): a line of the
    scope of that place that is a line it removes, not trivial, or that line reworded (`reworded`):
    `text` (line N). Its context side by side is then no sign that it is applied: the release may have moved
    the line (`torch.cuda.synchronize()` two lines down) or changed it (`torch.cuda.synchronize(device)`).
    The scope: that of the one place its post-image stands whole, else (with the diff's pre-image) that of
    the hunk there, else the file. With the pre-image, only a line the scope holds more often than the
    pre-image's same scope (less the diff's removals): a copy or a like line the pre-image had there too is
    no move, and one deleted elsewhere hides none; and a removed line the file holds more often than the
    pre-image. From the hunks alone that cannot be told: refused. Either way a removed line in a def that
    the scope calls (moved into a helper)."""
    if any(kind == "+" for kind, _ in hunk.lines):
        return None
    norm = scopes.norm if scopes else str.strip
    removed = Counter(norm(text) for kind, text in hunk.lines if kind == "-" and norm(text))
    gone = Counter({text: n for text, n in removed.items() if not trivial(text)})
    if not gone and (pre_image is None or not removed):
        return None
    telling = bool(gone)  # trivial lines alone (an early `return`) are counted only against the pre-image's scope
    gone = gone or removed
    where = scopes.chain(spots[0] + 1) if scopes and len(spots) == 1 else None
    before = None
    if pre_image is not None:
        where, pre = pre_scope(hunk, pre_image, norm, where, python and scopes is not None)
        before = Counter(pre) - gone
    here = [(n, norm(line)) for n, line in enumerate(lines) if where is None or scopes.chain(n + 1) == where]
    now = Counter(text for _, text in here)
    for n, text in here:
        if (text in gone or any(reworded(g, text) for g in gone)) and (before is None or now[text] > before[text]):
            return f"`{lines[n].strip()}` (line {n + 1})"
    if not telling:
        return None
    if where is not None:  # moved into a def the scope calls (`_sync()`), whose body holds it
        for n, line in enumerate(lines):
            chain = scopes.chain(n + 1) if norm(line) in gone else []
            called = re.compile(rf"(?<!def )\b{re.escape(chain[-1])}\(") if chain and chain[-1] not in where else None
            if called and any(called.search(text) for _, text in here):
                return f"`{line.strip()}` (line {n + 1}, in `{chain[-1]}`, which it calls)"
    if pre_image is not None:  # moved out of the scope elsewhere: the file has it more often than before
        before, now = Counter(norm(line) for line in lines_of(pre_image)) - gone, Counter(map(norm, lines))
        return next((f"`{line.strip()}` (line {n + 1})" for n, line in enumerate(lines)
                     if norm(line) in gone and now[norm(line)] > before[norm(line)]), None)
    return None


def pre_scope(hunk: Hunk, pre_image: str, norm, where: list[str] | None, scoped: bool) \
        -> tuple[list[str] | None, list[str]]:
    """(`where`, or where None the class/def chain of the hunk's first removed line in the diff's pre-image;
    the normalised lines of the pre-image in that chain); the whole pre-image where not `scoped` (a Python
    file read: `where` as given) or the pre-image does not parse (None: the whole file here too)."""
    pre = lines_of(pre_image)
    if scoped:
        try:
            read = Scopes(pre_image)
        except TargetSyntaxError:
            read = None
        if read is not None:
            if where is None:
                where = read.chain(hunk.start + [kind for kind, _ in hunk.lines if kind != "+"].index("-"))
            return where, [norm(line) for n, line in enumerate(pre) if read.chain(n + 1) == where]
        where = None
    return where, [norm(line) for line in pre]


def reworded(removed: str, line: str) -> bool:
    """`line` is normalised `removed` changed: its names (two or more, not trivial) in the same order among
    others (`sync()` given an argument, `a.b()` -> `a.c().b()`)."""
    names = [w for w in re.findall(r"[A-Za-z_]\w*", removed) if w not in TRIVIAL_WORDS]
    if len(names) < 2 or line == removed:
        return False
    rest = iter(re.findall(r"[A-Za-z_]\w*", line))
    return all(name in rest for name in names)


def trivial(text: str) -> bool:
    """A normalised line that is no evidence of where code is: brackets, `else:`,
    `pass`, `return`, `return None;`, a blank (no other name or number in it)."""
    return all(word in TRIVIAL_WORDS for word in re.findall(r"[A-Za-z_]\w*|\d+", text))


def joins_the_removal(hunk: Hunk, keep: set[int], norm) -> bool:
    """The kept rows `keep` hold a context line on each side of every removed
    line, where the hunk has one there: only then do they, found in the file
    without the removed lines, show the removal made (not lines gone with other
    code in their place)."""
    context = [i for i, (k, t) in enumerate(hunk.lines) if k == " " and norm(t)]
    for row in (i for i, (k, _) in enumerate(hunk.lines) if k == "-"):
        before, after = [i for i in context if i < row], [i for i in context if i > row]
        if before and not keep.intersection(before) or after and not keep.intersection(after):
            return False
    return True


def in_their_place(hunk: Hunk, targets: list, norm, near: int = 10) -> str | None:
    """A hunk whose removed lines are not in the file, whose context on both sides of
    them is (the nearest non-trivial line each, in order, at most `near` lines
    apart): the first line that stands between them, where the removed lines were."""
    rows = [(i, k, norm(t)) for i, (k, t) in enumerate(hunk.lines) if norm(t) and k != "+"]
    removed = [n for n, (_, k, _) in enumerate(rows) if k == "-"]
    if not removed:
        return None
    above = [t for _, k, t in rows[:removed[0]] if k == " " and not trivial(t)][-1:]
    below = [t for _, k, t in rows[removed[-1] + 1:] if k == " " and not trivial(t)][:1]
    if not above or not below:
        return None
    have = [t for _, t in targets]
    for p in (p for p in range(len(have) - len(above) + 1) if have[p:p + len(above)] == above):
        end = p + len(above)
        q = next((q for q in range(end, min(end + near, len(have) - len(below)) + 1)
                  if have[q:q + len(below)] == below), end)  # the first after it: lines between, or none
        if q > end:
            return have[end]
    return None


def resembles(hunk: Hunk, row: int, targets: list, norm=norm, at_least: float = 0.75, near: int = 8) -> bool:
    """Whether the removed line `row` is in the target, or a line close to it is with
    one of the hunk's context lines near it: the code is there and differs (failed),
    rather than not there at all (not-applicable)."""
    line = norm(hunk.lines[row][1])
    context = {norm(t) for k, t in hunk.lines if k == " " and norm(t) and not trivial(norm(t))}
    if any(text == line for _, text in targets):
        return True
    by_context = {m for c, (_, text) in enumerate(targets) if text in context  # within `near` of a context line
                  for m in range(max(c - near, 0), min(c + near + 1, len(targets)))}
    close: dict[str, bool] = {}  # text -> close to the line (once per text: SequenceMatcher is the cost)

    def is_close(text: str) -> bool:
        if text not in close:
            matcher = difflib.SequenceMatcher(None, line, text)
            close[text] = matcher.real_quick_ratio() >= at_least and matcher.quick_ratio() >= at_least \
                and matcher.ratio() >= at_least
        return close[text]

    return any(is_close(targets[n][1]) for n in sorted(by_context))


def splice(hunk: Hunk, lines: list[str], matched: list, core: list, norm=norm):
    """The target span of `matched` rewritten: its context lines kept as they are,
    removed lines dropped, added lines re-indented and put where the hunk has them.
    The blank and comment rows the normalised match skipped are aligned to the
    target's blank and comment lines around and between the matched ones (same
    text, in order): a removed one that is not there as the diff has it is
    failed, never kept; an added line goes after the row above it."""
    first, last = hunk_span(hunk, core, norm)
    of_row = {row: target for (row, _, _), (target, _) in zip(core, matched)}
    for (row, _, _), (target, _), (next_row, _, _), (next_target, _) in zip(core, matched, core[1:], matched[1:]):
        of_row.update(align(hunk, range(row + 1, next_row), lines, range(target + 1, next_target)))
    start, stop = matched[0][0], matched[-1][0] + 1
    above = start
    while above and not norm(lines[above - 1]):
        above -= 1
    below = stop
    while below < len(lines) and not norm(lines[below]):
        below += 1
    of_row.update(align(hunk, range(core[0][0] - 1, first - 1, -1), lines, range(start - 1, above - 1, -1)))
    of_row.update(align(hunk, range(core[-1][0] + 1, last + 1), lines, range(stop, below)))
    if lost := next((text for row, (kind, text) in enumerate(hunk.lines)
                     if kind == "-" and text.strip() and row not in of_row), None):
        raise TransformFailed(f"{hunk.label}: a line it removes, `{lost.strip()}`, is not in the file as the diff "
                              "has it, next to the lines around it; refusing to keep it")
    start, stop = min(start, *of_row.values()), max(stop, *(t + 1 for t in of_row.values()))
    shift = (indent_of(hunk.lines[core[0][0]][1]), indent_of(lines[matched[0][0]]))
    eol = ending(lines[matched[0][0]]) or "\n"
    out, added, at = [], [], start
    for row in range(first, last + 1):
        kind, text = hunk.lines[row]
        if kind == "+":
            added.append(len(out))
            out.append(reindent(text, *shift, eol, hunk))
        elif row in of_row:  # the target's lines up to its partner kept, then it (context) or not (removed)
            out += lines[at:of_row[row]] + ([lines[of_row[row]]] if kind == " " else [])
            at = of_row[row] + 1
    return start, stop, out + lines[at:stop], added


def post_image_here(hunk: Hunk, lines: list[str], matched: list, core: list, norm) -> bool:
    """The hunk's post-image, comment lines included (blank lines aside), is the
    target's text around the matched lines: the same lines, in order, from the
    first row of its span to the last."""
    first, last = hunk_span(hunk, core, norm)
    wanted = [t.strip() for k, t in hunk.lines[first:last + 1] if k != "-" and t.strip()]
    above = sum(k != "-" and bool(t.strip()) for k, t in hunk.lines[first:core[0][0]])
    below = sum(k != "-" and bool(t.strip()) for k, t in hunk.lines[core[-1][0] + 1:last + 1])
    start, stop = matched[0][0], matched[-1][0] + 1
    while above and start > 0:
        start -= 1
        above -= bool(lines[start].strip())
    while below and stop < len(lines):
        below -= bool(lines[stop].strip())
        stop += 1
    return [t.strip() for t in lines[start:stop] if t.strip()] == wanted


def align(hunk: Hunk, rows: range, lines: list[str], targets: range) -> dict[int, int]:
    """The hunk's blank and comment `rows` (context or removed) paired with the
    target's lines `targets` holding the same text (stripped), in order: each
    row with the first such line not yet passed (both ranges run away from the
    matched lines, downwards or upwards)."""
    pairs, targets = {}, list(targets)
    for row in rows:
        kind, text = hunk.lines[row]
        if kind == "+":
            continue
        at = next((n for n, t in enumerate(targets) if lines[t].strip() == text.strip()), None)
        if at is not None:
            pairs[row] = targets[at]
            targets = targets[at + 1:]
    return pairs


def reindent(text: str, old: str, new: str, eol: str, hunk: Hunk) -> str:
    """An added line moved from the diff's indentation to the target's: the line
    it is placed by is indented `old` in the diff and `new` in the target."""
    body = text.rstrip("\r\n")
    if not body.strip():
        return eol
    if new.startswith(old):  # deeper in the target (or the same): add the difference
        return new[len(old):] + body + eol
    if old.startswith(new) and body.startswith(old[len(new):]):  # shallower: take it off
        return body[len(old) - len(new):] + eol
    raise TransformFailed(f"{hunk.label}: cannot re-indent an added line to the target's indentation "
                          f"(`{body.strip()}`; tabs against spaces?)")


BUILTINS = set(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__package__", "__path__",
                                 "__builtins__", "__loader__", "__annotations__", "__class__", "__debug__"}


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def binds(node: ast.AST) -> set[str]:
    """The names one node binds (an import, a def, an argument, an assignment target, ...)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.arg):
        return {node.arg}
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return {node.id}
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return set(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        return {node.name}
    return set()


LEAVES = {kind for base in (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
          for kind in base.__subclasses__()}  # nodes without fields: they bind and read nothing


def children(node: ast.AST):
    """ast.iter_child_nodes without the leaves (Load, Add, ...): a third of the nodes."""
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, list):
            yield from (item for item in value if isinstance(item, ast.AST) and type(item) not in LEAVES)
        elif isinstance(value, ast.AST) and type(value) not in LEAVES:
            yield value


def scope_names(scope: ast.AST, quiet=None) -> dict[str, set[int]]:
    """The names bound in one scope, each with the lines binding it: its own
    statements, not those of the functions and classes inside it (their names,
    and a function's arguments, are). `quiet(first line, last line)`: True where
    those lines hold no `:=` and no `for`, so that an expression there that is
    not a target binds nothing (it is not walked: most of a scope's nodes)."""
    names: dict[str, set[int]] = {}
    todo = [scope]
    while todo:
        node = todo.pop()
        for child in children(node):
            for name in binds(child):
                names.setdefault(name, set()).add(getattr(child, "lineno", 0))
            if isinstance(child, ast.comprehension):  # bound before its element is read, on whatever line
                for target in ast.walk(child.target):
                    names.setdefault(getattr(target, "id", ""), set()).add(0)
            if isinstance(child, (*FUNCTIONS, ast.ClassDef)):
                continue  # its body is a scope of its own
            if quiet is not None and isinstance(child, ast.expr) and not isinstance(
                    getattr(child, "ctx", None), (ast.Store, ast.Del)) and quiet(child.lineno, child.end_lineno):
                continue
            todo.append(child)
    if isinstance(scope, FUNCTIONS):
        for arg in (a for a in ast.walk(scope.args) if isinstance(a, ast.arg)):
            names.setdefault(arg.arg, set()).add(0)
    return names


NAMES_ONLY = re.compile(r"[\w\s,*()\[\]]*")
MAY_BIND = re.compile(r"(?<![=!<>])=(?!=)|:=|\b(?:for|import|def|class|as|except|global|nonlocal|del|with|lambda|match|case)\b")


def bound_by(lines: list[str]) -> set[str]:
    """The names the lines may bind: each read as a statement (a header given a body) where it is one,
    else every name on it but those after a dot (part of a longer statement: it may bind any of them);
    a line of names alone (`a,`: an argument or target of a statement over lines) may bind each."""
    names: set[str] = set()
    for line in lines:
        text = line.strip()
        if NAMES_ONLY.fullmatch(text):  # `a,` `*rest,` `(x, y)`: may be targets or arguments over lines
            names |= {name for name in three_way.NAME.findall(text) if not keyword.iskeyword(name)}
            continue
        if not MAY_BIND.search(text):  # no `=`, no binding keyword: binds nothing, parsed or not
            continue
        for attempt in (text, text + "\n    pass"):
            try:
                tree = ast.parse(attempt)
            except (SyntaxError, ValueError):
                continue
            names |= {name for node in ast.walk(tree) for name in binds(node)}
            if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and all(
                    isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.expr_context))
                    for n in ast.walk(tree.body[0].value)):
                names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            break
        else:
            names |= set(three_way.NAME.findall(re.sub(r"\.\s*\w+", "", text)))
    return {name for name in names if not keyword.iskeyword(name)}  # `for`, `None`: never bound


def check_no_second_definition(tree: ast.AST, added_rows: list[int], path: str) -> None:
    """A def or class the diff adds must not name one already defined beside it by
    lines it does not add: its function is there in another form (moved,
    reformatted), and a second definition would silently replace the first.
    Property setters, overloads and `_` are not second definitions."""
    rows, sorted_rows = {r + 1 for r in added_rows}, sorted(r + 1 for r in added_rows)

    def alternative(node) -> bool:
        return node.name == "_" or any(
            isinstance(d, ast.Attribute) and d.attr in ("setter", "getter", "deleter", "register")
            or "overload" in ast.unparse(d) for d in node.decorator_list)

    todo = [tree]
    while todo:  # the blocks that hold an added line (a def elsewhere is not beside one the diff adds)
        parent = todo.pop()
        todo.extend(node for node in children(parent) if isinstance(node, ast.match_case) or (
            isinstance(node, (ast.stmt, ast.excepthandler)) and holds(node, sorted_rows)))
        for field in ("body", "orelse", "finalbody"):
            body = getattr(parent, field, None)
            if not isinstance(body, list):
                continue
            defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and not alternative(n)]
            for node in defs:
                if node.lineno in rows and (old := next((o for o in defs if o.name == node.name
                                                          and o.lineno not in rows), None)):
                    raise TransformFailed(f"{path}: the diff adds `{node.name}` (line {node.lineno}) where one is "
                                          f"already defined (line {old.lineno}): it is here in another form; "
                                          "refusing to define it twice")


def holds(node: ast.AST, rows: list[int]) -> bool:
    """One of the (sorted) `rows` is a line of the node (a def's decorators too)."""
    return spans(rows, first_line(node), node.end_lineno)


def first_line(node: ast.AST) -> int:
    """The node's first line: a decorated def's or class's first decorator's."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])


def spans(rows: list[int], first: int, last: int) -> bool:
    """One of the sorted `rows` is in first..last."""
    at = bisect.bisect_left(rows, first)
    return at < len(rows) and rows[at] <= last


def name_reads(tree: ast.AST, on_read, walked=None, quiet=None) -> None:
    """Call on_read(name node, the scopes it sees) for every name read in `tree`:
    its function and the enclosing ones (innermost last), the module; a class
    body's names seen in that body, not in its methods, as Python has it. A
    function's decorators, defaults and annotations are read where it is defined.
    `walked(node)`: False for a statement (or lambda) to leave out, whole; the scopes around what is
    walked are still read whole (a name is bound anywhere in its scope). `quiet`: as scope_names takes it."""
    def visit(node: ast.AST, scopes: list[dict], own: dict | None = None) -> None:
        if walked is not None and isinstance(node, (ast.stmt, ast.Lambda)) and not walked(node):
            return
        here = scopes + [own] if own else scopes
        if isinstance(node, FUNCTIONS):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p is not None)]
            annotations = [p.annotation for p in params if p.annotation is not None]  # read where it is defined
            for part in [*getattr(node, "decorator_list", []), *a.defaults, *(d for d in a.kw_defaults if d is not None),
                         *annotations, *([node.returns] if getattr(node, "returns", None) is not None else [])]:
                visit(part, here)
            inner = scopes + [scope_names(node, quiet)]
            for part in node.body if isinstance(node.body, list) else [node.body]:
                visit(part, inner)
            return
        if isinstance(node, ast.ClassDef):
            for part in [*node.decorator_list, *node.bases, *node.keywords]:
                visit(part, here)
            names = scope_names(node, quiet)
            for part in node.body:
                visit(part, scopes, names)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            on_read(node, here)
        for child in children(node):
            visit(child, scopes, own)

    visit(tree, [scope_names(tree, quiet)])


def star_import(source: str, tree: ast.AST) -> bool:
    """A star import: the module's names cannot be known from its text."""
    return re.search(r"import\s+\*", source) is not None and any(
        a.name == "*" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names)


def check_result(before, after: ast.AST, text: str, added_rows: list[int], shown: list[int],
                 path: str, removed_names: set[str] | None = None) -> None:
    """The names of the result (one walk of it; the original's, `before()`, only when needed):

    - every name an added line reads is bound where that line can see it (its
      function or an enclosing one, the module, a builtin) by a line that is not
      added, or by an added line above it (on it, for `:=`). So `x = f(x)` added
      where no `x` exists fails, as does a name bound only in some other function
      (the diff was made where a variable had another name). A name read from an
      enclosing scope is looked up when the code runs: any binding there will do
      (a helper the diff adds below the function that calls it);
    - a name read outside the hunks must not lose its binding: lines the diff
      removes (a module global, an import) may still be read by code of this
      release it does not show (within its hunks, the diff's author saw it);
    - no def or class is defined twice (check_no_second_definition).
    `removed_names`: the names the lines the diff removes may bind (bound_by); a def or class with no
    added line and none of them in its text is not walked (nothing there can read a name the diff added
    or unbound)."""
    lines = text.split("\n")
    if any(DEF.match(lines[r]) for r in added_rows if r < len(lines)):
        check_no_second_definition(after, added_rows, path)
    if star_import(text, after):
        return
    rows, outside = {r + 1 for r in added_rows}, {r + 1 for r in shown}
    walrus = {(n.target.id, n.target.lineno) for n in ast.walk(after) if isinstance(n, ast.NamedExpr)} \
        if ":=" in text else set()
    lost: list[tuple[str, int]] = []

    def read(node: ast.Name, scopes: list[dict]) -> None:
        name, line = node.id, node.lineno
        if name in BUILTINS:
            return
        if line in rows:
            *outer, own = scopes
            if not any(name in scope for scope in outer) and not any(
                    n not in rows or n < line or (n == line and (name, n) in walrus) for n in own.get(name, ())):
                raise TransformFailed(f"{path}: the diff's added lines use `{name}` (line {line}), "
                                      "which is not defined where they go (nor imported)")
        elif line not in outside and not any(name in scope for scope in scopes):
            lost.append((name, line))

    hot = [n + 1 for n, line in enumerate(lines) if ":=" in line or "for" in line]  # a walrus, a comprehension

    def quiet(first: int, last: int) -> bool:
        return not spans(hot, first, last)

    walked = None
    if removed_names is not None:
        walked = Walked(lines, sorted(rows), removed_names - BUILTINS - set(scope_names(after, quiet)))

    name_reads(after, read, walked, quiet)
    if lost:  # read and unbound outside the hunks: a problem only if it was bound before the diff
        unbound_before = set()
        name_reads(before(), lambda node, scopes: None if node.id in BUILTINS or any(node.id in s for s in scopes)
                   else unbound_before.add(node.id))
        if gone := [(name, line) for name, line in lost if name not in unbound_before]:
            raise TransformFailed(f"{path}: after the diff, `{gone[0][0]}` is read (line {gone[0][1]}) but no longer "
                                  "defined: this release still uses what the diff removes")


class Walked:
    """Which statements check_result walks: those holding an added line, and those whose lines name
    what the removed lines may bind (`names`: a module-level name stays bound for every read), but a
    def whose body names only its own parameters of them (each read there is bound)."""

    def __init__(self, lines: list[str], rows: list[int], names: set[str]):
        self.rows = rows
        naming = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, sorted(names)))) if names else None
        self.naming = {n + 1: set(found) for n, line in enumerate(lines) if naming and (found := naming.findall(line))}
        self.named = sorted(self.naming)

    def __call__(self, node: ast.AST) -> bool:
        first = first_line(node)
        if spans(self.rows, first, node.end_lineno):
            return True
        named = self.named[bisect.bisect_left(self.named, first):bisect.bisect_right(self.named, node.end_lineno)]
        if not named or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return bool(named)
        a = node.args
        params = [p for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p is not None]
        header = [*node.decorator_list, *a.defaults, *a.kw_defaults, *(p.annotation for p in params), node.returns]
        if any(isinstance(n, ast.Name) and n.id in self.naming.get(n.lineno, ()) for part in header if part is not None
               for n in ast.walk(part)):
            return True  # its decorators, defaults or annotations read one, outside it
        params = {p.arg for p in params}
        return any(self.naming[line] - params for line in named)


def diff_fix(patch: PatchFile, upstream: str, fix_id: str | None = None) -> Fix:
    """A Fix made of a patch file: one DiffTransform per file, its hunks the sites.
    Its identity and DEP-3 fields come from the mail header where there is one."""
    unsupported = [f"{f.path} (mode only)" for f in patch.files if f.kind == "modified" and not f.hunks]
    if unsupported:
        raise UserError(f"{patch.name}: {', '.join(unsupported)}: a change of mode alone is not ported; nothing was "
                        "written")
    title = patch.subject or f"Apply {Path(patch.name).name}"
    return Fix(id=fix_id or slug(patch), title=title, upstream=upstream, description=patch.body,
               dep3=Dep3(origin=patch.origin if re.match(r"(upstream|backport|vendor|other)\b", patch.origin or "")
                         else f"other, {patch.origin}" if patch.origin else "other",
                         last_update=patch.date or "2000-01-01",
                         **{name.lower().replace("-", "_"): value for name, value in patch.dep3}),
               backends=("rocm", "cuda", "cpu"),
               changes=tuple(change_of(f) for f in patch.files),
               author=patch.author or "Fix Monorepo <fix-monorepo@users.noreply.github.com>")


def change_of(diff: FileDiff) -> FileChange:
    if diff.kind == "modified":
        return FileChange(diff.path, DiffTransform(diff.path, diff.hunks, diff.old_blob), sites=len(diff.hunks))
    if diff.kind == "renamed":
        return FileChange(diff.path, Renamed(diff.old_path, diff.path, diff.hunks))
    return FileChange(diff.path, whole_file(diff))


def whole_file(diff: FileDiff) -> WholeFile:
    """An added file's content (its hunk's new lines) or a deleted one's (its hunk's old lines)."""
    lines = [t for h in diff.hunks for t in (h.new if diff.kind == "added" else h.old)]
    return WholeFile(diff.path, diff.kind, "".join(lines))


def slug(patch: PatchFile) -> str:
    """A fix id from the patch's subject (else its file name): 'diff-' and kebab-case words."""
    words = re.findall(r"[a-z0-9]+", (patch.subject or Path(patch.name).stem).lower())
    return "diff-" + "-".join(words[:8] or ["patch"])


def package_prefix(project) -> str:
    """Where a catalogue project's package is in its repository (torch/, src/transformers/)."""
    return project.wheel_root + project.markers[0].removeprefix(project.wheel_root).split("/")[0] + "/"


def in_a_package(path: str) -> bool:
    return any(path.startswith(package_prefix(p)) for p in PROJECTS.values() if p.markers)


def project_of(patch: PatchFile, any_package: bool = False) -> str:
    """The upstream project whose package every file of the patch is in
    (torch/..., src/transformers/...). `any_package`: else the package
    src/NAME/ or NAME/ every file is in is a project of its own (its
    distribution taken to be NAME), for commands that act on installed files."""
    catalogue = [p for p in PROJECTS.values() if p.markers]
    found = {p.name for p in catalogue for f in patch.files if f.path.startswith(package_prefix(p))}
    if len(found) == 1 and all(f.path.startswith(package_prefix(PROJECTS[n])) for n in found for f in patch.files):
        return found.pop()
    roots = {("src/" if f.path.startswith("src/") else "", f.path.removeprefix("src/").split("/")[0])
             for f in patch.files if "/" in f.path.removeprefix("src/")}
    if any_package and not found and len(roots) == 1 and len(patch.files) == sum(
            "/" in f.path.removeprefix("src/") for f in patch.files):
        ((root, package),) = roots
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", package):
            return any_project(package.lower().replace("_", "-"), package, root, package).name
    known = ", ".join(package_prefix(p) for p in catalogue)
    also = ", or all in one package src/NAME/ or NAME/" if any_package else ""
    raise UserError(f"{patch.name}: its files are not all in one known project's package ({known}{also}); "
                    "nothing was written")


def diff_fixes(patches: list[PatchFile], upstream: str | None = None, any_package: bool = False) -> list[Fix]:
    """--diff FILE...: each patch a Fix, for `upstream` (else the project its paths
    are in: project_of; a diff of no prefix convention is read at the strip level
    under which its files are in a catalogue project's package, if there is one);
    ids made unique in series order."""
    fixes, seen = [], set()
    for patch in patches:
        if upstream is None and patch.convention is None:
            try:
                patch = resolve_strip(patch, in_a_package)
            except UserError:
                pass  # its own level: project_of says what it is not in
        fix = diff_fix(patch, upstream or project_of(patch, any_package))
        base, n = fix.id, 2
        while fix.id in seen:  # two patches with one subject: numbered, in series order
            fix = dataclasses.replace(fix, id=f"{base}-{n}")
            n += 1
        seen.add(fix.id)
        fixes.append(fix)
    return fixes
