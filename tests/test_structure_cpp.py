"""The syntax step for C/C++ (engines/structure_cpp.py through engines/structure.py): each case a pre-image,
the fix made on it, a release that moved on in one way real C++ code does, and the right answer (or a
refusal: None, and the hunks decide). Our own small files, shaped like library code."""
from __future__ import annotations

import random
import re

import pytest

from fixmono.engines.port import DiffTransform
from fixmono.engines.structure_cpp import CPP, units_of
from fixmono.model.patchfile import lines_of
from fixmono.model.errors import TransformFailed
from fixmono.testing import hunks_between, ported_by_syntax, with_header, with_notes, with_reflowed


def ported(pre: str, post: str, target: str) -> str | None:
    return ported_by_syntax(pre, post, target, CPP)


PRE = '''#include <cstdint>
#include "gemm/config.h"

namespace te {

int Workspace(const Config& config, int64_t rows) {
  int64_t size = rows * config.width;
  void* ptr = Allocate(size, config.stream);
  return Register(ptr, size);
}

int Other(int x) {
  return x + 1;
}

}  // namespace te
'''
OLD, NEW = "  void* ptr = Allocate(size, config.stream);\n", "  void* ptr = Allocate(size, config.stream, kAligned);\n"
POST = PRE.replace(OLD, NEW)
WORKSPACE = ("int Workspace(const Config& config, int64_t rows) {\n  int64_t size = rows * config.width;\n" + OLD
             + "  return Register(ptr, size);\n}\n")


def fixed(text: str, old: str = OLD, new: str = NEW) -> str:
    assert text.count(old) == 1
    return text.replace(old, new)


PLACED = {  # name: (the release, its right answer)
    "the function moved into a class (a static method)": (
        PRE.replace(WORKSPACE, "class Pool {\n public:\n  static " + WORKSPACE.replace("\n", "\n  ").rstrip(" ")
                    + "};\n"),
        lambda t: fixed(t, "    void* ptr = Allocate(size, config.stream);\n",
                        "    void* ptr = Allocate(size, config.stream, kAligned);\n")),
    "the functions in another order": (
        PRE.replace(WORKSPACE + "\n", "").replace("}\n\n}  // namespace te", "}\n\n" + WORKSPACE + "\n}  // namespace te"),
        fixed),
    "the edited statement split over lines": (
        PRE.replace(OLD, "  void* ptr = Allocate(size,\n                   config.stream);\n"),
        lambda t: fixed(t, "  void* ptr = Allocate(size,\n                   config.stream);\n", NEW)),
    "the header's brace on its own line": (
        PRE.replace("int Workspace(const Config& config, int64_t rows) {\n",
                    "int Workspace(const Config& config, int64_t rows)\n{\n"),
        fixed),
    "the argument list of the header reflowed": (
        PRE.replace("int Workspace(const Config& config, int64_t rows) {\n",
                    "int Workspace(const Config& config,\n              int64_t rows) {\n"),
        fixed),
    "a comment and a blank line added above the edit": (
        PRE.replace(OLD, "\n  // the stream orders the allocation\n" + OLD), fixed),
    "the function renamed, a statement added below the edit": (
        PRE.replace("int Workspace(", "int WorkspaceFor(").replace(OLD, OLD + "  Touch(ptr);\n"), fixed),
    "a statement added above the edit": (PRE.replace(OLD, "  Check(size);\n" + OLD), fixed),
    "a directive added between the functions": (
        PRE.replace("int Other(int x) {\n  return x + 1;\n}\n",
                    "#ifdef USE_OTHER\nint Other(int x) {\n  return x + 1;\n}\n#endif\n"), fixed),
    "a directive block added above the edited statement's neighbour": (
        PRE.replace("  int64_t size = rows * config.width;\n",
                    "#ifdef TE_DEBUG\n  Log(rows);\n#endif\n  int64_t size = rows * config.width;\n"), fixed),
    "the namespace not there": (
        PRE.replace("namespace te {\n\n", "").replace("}  // namespace te\n", ""), fixed),
}

REFUSED = {  # name: the release
    "the edited statement changed": PRE.replace(OLD, "  void* ptr = Allocate(size, nullptr);\n"),
    "the edited statement reflowed with a comment in it": PRE.replace(
        OLD, "  void* ptr = Allocate(size,  // bytes\n                   config.stream);\n"),
    "both neighbours of the edit changed": PRE.replace(
        "  int64_t size = rows * config.width;\n" + OLD + "  return Register(ptr, size);\n",
        "  int64_t size = rows * config.height;\n" + OLD + "  return Register(ptr, size, 0);\n"),
    "the edit's lines wrapped in a new block": PRE.replace(
        OLD + "  return Register(ptr, size);\n",
        "  {\n    std::lock_guard<std::mutex> lock(mu);\n  " + OLD + "    return Register(ptr, size);\n  }\n"),
    "the function gone, its edited statement elsewhere": PRE.replace(WORKSPACE + "\n", "").replace(
        "  return x + 1;\n", OLD + "  return x;\n"),
}


@pytest.mark.parametrize("case", PLACED)
def test_a_release_that_moved_on_gets_the_right_answer(case):
    release, right = PLACED[case]
    assert ported(PRE, POST, release) == right(release)


@pytest.mark.parametrize("case", REFUSED)
def test_a_release_whose_edited_code_or_its_place_changed_is_refused(case):
    assert ported(PRE, POST, REFUSED[case]) is None


INSERT_PRE = '''void Step(Batch* batch) {
  if (batch == nullptr) {
    return;
  }
  float loss = model->Forward(batch);
  Record(loss);
}
'''
INSERT_POST = INSERT_PRE.replace("  float loss = model->Forward(batch);\n",
                                 "  float loss = model->Forward(batch);\n  model->Backward(loss);\n")


@pytest.mark.parametrize("release, right", [
    (INSERT_PRE.replace("  float loss = model->Forward(batch);\n", "  float loss =\n      model->Forward(batch);\n"),
     "  float loss =\n      model->Forward(batch);\n  model->Backward(loss);\n"),
    (INSERT_PRE.replace("  float loss = model->Forward(batch);\n",
                        "  float loss = model->Forward(batch);\n  // recorded as is\n"),
     "  float loss = model->Forward(batch);\n  model->Backward(loss);\n  // recorded as is\n"),
    (INSERT_PRE.replace("  if (batch == nullptr) {\n    return;\n  }\n", "  if (batch == nullptr)\n  {\n    return;\n  }\n"),
     "  float loss = model->Forward(batch);\n  model->Backward(loss);\n"),
], ids=["the statement above reflowed", "a comment line between its neighbours", "a brace of the block above moved"])
def test_an_insertion_goes_right_after_the_statement_it_follows(release, right):
    got = ported(INSERT_PRE, INSERT_POST, release)
    assert got is not None and right in got and got.count("Backward") == 1, got


@pytest.mark.parametrize("release", [
    INSERT_PRE.replace("  float loss = model->Forward(batch);\n",
                       "  float loss = model->Forward(batch);\n  loss = Mean(loss);\n"),
    INSERT_PRE.replace("  float loss = model->Forward(batch);\n  Record(loss);\n",
                       "  float loss = model->Forward(batch);\n  if (loss > 0) {\n    Record(loss);\n  }\n"),
    INSERT_PRE.replace("    return;\n  }\n  float loss = model->Forward(batch);\n",
                       "    return;\n    float loss = model->Forward(batch);\n  }\n"),
    INSERT_PRE.replace("  float loss = model->Forward(batch);\n",
                       "#ifdef TRAINING\n  float loss = model->Forward(batch);\n#endif\n"),
], ids=["a statement between its neighbours", "the statement below it now in a block",
        "the statement above it moved into the block above", "the statement above it now under a directive"])
def test_an_insertion_whose_place_is_not_one_is_refused(release):
    assert ported(INSERT_PRE, INSERT_POST, release) is None


def test_a_raw_string_over_several_lines_is_not_re_indented():
    pre = "void F() {\n  int x = 1;\n  Use(x);\n}\n"
    post = 'void F() {\n  int x = 1;\n  Log(R"(a\nb)");\n  Use(x);\n}\n'
    target = "struct S {\n  static void F() {\n    int x = 1;\n    Use(x);\n  }\n};\n"
    assert ported(pre, post, target) is None


def test_a_statement_both_changed_takes_both_edits():
    release = PRE.replace(OLD, "  void* ptr = Allocate(Round(size), config.stream);\n")
    assert ported(PRE, POST, release) == release.replace(
        "  void* ptr = Allocate(Round(size), config.stream);\n",
        "  void* ptr = Allocate(Round(size), config.stream, kAligned);\n")


@pytest.mark.parametrize("release", [
    PRE.replace(OLD, "  void* ptr = Allocate(size, config.stream, kPinned);\n"),
    PRE.replace(OLD, "  void* ptr = Allocate(Round(size), config.stream /* async */);\n"),
], ids=["both add at one place", "a comment of the release where the diff edits"])
def test_a_statement_both_changed_where_the_edits_meet_is_refused(release):
    assert ported(PRE, POST, release) is None


def test_units_are_statements_directives_comments_and_blank_lines():
    text = ('#define ADD(a, b) \\\n  ((a) + (b))\n/* a block\n   comment */\nint f(int a,\n      int b)\n{\n'
            '  return ADD(a,\n             b);  // sum\n\n}\n')
    units = [(u.start, u.stop, u.code, u.key) for u in units_of(lines_of(text))]
    assert units == [
        (0, 2, True, "#define ADD ( a , b ) ((a) + (b))"),
        (2, 4, False, "/* a block comment */"),
        (4, 7, True, "int f ( int a , int b ) {"),
        (7, 9, True, "return ADD ( a , b ) ;"),
        (9, 10, False, ""),
        (10, 11, True, "}"),
    ]


MODULE = '''#include "pool.h"

namespace te {

Pool::Pool(int size) : size_(size) {
  blocks_.reserve(size);
}

int Pool::Take(int want) {
  if (want > size_) {
    return -1;
  }
  int got = Find(want);
  size_ -= got;
  Mark(got, want);
  return got;
}

void Pool::Give(int n) {
  for (int i = 0; i < n; ++i) {
    Release(i);
  }
  size_ += n;
}

}  // namespace te
'''


def random_edit(rng: random.Random, lines: list[str], among: list[int]) -> tuple[int, str, list[str]]:
    """(line, kind, the post-image's lines): a statement of `among` replaced by a call, a call added after
    it, or it removed."""
    at, kind = rng.choice(among), rng.choice(["replace", "add", "remove"])
    indent = re.match(r"\s*", lines[at])[0]
    post = {"replace": lines[:at] + [f"{indent}Trace({at});\n"] + lines[at + 1:],
            "add": lines[:at + 1] + [f"{indent}Trace({at});\n"] + lines[at + 1:],
            "remove": lines[:at] + lines[at + 1:]}[kind]
    return at, kind, post


SIMPLE = [n for n, line in enumerate(lines_of(MODULE)) if line.rstrip().endswith(";") and "return -1" not in line]


@pytest.mark.parametrize("seed", range(30))
def test_comment_and_blank_lines_added_away_from_the_edit_change_nothing_else(seed):
    """A whole class of releases: the pre-image with comment and blank lines added between statements,
    away from the fix's lines; the fix a random statement replaced, added after, or removed."""
    rng = random.Random(seed)
    lines = lines_of(MODULE)
    at, kind, post_lines = random_edit(rng, lines, SIMPLE)
    release, right = with_notes(rng, lines, post_lines, at, "//")
    assert ported(MODULE, "".join(post_lines), "".join(release)) == "".join(right), (kind, at)


def reflowed(line: str) -> list[str] | None:
    """`x = F(a, b);` as clang-format writes it when it is too long (the arguments under the first), or None
    where the line has no call of two arguments or more."""
    match = re.fullmatch(r"(\s*)(.*?\w)\(([^()]+,[^()]+)\);\n", line)
    if match is None:
        return None
    indent, head, args = match[1], match[2], [a.strip() for a in match[3].split(",")]
    under = " " * (len(indent) + len(head) + 1)
    return [f"{indent}{head}({args[0]},\n"] + [f"{under}{a},\n" for a in args[1:-1]] + [f"{under}{args[-1]});\n"]


CALLS = [n for n, line in enumerate(lines_of(MODULE)) if reflowed(line)]


@pytest.mark.parametrize("seed", range(30))
def test_statements_reflowed_over_lines_anywhere_are_one_statement_each(seed):
    """A whole class of releases: calls written over several lines (the edited statement and its neighbours
    among them); an untouched statement keeps the release's lines, a replaced one is the fix's line."""
    rng = random.Random(seed)
    lines = lines_of(MODULE)
    at, kind, post = random_edit(rng, lines, SIMPLE)
    flowed = set(CALLS) if rng.random() < 0.5 else set(CALLS) - {at}
    release, right = with_reflowed(lines, at, kind, flowed, reflowed, f"Trace({at});\n")
    assert ported(MODULE, "".join(post), "".join(release)) == "".join(right), (kind, at, sorted(flowed))


def same_kind_header(line: str) -> str:
    """A header the release changed that opens the same block (a parameter, another condition or start)."""
    if line.lstrip().startswith("if ("):
        return line.replace("if (", "if (ready && ", 1)
    if line.lstrip().startswith("for ("):
        return line.replace("int i = 0", "int i = 1")
    return line.replace("(", "(int extra, ", 1)  # a function


def other_kind_header(line: str) -> str:
    """A header that opens another kind of block over the same lines."""
    indent = line[:len(line) - len(line.lstrip())]
    return indent + ("TEST(Pool, Case) {\n" if not line.startswith(" ") else "while (running) {\n")


@pytest.mark.parametrize("seed", range(30))
def test_a_change_in_a_block_whose_header_the_release_changed(seed):
    """A whole class of releases: the header of the block the fix edits changed by the release, either to
    open the same kind of block (the fix placed, the release's header kept) or another kind (a function
    made a test macro's body, an `if` a `while`: refused, though the hunks' lines are all there). Through
    DiffTransform with the pre-image, as make_patch runs it."""
    rng = random.Random(seed)
    lines = lines_of(MODULE)
    at, kind, post = random_edit(rng, lines, SIMPLE)
    same = rng.random() < 0.5
    release, right = with_header(lines, post, at, same_kind_header if same else other_kind_header)
    try:
        got = DiffTransform("pool.cc", hunks_between(MODULE, "".join(post), "pool.cc")).rewrite(
            "".join(release), pre_image=MODULE).source
    except TransformFailed as err:
        got = str(err)
    assert got == ("".join(right) if same else got) and (same or "another block here" in got), (kind, at)


def test_the_engine_says_the_syntax_placed_a_cpp_change():
    """Through DiffTransform, as make_patch runs it: the hunks alone refuse (the edited statement is over two
    lines in the release); with the pre-image the syntax places it and the evidence says so."""
    release = PRE.replace(OLD, "  void* ptr = Allocate(size,\n                   config.stream);\n")
    hunks = hunks_between(PRE, POST, "gemm.cc")
    with pytest.raises(Exception):
        DiffTransform("gemm.cc", hunks).rewrite(release)
    done = DiffTransform("gemm.cc", hunks).rewrite(release, pre_image=PRE, found_in="in the checkout")
    assert done.source == release.replace("  void* ptr = Allocate(size,\n                   config.stream);\n", NEW)
    assert done.evidence.startswith("placed by the syntax of the diff's pre-image")


ENUM = "#include <x.h>\n\nenum Kind {\n  kAlpha = 1,\n  kBeta = 2,\n  kGamma = 3,\n};\n\nint Use(int k) {\n  return k;\n}\n"
ENUM_FIXED = ENUM.replace("  kBeta = 2,\n", "  kBeta = 2,\n  kDelta = 4,\n")


@pytest.mark.parametrize("header, placed", [("enum class Kind : int {", True), ("static const int kinds[] = {", False),
                                            ("struct Kind {", False), ("const char* const kNames[] = {", False)])
@pytest.mark.parametrize("entry", ["  kBeta = 2,\n", "  kBeta =\n      2,\n"])
def test_an_entry_added_to_an_enum_the_release_made_another_block_is_refused(header, placed, entry):
    """The enum's entries, line for line, in another kind of block of the release (an array's initializer):
    neither the line alignment (the entry as written) nor the syntax (the entry reflowed) puts the diff's new
    entry there; an enum given a type is the same enum."""
    release = ENUM.replace("enum Kind {", header).replace("  kBeta = 2,\n", entry)
    hunks = hunks_between(ENUM, ENUM_FIXED, "kind.h")
    done = None
    try:
        done = DiffTransform("kind.h", hunks).rewrite(release, pre_image=ENUM, found_in="in the checkout").source
    except Exception as err:
        assert not placed, err
    assert done == (release.replace(entry, entry + "  kDelta = 4,\n") if placed else None)


def test_two_changes_in_one_statement_over_lines_are_one_change():
    """A macro call over lines holding two of the diff's changes that add lines (TransformerEngine's kernel
    dispatch shape), statements over two lines below it: widening the first change to its statement must
    take in the second (it once widened past it and looped forever, the two sides' lines never again
    starting statements at once)."""
    pre = ("void F(Tensor a) {\n  DISPATCH(\n      a.dtype, T,\n      Run<T>(a);\n      Done(a););\n"
           "  Next(a,\n       a);\n  Tail(a,\n       a); }\n")
    post = pre.replace("      a.dtype, T,\n", "      a.dtype, T,\n      Grid grid(a);\n").replace(
        "      Done(a););\n", "      Done(a);\n      Sync(grid););\n")
    release = "// Copyright\n" + pre
    assert ported(pre, post, release) == "// Copyright\n" + post


@pytest.mark.parametrize("pre, old, new, release_old", [
    ('#define LOG(x) printf("value:  %d\\n", x)\nvoid F(int v) {\n  LOG(v);\n}\n',
     'printf("value:', 'fprintf(stderr, "value:', '"value:  %d', ),
    ('void F(int v) {\n  Print("a  b", v);\n  Done();\n}\n', '  Done();\n', '  Done(v);\n', '"a  b"'),
], ids=["in a macro body", "in a string the diff's change neighbours"])
def test_white_space_inside_a_literal_is_the_literal(pre, old, new, release_old):
    """A release that changed only the spaces inside a string literal changed the literal: a statement
    holding it is not the pre-image's (found by review: a macro body's spaces were collapsed whole)."""
    release = pre.replace(release_old, release_old.replace("  ", " "))
    post = pre.replace(old, new)
    got = ported(pre, post, release)
    if got is not None:  # placed: the release's literal kept, the diff's change made
        assert release_old.replace("  ", " ") in got and new in got, got
    assert ported(pre, post, release) != post


def test_a_crlf_release_gets_crlf_lines():
    """The diff made on LF text, the release written with CRLF (a Windows checkout): the lines the syntax
    step puts there take the release's line breaks (found by review: they came as LF)."""
    release = "// generated\n" + PRE.replace("\n", "\r\n")
    got = ported(PRE, POST, release)
    assert got == "// generated\n" + POST.replace("\n", "\r\n")
