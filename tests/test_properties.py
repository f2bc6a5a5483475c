"""Property-based tests of every fix's transformation (hypothesis).

Property: reformat the target function(s) of a fixture (blank lines, comment
lines, harmless extra statements at statement boundaries, spacing around `=`
and after commas, and for Python keyword-argument order) and the
transformation either produces a correct edit or fails loudly with a reason;
it never produces a file that does not parse. "Correct" here: the result
parses, a second run reports already-applied, the lines the fix adds and
removes are the same (up to whitespace, ignoring our inserted lines) as on the
unmutated fixture, and every other line of the mutated input survives in
order. A floor on `applied` keeps the mutations from being so destructive that
everything fails.

Mutated inputs are never fixed, so `already-applied` would be a presence
check fooled by formatting: it counts as a failure of the property.
Examples are derandomized and no example database is written.
"""
from __future__ import annotations

import ast
import difflib
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from fixmono.apply.contract import apply_change
from fixmono.model.outcome import FileOutcome, Status
from fixmono.engines.cpp import CppDocument, indent_at, walk
from fixmono.model.errors import FixtureUnavailable
from fixmono.model.fix import FileChange, Fix
from fixmono.testing import fixture_changes, for_fix, only_insertions

# Hypothesis caches under ./.hypothesis by default; keep the checkout clean
# (Bazel gives a TEST_TMPDIR; a plain pytest run uses the system temp dir).
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      os.path.join(os.environ.get("TEST_TMPDIR", tempfile.gettempdir()), "fixmono-hypothesis"))

APPLIED_FLOOR = 0.8
MARK = "hyp:"  # every comment line we insert carries it
PY_STATEMENTS = ("pass", "_unused = 1")
CPP_STATEMENTS = ("(void)0;",)
# Comment words: ordinary text plus identifiers the transformations look for
# (a comment must never be mistaken for code). No backslash: it would continue
# a C++ line comment onto the next line.
WORDS = ("TODO", "note", "keep", "in", "sync", "see", "below", "the", "args", "bias", "grad", "return",
         "device", "lock", "mutex", "GetHandle", "running_var", "torch.randn", "kwargs", "checkpoint",
         "disable_addmm_cuda_lt", "blasPreferredBackend()", "do_not_autotune_", "LOG(FATAL)",
         "gradient_checkpointing_func", "functools.partial", "(", ")", "=", ";", "{", "}", "#", "/*", "*/")
_EQUALS_STYLES = ("=", " = ", "  =  ", " =", "= ")
_COMMA_STYLES = (",", ", ", ",  ", " , ")
_NOT_BEFORE_EQUALS = set("=!<>+-*/%&|^:@~")


# --------------------------------------------------------------------------- targets

@dataclass(frozen=True)
class Target:
    """One declared fixture with mutation scopes (FileChange.fixture, from discovery)."""

    fix: Fix
    change: FileChange

    @property
    def name(self) -> str:
        return f"{self.fix.id}:{self.change.path}"

    @property
    def lang(self) -> str:
        return "py" if self.change.transform.engine == "python" else "cpp"

    @property
    def functions(self) -> tuple[str, ...]:
        return self.change.fixture.mutate

    @property
    def edit(self) -> str:
        return self.change.fixture.edit

    def load(self) -> str:
        try:
            return self.fix.fixture_text(self.change)
        except FixtureUnavailable as err:
            pytest.skip(str(err))


TARGETS = [Target(fix, change) for fix, change in fixture_changes() if change.fixture.mutate]


# --------------------------------------------------------------------------- Python sites

def _py_functions(tree: ast.Module, target: Target) -> list[ast.AST]:
    """The target scopes: by qualname, "<module>", or "@name": the PreTrainedModel
    method(s) assigning `name` (the moe fix anchors on that, not on a method name)."""
    if target.functions == ("<module>",):
        return [tree]
    found = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = ".".join([*scope, child.name])
                if qual in target.functions:
                    found.append(child)
                elif (isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope == ["PreTrainedModel"]
                      and any(f.startswith("@") and any(isinstance(t, ast.Name) and t.id == f[1:]
                                                        for s in child.body if isinstance(s, ast.Assign)
                                                        for t in s.targets) for f in target.functions)):
                    found.append(child)
                visit(child, [*scope, child.name])
            else:
                visit(child, scope)

    visit(tree, [])
    assert found, f"{target.name}: no {target.functions} in the text"
    return found


def _blocks(scope: ast.AST, recursive: bool):
    """Every statement list inside `scope` (its body, nested bodies, else branches...)."""
    nodes = ast.walk(scope) if recursive else [scope]
    for node in nodes:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
        for handler in getattr(node, "handlers", ()):
            yield handler.body
        for case in getattr(node, "cases", ()):
            yield case.body


def _py_first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None) or []
    return min([stmt.lineno, *(d.lineno for d in decorators)])


def py_boundaries(text: str, target: Target) -> list[tuple[int, str, bool]]:
    """(insert before this 0-based line, indent, follows a return/raise/...) for every
    statement boundary in the target scopes. A boundary before a statement sits above
    the comment lines directly over it (they belong to the statement)."""
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    found = set()
    for scope in _py_functions(tree, target):
        for block in _blocks(scope, recursive=scope is not tree):
            previous = None
            for stmt in block:
                first = _py_first_line(stmt) - 1
                indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
                # not an `elif` (an If in orelse) nor a statement after `:` or `;` on its line
                if len(indent.encode()) == stmt.col_offset and not lines[first].lstrip().startswith("elif"):
                    at = first
                    while at > 0 and lines[at - 1].lstrip().startswith("#"):
                        at -= 1
                    found.add((at, indent, _terminal(previous)))
                previous = stmt
            last = block[-1]
            tail = lines[last.end_lineno - 1].encode()[last.end_col_offset:].decode().strip()
            first = _py_first_line(last) - 1
            indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
            if (not tail or tail.startswith("#")) and len(indent.encode()) == last.col_offset:
                found.add((last.end_lineno, indent, _terminal(last)))
    return sorted(found)


def _terminal(stmt) -> bool:
    return isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break))


def py_region_lines(text: str, target: Target) -> list[int]:
    tree = ast.parse(text)
    if target.functions == ("<module>",):
        return list(range(len(text.splitlines())))
    return sorted({i for f in _py_functions(tree, target) for i in range(f.lineno - 1, f.end_lineno)})


def py_kwarg_calls(text: str, target: Target) -> list[tuple[int, ...]]:
    """(start, end) byte offsets of the keyword arguments of each call in the target
    scopes with two or more keywords and no `**`: those can be reordered."""
    data = text.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    tree = ast.parse(text)
    calls = []
    for scope in _py_functions(tree, target):
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and len(node.keywords) >= 2 and all(k.arg for k in node.keywords):
                calls.append(tuple((starts[k.lineno - 1] + k.col_offset, starts[k.end_lineno - 1] + k.end_col_offset)
                                   for k in node.keywords))
    return sorted(set(calls))


# --------------------------------------------------------------------------- C++ sites

def _cpp_bodies(doc: CppDocument, target: Target) -> list:
    bodies = []
    for name in target.functions:
        functions = doc.functions(name)
        assert len(functions) == 1, f"{target.name}: {len(functions)} definitions of {name}"
        bodies.append(functions[0].child_by_field_name("body"))
    return bodies


def _starts_line(src: bytes, offset: int) -> bool:
    return src[src.rfind(b"\n", 0, offset) + 1:offset].strip() == b""


def cpp_boundaries(text: str, target: Target) -> list[tuple[int, str, bool]]:
    """As py_boundaries, for the compound statements of the target functions."""
    doc = CppDocument(text)
    src = doc.src
    lines = text.splitlines(keepends=True)
    found = set()
    for body in _cpp_bodies(doc, target):
        for block in [n for n in walk(body) if n.type == "compound_statement"]:
            previous = None
            for stmt in block.named_children:
                if _starts_line(src, stmt.start_byte):
                    at = stmt.start_point[0]
                    while at > 0 and lines[at - 1].lstrip().startswith("//"):
                        at -= 1
                    found.add((at, indent_at(src, stmt.start_byte), _cpp_terminal(previous)))
                if stmt.type != "comment":
                    previous = stmt
            close = block.children[-1]
            if close.type == "}" and _starts_line(src, close.start_byte):
                real = [s for s in block.named_children if s.type != "comment"]
                indent = (indent_at(src, real[-1].start_byte) if real
                          else indent_at(src, close.start_byte) + "  ")
                found.add((close.start_point[0], indent, _cpp_terminal(real[-1] if real else None)))
    return sorted(found)


def _cpp_terminal(stmt) -> bool:
    return stmt is not None and stmt.type in ("return_statement", "break_statement", "continue_statement",
                                              "throw_statement")


def cpp_region_lines(text: str, target: Target) -> list[int]:
    doc = CppDocument(text)
    functions = [doc.functions(name)[0] for name in target.functions]
    return sorted({i for f in functions for i in range(f.start_point[0], f.end_point[0] + 1)})


# --------------------------------------------------------------------------- mutations

def _code_part(line: str, lang: str) -> str:
    """The part of a line before any string literal or comment."""
    stops = ['"', "'", "#"] if lang == "py" else ['"', "'", "//", "/*"]
    cut = min([line.find(s) for s in stops if s in line] or [len(line)])
    if lang == "cpp" and line.lstrip().startswith("#"):
        return ""  # preprocessor line
    return line[:cut]


def _spacing_sites(code: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each `=` (assignment, default, keyword) and `,` with
    its surrounding spaces, followed by more code on the line."""
    sites = []
    for i, ch in enumerate(code):
        if ch == "=":
            before = code[:i].rstrip()
            if not before or before[-1] in _NOT_BEFORE_EQUALS or code[i + 1:i + 2] in ("=", ">"):
                continue
            kind = "="
        elif ch == ",":
            before = code[:i].rstrip()
            if not before:
                continue
            kind = ","
        else:
            continue
        after = len(code) - len(code[i + 1:].lstrip())
        if after >= len(code.rstrip("\r\n")):
            continue  # nothing after it on this line
        sites.append((len(before), after, kind))
    return sites


def insert_line(text: str, at: int, line: str) -> str:
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    return "".join([*lines[:at], line + newline, *lines[at:]])


def mutate(data, target: Target, text: str) -> str:
    """Apply 1-8 validity-preserving reformattings to the target function(s)."""
    kinds = ["blank", "comment", "statement", "spacing"] + (["kwargs"] if target.lang == "py" else [])
    boundaries = py_boundaries if target.lang == "py" else cpp_boundaries
    comment_lead = "#" if target.lang == "py" else "//"
    for _ in range(data.draw(st.integers(1, 8), label="number of mutations")):
        kind = data.draw(st.sampled_from(kinds), label="kind")
        if kind in ("blank", "comment", "statement"):
            sites = boundaries(text, target)
            if kind == "statement":
                sites = [s for s in sites if not s[2]]  # no dead code after a return
            at, indent, _ = sites[data.draw(st.integers(0, len(sites) - 1), label="boundary")]
            if kind == "blank":
                line = data.draw(st.sampled_from(["", indent]), label="blank")
            elif kind == "comment":
                words = data.draw(st.lists(st.sampled_from(WORDS), max_size=6), label="comment")
                line = f"{indent}{comment_lead} {MARK} {' '.join(words)}".rstrip()
            else:
                line = indent + data.draw(st.sampled_from(PY_STATEMENTS if target.lang == "py" else CPP_STATEMENTS),
                                          label="statement")
            note(f"{kind}: insert {line!r} before line {at + 1}")
            text = insert_line(text, at, line)
        elif kind == "spacing":
            lines = text.splitlines(keepends=True)
            region = py_region_lines(text, target) if target.lang == "py" else cpp_region_lines(text, target)
            candidates = [(i, s) for i in region for s in _spacing_sites(_code_part(lines[i], target.lang))]
            if not candidates:
                continue
            i, (start, end, sym) = candidates[data.draw(st.integers(0, len(candidates) - 1), label="spacing site")]
            style = data.draw(st.sampled_from(_EQUALS_STYLES if sym == "=" else _COMMA_STYLES), label="style")
            new_line = lines[i][:start] + style + lines[i][end:]
            note(f"spacing: line {i + 1}: {lines[i].rstrip()!r} -> {new_line.rstrip()!r}")
            lines[i] = new_line
            text = "".join(lines)
        else:
            calls = py_kwarg_calls(text, target)
            if not calls:
                continue
            spans = calls[data.draw(st.integers(0, len(calls) - 1), label="call")]
            order = data.draw(st.permutations(range(len(spans))), label="keyword order")
            raw = text.encode()
            pieces = [raw[s:e] for s, e in spans]
            for (s, e), j in sorted(zip(spans, order), reverse=True):
                raw = raw[:s] + pieces[j] + raw[e:]
            note(f"kwargs: reorder {[p.decode() for p in pieces]} as {order}")
            text = raw.decode()
    return text


# --------------------------------------------------------------------------- checks

def _norm_lines(text: str) -> list[str]:
    """Lines without whitespace, minus blank lines and the lines mutations insert."""
    ours = {re.sub(r"\s+", "", s) for s in (*PY_STATEMENTS, *CPP_STATEMENTS)}
    out = []
    for line in text.splitlines():
        squeezed = re.sub(r"\s+", "", line)
        if squeezed and MARK not in line and squeezed not in ours:
            out.append(squeezed)
    return out


def line_delta(before: str, after: str) -> tuple[Counter, Counter]:
    a, b = Counter(_norm_lines(before)), Counter(_norm_lines(after))
    return a - b, b - a


def deleted_in_order(before: str, after: str) -> tuple[Counter, list[str]]:
    """Lines of `before` that a line diff deletes or replaces (normalised, ours
    left out), and those of our inserted lines it deletes."""
    old, new = before.splitlines(), after.splitlines()
    deleted = []
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag in ("delete", "replace"):
            deleted += old[i1:i2]
    ours = [line for line in deleted if MARK in line]
    return Counter(_norm_lines("\n".join(deleted))), ours


def parses(target: Target, text: str) -> int:
    """Python: 0, or raises SyntaxError. C++: the number of error nodes."""
    if target.lang == "py":
        ast.parse(text)
        return 0
    return len(CppDocument(text).errors())


@lru_cache(maxsize=None)
def baseline(target: Target) -> tuple[str, str, tuple[Counter, Counter]]:
    fixture = target.load()
    outcome = apply_change(target.change, fixture)
    assert outcome.status is Status.APPLIED, f"{target.name}: unmutated fixture: {outcome.detail}"
    return fixture, outcome.new_text, line_delta(fixture, outcome.new_text)


def check_property(target: Target, mutated: str, stats: Counter) -> FileOutcome:
    fixture, fixed, (removed, added) = baseline(target)
    errors_in = parses(target, mutated)  # the mutations keep the code valid
    if target.lang == "cpp":
        assert errors_in <= len(CppDocument(fixture).errors()), "mutation broke the C++ parse"
    change = target.change
    outcome = apply_change(change, mutated)
    stats[outcome.status.value] += 1
    event(f"status: {outcome.status.value}")
    assert outcome.status is not Status.ALREADY_APPLIED, f"unfixed input reported fixed: {outcome.detail}"
    if outcome.status in (Status.FAILED, Status.NOT_APPLICABLE):
        reason = outcome.detail.removeprefix(f"{change.path}:").strip()
        assert reason, f"{outcome.status.value} without a reason: {outcome.detail!r}"
        assert outcome.new_text is None
        note(f"{outcome.status.value}: {outcome.detail}")
        return outcome
    new = outcome.new_text
    assert new is not None and new != mutated
    assert parses(target, new) <= errors_in, "the result adds C++ parse errors"
    again = apply_change(change, new)
    assert again.status is Status.ALREADY_APPLIED, f"not idempotent: {again.status.value}: {again.detail}"
    got_removed, got_added = line_delta(mutated, new)
    assert got_removed == removed, f"removed lines differ from the unmutated fixture's: {got_removed} != {removed}"
    assert got_added == added, f"added lines differ from the unmutated fixture's: {got_added} != {added}"
    if target.edit == "insert":
        only_insertions(mutated, new)  # every line of the input kept, byte for byte, in order
    elif target.edit == "replace":
        deleted, ours = deleted_in_order(mutated, new)
        assert not ours, f"the fix removed lines it does not own: {ours}"
        assert deleted == removed, f"lines deleted out of place: {deleted} != {removed}"
    return outcome


def run_property(target: Target, max_examples: int) -> None:
    stats: Counter = Counter()
    baseline(target)  # outside hypothesis: a missing transformers skips, a broken fixture fails plainly

    @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def prop(data):
        mutated = mutate(data, target, baseline(target)[0])
        check_property(target, mutated, stats)

    prop()
    total = sum(stats.values())
    applied = stats[Status.APPLIED.value]
    assert total and applied / total >= APPLIED_FLOOR, f"{target.name}: only {applied}/{total} applied: {dict(stats)}"


# --------------------------------------------------------------------------- tests

def examples(text: str) -> int:
    """40 examples for a small fixture, fewer for a whole upstream file (at least 6)."""
    return max(6, min(40, 400_000 // max(len(text), 1)))


@pytest.mark.parametrize("target", [for_fix(t.fix.id, t, id=t.name) for t in TARGETS])
def test_reformatted_target_gives_a_correct_edit_or_a_reason(target):
    run_property(target, examples(target.load()))
