"""The Python engine: transformations written as libcst transformers.

A fix subclasses SiteTransformer (which counts anchors, changed and present
sites) and wraps it in a PythonTransform. libcst round-trips the source, so
everything the transformer does not touch stays byte-identical.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import io
import re
import tokenize
from importlib import metadata
from typing import Callable

import libcst as cst

from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed
from fixmono.engines.remembered import fingerprint, remembered
from fixmono.model.fix import Rewrite
from fixmono.model.patchfile import lines_of


class SiteTransformer(cst.CSTTransformer):
    """Base transformer: tracks the qualified name of the enclosing scope and
    counts what the match contract needs."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors = 0  # how many anchor scopes (e.g. functions) were found
        self.changed = 0  # sites rewritten
        self.present = 0  # sites already in fixed form
        self.problems: list[str] = []  # anchor found, but not in a shape we can edit
        self.added: list[str] = []  # names of changed sites, where a fix has several (for a partly fixed file)
        self.already: list[str] = []  # names of present sites, likewise
        self._scope: list[str] = []

    # A regex every def/class the transformer reads or edits contains in its text
    # (e.g. r"\bcompute_loss\b"); the defs and classes that do not are set aside
    # before libcst parses the file (most of a cold `status`), a class that does
    # keeps only its members that do. None: the whole module is parsed.
    mentioning: str | None = None

    def change(self, site: str) -> None:
        """Count a site rewritten, by name."""
        self.changed += 1
        self.added.append(site)

    def found(self, site: str) -> None:
        """Count a site already in fixed form, by name."""
        self.present += 1
        self.already.append(site)

    @property
    def qualname(self) -> str:
        return ".".join(self._scope)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._scope.append(node.name.value)
        return True

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._scope.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._scope.append(node.name.value)
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        self._scope.pop()
        return updated


class LinePlanTransformer(SiteTransformer):
    """A transformer that decides, on entering each function it targets, which
    of its statement lines to replace, and replaces them on the way out.

    Subclasses give targets(qualname) and plan(function), which counts the site
    (change/found/problems) and returns {original line: replacement}: a line, a
    list of lines, or a callable given the updated line that returns either."""

    def __init__(self) -> None:
        super().__init__()
        self._plan: dict = {}

    def targets(self, qualname: str) -> bool:
        raise NotImplementedError

    def plan(self, function: cst.FunctionDef) -> dict:
        raise NotImplementedError

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        if self.targets(self.qualname):
            self._plan = self.plan(node)
        return True

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        replacement = self._plan.get(original)  # nodes hash by identity
        if replacement is None:
            return updated
        if callable(replacement):
            replacement = replacement(updated)
        return cst.FlattenSentinel(replacement) if isinstance(replacement, (list, tuple)) else replacement

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        if self.targets(self.qualname):
            self._plan = {}
        return super().leave_FunctionDef(original, updated)


class PythonTransform:
    """Adapts a SiteTransformer factory to the Transform protocol."""

    engine = "python"

    def __init__(self, make: Callable[[], SiteTransformer], description: str, anchor: str):
        self._make = make
        self.description = description
        self.anchor = anchor  # what NotApplicable says it looked for

    def rewrite(self, source: str) -> Rewrite:
        make = getattr(self._make, "func", self._make)  # a class, or a functools.partial of one
        code = fingerprint(getattr(make, "__module__", None), __file__, libcst_version())
        if code is not None:  # two transforms of one module are two keys
            code += f"\0{getattr(make, '__qualname__', make)}\0{getattr(self._make, 'keywords', '')}" \
                    f"\0{self.description}\0{self.anchor}"
        return remembered(code, source, self._rewrite)

    def _rewrite(self, source: str, prune: bool = True) -> Rewrite:
        tree = check_syntax(source)
        transformer = self._make()
        aside = SetAside(source, tree, transformer.mentioning) if prune and transformer.mentioning else None
        aside = aside if aside and aside.kept else None
        text = aside.text if aside else source
        try:
            new = parse_checked(text).visit(transformer).code
        except RecursionError:  # libcst visits recursively; ast allows deeper nesting
            raise TargetSyntaxError("Python expressions nested too deeply to transform") from None
        if transformer.problems:
            raise TransformFailed("; ".join(transformer.problems))
        if transformer.anchors == 0:
            raise NotApplicable(f"not found: {self.anchor}")
        if transformer.changed == 0 and new != text:  # hot-fixes and reproducers run .source as it is
            raise TransformFailed("the transformation edited text at a site it did not count as changed")
        if aside:
            new = aside.restore(new)
            if new is None:  # the transformation moved or dropped a set-aside def: do it on the whole text
                return self._rewrite(source, prune=False)
        return Rewrite(new, transformer.changed, transformer.present,
                       tuple(transformer.added), tuple(transformer.already))


def body_end(lines: list[str], node: ast.stmt, start: int, stop: int) -> int:
    """Where a def/class of lines[start:stop] ends for libcst: its block's footer
    runs to the last comment or whitespace line after it that is indented at
    least as its body (the lines before that one too, a margin comment included)."""
    first = node.body[0]
    line = lines[first.lineno - 1]
    body = line[:first.col_offset]
    if body.strip() or first.lineno - 1 < start:  # `def f(): return 1`: a suite on its own line, no footer
        return stop
    end = at = stop
    while at < len(lines) and (not lines[at].strip() or lines[at].lstrip(" \t").startswith("#")):
        if lines[at].rstrip("\r\n").startswith(body) and (lines[at].strip() or len(lines[at].rstrip("\r\n")) >= len(body)):
            end = at + 1
        at += 1
    return end


def indent_of(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def first_indented_line(source: str) -> int:
    """The 0-based line of the file's first INDENT token (-1: none)."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.INDENT:
                return token.start[0] - 1
    except (tokenize.TokenError, SyntaxError):
        return 0  # cannot tell: keep the first def (a file ast parsed tokenizes; this is a guard)
    return -1


class SetAside:
    """A source whose defs/classes that do not mention `pattern` are each
    replaced by a `pass` line naming them, at their indentation (a class that
    does mention it keeps only its members that do): libcst parses, visits and
    prints only the rest. restore() puts them back into the transformed text."""

    def __init__(self, source: str, tree: ast.Module, pattern: str):
        self.text, self.kept = source, {}
        # a lone CR ends a line for ast, not for lines_of; a form feed in an indentation resets it for
        # Python, not for our `pass` line (and libcst drops it when it prints): parse those files whole
        if re.search(r"\r(?!\n)", source) or re.search(r"^[ \t]*\f", source, re.M):
            return
        lines, wanted, spans = lines_of(source), re.compile(pattern), []
        # libcst takes its default indent and newline, used for the blocks and lines a transformation
        # adds, from the file's first indented line and first line end: those stay in the text
        first_block = first_indented_line(source)

        def walk(body: list) -> None:
            for node in body:
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                stop = body_end(lines, node, start - 1, node.end_lineno)
                holds_defaults = start - 1 <= first_block < stop or start == 1
                if not wanted.search("".join(lines[start - 1:node.end_lineno])) and not holds_defaults:
                    spans.append((start - 1, stop))
                elif isinstance(node, ast.ClassDef):
                    walk(node.body)

        walk(tree.body)
        token = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        out, at = [], 0
        for n, (start, stop) in enumerate(spans):
            first, last = lines[start], lines[stop - 1]
            marker = f"{indent_of(first)}pass  # set aside {token}.{n}"
            marker += last[len(last.rstrip("\r\n")):]
            out += lines[at:start] + [marker]
            self.kept[marker] = "".join(lines[start:stop])
            at = stop
        self.text = "".join(out + lines[at:])

    def restore(self, text: str) -> str | None:
        """`text` with every set-aside def back in its `pass` line's place; None
        if a `pass` line is no longer there exactly once."""
        for marker, original in self.kept.items():
            if text.count(marker) != 1:
                return None
            text = text.replace(marker, original)
        return text


@functools.lru_cache(maxsize=1)
def libcst_version() -> str:
    return metadata.version("libcst")


def parse(source: str) -> cst.Module:
    check_syntax(source)
    return parse_checked(source)


def check_syntax(source: str) -> ast.Module:
    # ast first: libcst's native parser crashes the process (segfault) on deeply
    # nested expressions, where ast raises an exception we can report.
    try:
        return ast.parse(source.removeprefix("\ufeff"))  # a UTF-8 BOM is fine in a file, not in a str
    except (SyntaxError, ValueError) as err:  # ValueError: NUL bytes (Python < 3.12)
        where = f" at line {err.lineno}" if getattr(err, "lineno", None) else ""
        raise TargetSyntaxError(f"Python syntax error{where}: {getattr(err, 'msg', err)}") from None
    except (RecursionError, MemoryError):
        raise TargetSyntaxError("Python expressions nested too deeply to parse") from None


def parse_checked(source: str) -> cst.Module:
    """libcst's tree of a source ast has parsed (check_syntax)."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as err:
        raise TargetSyntaxError(f"Python syntax error at line {err.raw_line}: {err.message}") from None


def dotted_name(node: cst.BaseExpression) -> str | None:
    """'torch.batch_norm' for the expression torch.batch_norm, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def module_binds(module: cst.Module, name: str) -> bool:
    """Whether a top-level import or assignment of `module` binds `name`."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    if isinstance(bound, cst.Name) and bound.value == name:
                        return True
            if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets):
                return True
    return False


def code(node: cst.CSTNode) -> str:
    """The source text of one node."""
    return cst.Module([]).code_for_node(node)


def find_all(node: cst.CSTNode, kind: type) -> list:
    """Every descendant of `node` (and node itself) that is a `kind`."""
    found = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, kind):
                found.append(n)
            return True

    node.visit(Collect())
    return found


def call_argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    """The argument bound to a parameter given by position or keyword."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if position < len(positional) else None
