"""The diff's changes placed by the syntax of its pre-image (engines/structure.py): each case a pre-image, the
fix made on it, a release that moved on in one way real code does, and the right answer (or a refusal:
None, and the hunks decide). Our own small modules, shaped like library code."""
from __future__ import annotations

import random
import re

import pytest

from fixmono.model.patchfile import lines_of
from fixmono.engines.port import DiffTransform
from fixmono.model.errors import TransformFailed
from fixmono.testing import hunks_between, ported_by_syntax, with_header, with_notes, with_reflowed


ported = ported_by_syntax


PRE = '''import os


def helper(path, mode):
    full = os.path.join("/data", path)
    handle = open(full, mode)
    return handle


def other(x):
    return x + 1
'''
POST = PRE.replace('    handle = open(full, mode)\n', '    handle = open(full, mode, encoding="utf-8")\n')

PLACED = {  # name: (the release, its right answer)
    "the def moved into a class": (
        PRE.replace('def helper(path, mode):\n    full = os.path.join("/data", path)\n    handle = open(full, mode)\n'
                    '    return handle\n',
                    'class Files:\n    @staticmethod\n    def helper(path, mode):\n'
                    '        full = os.path.join("/data", path)\n        handle = open(full, mode)\n'
                    '        return handle\n'),
        lambda t: t.replace('        handle = open(full, mode)\n',
                            '        handle = open(full, mode, encoding="utf-8")\n')),
    "the defs in another order": (
        'import os\n\n\ndef other(x):\n    return x + 1\n\n\n' + PRE.split('\n\n\n')[1] + '\n',
        lambda t: t.replace('    handle = open(full, mode)\n', '    handle = open(full, mode, encoding="utf-8")\n')),
    "the edited statement split over lines": (
        PRE.replace('    handle = open(full, mode)\n', '    handle = open(\n        full,\n        mode,\n    )\n'),
        lambda t: t.replace('    handle = open(\n        full,\n        mode,\n    )\n',
                            '    handle = open(full, mode, encoding="utf-8")\n')),
    "a comment and a blank line added above the edit": (
        PRE.replace('    handle = open(full, mode)\n', '\n    # binary or text, as asked\n    handle = open(full, mode)\n'),
        lambda t: t.replace('    handle = open(full, mode)\n', '    handle = open(full, mode, encoding="utf-8")\n')),
    "the def renamed, a statement added below the edit": (
        PRE.replace('def helper(path, mode):', 'def open_data(path, mode):').replace(
            '    handle = open(full, mode)\n', '    handle = open(full, mode)\n    handle.seek(0)\n'),
        lambda t: t.replace('    handle = open(full, mode)\n', '    handle = open(full, mode, encoding="utf-8")\n')),
    "the def renamed and moved into a class, below another def": (
        'import os\n\n\ndef other(x):\n    return x + 1\n\n\nclass Data:\n    def open_data(path, mode):\n'
        '        full = os.path.join("/data", path)\n        handle = open(full, mode)\n        return handle\n',
        lambda t: t.replace('        handle = open(full, mode)\n',
                            '        handle = open(full, mode, encoding="utf-8")\n')),
    "the def given another argument": (
        PRE.replace("def helper(path, mode):", "def helper(path, mode, buffering=-1):"),
        lambda t: t.replace('    handle = open(full, mode)\n', '    handle = open(full, mode, encoding="utf-8")\n')),
    "a statement added above the edit": (
        PRE.replace('    handle = open(full, mode)\n', '    check(full)\n    handle = open(full, mode)\n'),
        lambda t: t.replace('    handle = open(full, mode)\n', '    handle = open(full, mode, encoding="utf-8")\n')),
}

REFUSED = {  # name: the release
    "the edited statement changed": PRE.replace('    handle = open(full, mode)\n', '    handle = open(full, "rb")\n'),
    "the edited statement reflowed with a comment in it": PRE.replace(
        '    handle = open(full, mode)\n', '    handle = open(\n        full,  # absolute\n        mode,\n    )\n'),
    "both neighbours of the edit changed": PRE.replace(
        '    full = os.path.join("/data", path)\n    handle = open(full, mode)\n    return handle\n',
        '    full = os.path.join(ROOT, path)\n    handle = open(full, mode)\n    return wrap(handle)\n'),
    "the edit's lines wrapped in a new block": PRE.replace(
        '    handle = open(full, mode)\n    return handle\n',
        '    with lock:\n        handle = open(full, mode)\n        return handle\n'),
    "the def's lines now a with block's": PRE.replace("def helper(path, mode):", "with lock:"),
    "the def's lines now another def's": PRE.replace("def helper(path, mode):", "def other_helper():").replace(
        "def other(x):", "def helper(x):"),
    "the def gone, its edited statement elsewhere": PRE.replace(
        'def helper(path, mode):\n    full = os.path.join("/data", path)\n    handle = open(full, mode)\n'
        '    return handle\n\n\n', '').replace('    return x + 1\n', '    handle = open(full, mode)\n    return x\n'),
}


IMPORTS = "from .utils import (\n    load,\n    save,\n)\n\n\ndef run():\n    return load(save)\n"
MERGED = {  # name: (pre-image, post-image, release, right answer): the edited statement changed by both
    "other arguments of the edited call": (
        PRE, POST, PRE.replace('    handle = open(full, mode)\n', '    handle = open(path_of(full), mode)\n'),
        PRE.replace('    handle = open(full, mode)\n', '    handle = open(path_of(full), mode, encoding="utf-8")\n')),
    "a name in a list over lines added at two places": (
        IMPORTS, IMPORTS.replace("    save,\n", "    save,\n    stat,\n"),
        IMPORTS.replace("    load,\n", "    cache,\n    load,\n"),
        IMPORTS.replace("    load,\n    save,\n", "    cache,\n    load,\n    save,\n    stat,\n")),
    "the def's header, the release renamed the def": (
        PRE, PRE.replace("def helper(path, mode):", "def helper(path, mode, encoding=None):"),
        PRE.replace("def helper(path, mode):", "def open_data(path, mode):").replace(
            "    return handle\n", "    handle.seek(0)\n    return handle\n"),
        PRE.replace("def helper(path, mode):", "def open_data(path, mode, encoding=None):").replace(
            "    return handle\n", "    handle.seek(0)\n    return handle\n")),
    "the edited statement reflowed and changed elsewhere": (
        PRE, POST, PRE.replace('    handle = open(full, mode)\n', '    handle = io.open(\n        full, mode\n    )\n'),
        PRE.replace('    handle = open(full, mode)\n', '    handle = io.open(\n        full, mode, encoding="utf-8"\n    )\n')),
}
NOT_MERGED = {  # name: (pre-image, post-image, release)
    "both edit one token": (PRE, POST, PRE.replace('    handle = open(full, mode)\n', '    handle = open(full, "r")\n')),
    "both add at one place": (PRE, POST, PRE.replace('    handle = open(full, mode)\n',
                                                     '    handle = open(full, mode, errors="strict")\n')),
    "a comment of the release where the diff edits": (
        PRE, POST, PRE.replace('    handle = open(full, mode)\n',
                               '    handle = io.open(full, mode  # text or binary\n    )\n')),
    "what the diff adds repeats what the release changed": (
        "def f(node):\n    for arg in node.args:\n        if arg.target != 'load' or unwrap(\n"
        "            arg.args[1]):\n            need = True\n",
        "def f(node):\n    for arg in node.args:\n        if arg.target != 'load' or unwrap(\n"
        "            arg.args[1]) or arg.args[1] in cache:\n            need = True\n",
        "def f(node):\n    for arg in node.args:\n        if arg.target != 'load' or unwrap(\n"
        "            arg.args[0]):\n            need = True\n"),
    "a statement added beside the changed one": (
        PRE, POST, PRE.replace('    handle = open(full, mode)\n', '    check(full)\n    handle = io.open(full, mode)\n')),
}


@pytest.mark.parametrize("case", MERGED)
def test_a_statement_both_changed_takes_both_edits(case):
    pre, post, release, right = MERGED[case]
    assert ported(pre, post, release) == right


@pytest.mark.parametrize("case", NOT_MERGED)
def test_a_statement_both_changed_where_the_edits_meet_is_refused(case):
    assert ported(*NOT_MERGED[case]) is None


@pytest.mark.parametrize("case", PLACED)
def test_a_release_that_moved_on_gets_the_right_answer(case):
    release, right = PLACED[case]
    assert ported(PRE, POST, release) == right(release)


@pytest.mark.parametrize("case", REFUSED)
def test_a_release_whose_edited_code_or_its_place_changed_is_refused(case):
    assert ported(PRE, POST, REFUSED[case]) is None


INSERT_PRE = '''def step(self, batch):
    if batch is None:
        return None
    loss = self.model(batch)
    return loss


def after():
    pass
'''
INSERT_POST = INSERT_PRE.replace('    loss = self.model(batch)\n', '    loss = self.model(batch)\n    loss.backward()\n')


@pytest.mark.parametrize("release, right", [
    (INSERT_PRE.replace('    loss = self.model(batch)\n', '    loss = self.model(\n        batch,\n    )\n'),
     '    loss = self.model(\n        batch,\n    )\n    loss.backward()\n'),
    (INSERT_PRE.replace('    loss = self.model(batch)\n', '    loss = self.model(batch)\n    # returned as is\n'),
     '    loss = self.model(batch)\n    loss.backward()\n    # returned as is\n'),
], ids=["the statement above reflowed", "a comment line between its neighbours"])
def test_an_insertion_goes_right_after_the_statement_it_follows(release, right):
    got = ported(INSERT_PRE, INSERT_POST, release)
    assert got is not None and right in got and got.count("loss.backward()") == 1, got


@pytest.mark.parametrize("release", [
    INSERT_PRE.replace('    loss = self.model(batch)\n', '    loss = self.model(batch)\n    loss = loss.mean()\n'),
    INSERT_PRE.replace('    loss = self.model(batch)\n    return loss\n',
                       '    loss = self.model(batch)\n    if loss is None:\n        return loss\n'),
    INSERT_PRE.replace('    if batch is None:\n        return None\n    loss = self.model(batch)\n',
                       '    if batch is None:\n        return None\n        loss = self.model(batch)\n'),
], ids=["a statement between its neighbours", "the statement below it now in a block",
        "the statement above it moved into the block above"])
def test_an_insertion_whose_place_is_not_one_is_refused(release):
    assert ported(INSERT_PRE, INSERT_POST, release) is None


def test_a_string_over_several_lines_is_not_re_indented():
    pre = 'def f():\n    x = 1\n    return x\n'
    post = 'def f():\n    x = 1\n    log("""a\nb""")\n    return x\n'
    target = 'class C:\n    def f():\n        x = 1\n        return x\n'
    assert ported(pre, post, target) is None


def test_one_statement_edited_by_two_hunks_is_refused():
    pre = "call(\n" + "".join(f"    a{n},\n" for n in range(12)) + ")\n"
    post = pre.replace("    a0,\n", "    b0,\n").replace("    a11,\n", "    b11,\n")
    assert len(hunks_between(pre, post)) == 2
    assert ported(pre, post, pre.replace("call(\n", "call(  \n")) is None


MODULE = '''"""A module of our own."""
import os
import sys


class Reader:
    def __init__(self, root):
        self.root = root
        self.cache = {}

    def read(self, name):
        if name in self.cache:
            return self.cache[name]
        path = os.path.join(self.root, name)
        with open(path) as handle:
            data = handle.read()
        self.cache[name] = data
        return data

    def names(self):
        out = []
        for entry in os.listdir(self.root):
            if entry.endswith(".txt"):
                out.append(entry)
        return sorted(out)


def main(argv):
    reader = Reader(argv[1])
    for name in reader.names():
        print(reader.read(name))
    return 0
'''


def random_edit(rng: random.Random, lines: list[str], among: list[int]) -> tuple[int, str, list[str]]:
    """(line, kind, the post-image's lines): a statement of `among` replaced by a call, a call added after
    it, or it removed, such that the result parses (not the only statement of a block removed)."""
    while True:
        at, kind = rng.choice(among), rng.choice(["replace", "add", "remove"])
        indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
        post = {"replace": lines[:at] + [f"{indent}trace({at})\n"] + lines[at + 1:],
                "add": lines[:at + 1] + [f"{indent}trace({at})\n"] + lines[at + 1:],
                "remove": lines[:at] + lines[at + 1:]}[kind]
        try:
            compile("".join(post), "m.py", "exec")
            return at, kind, post
        except SyntaxError:
            continue


@pytest.mark.parametrize("seed", range(40))
def test_comment_and_blank_lines_added_away_from_the_edit_change_nothing_else(seed):
    """A whole class of releases: the pre-image with comment and blank lines added between statements,
    away from the fix's lines; the fix is a random statement replaced, added or removed. The result is
    the post-image with the same lines added (the line alignment alone is not asked here)."""
    rng = random.Random(seed)
    lines = lines_of(MODULE)
    simple = [n for n, line in enumerate(lines) if line.strip() and not line.rstrip().endswith((":", '"""'))]
    at, kind, post_lines = random_edit(rng, lines, simple)
    release, right = with_notes(rng, lines, post_lines, at, "#")
    got = ported(MODULE, "".join(post_lines), "".join(release))
    assert got == "".join(right), (kind, at)


def reflowed(line: str) -> list[str] | None:
    """`x = f(a, b)` as black writes it over lines (a trailing comma), or None where the line has no such call."""
    match = re.fullmatch(r"(\s*)(.*?\w)\(([^()]+)\)(:?)\n", line)
    if match is None or match[4]:
        return None
    indent, head, args = match[1], match[2], [a.strip() for a in match[3].split(",")]
    return [f"{indent}{head}(\n"] + [f"{indent}    {a},\n" for a in args] + [f"{indent})\n"]


@pytest.mark.parametrize("seed", range(40))
def test_statements_reflowed_over_lines_anywhere_are_one_statement_each(seed):
    """A whole class of releases: calls of the pre-image written over several lines (the edited statement
    and its neighbours among them); the fix a random statement replaced, added after, or removed. The result
    is the release with the fix's edit: an untouched statement keeps the release's lines, a replaced one is
    the fix's line."""
    rng = random.Random(seed)
    lines = lines_of(MODULE)
    calls = [n for n, line in enumerate(lines) if reflowed(line)]
    at, kind, post = random_edit(rng, lines, calls)
    flowed = set(rng.sample(calls, 3)) | {at} if rng.random() < 0.7 else set(rng.sample(calls, 3)) - {at}
    release, right = with_reflowed(lines, at, kind, flowed, reflowed, f"trace({at})\n")
    got = ported(MODULE, "".join(post), "".join(release))
    assert got == "".join(right), (kind, at, sorted(flowed))


def same_kind_header(line: str) -> str:
    """A header the release changed that opens the same block (an argument, a base, another condition)."""
    if line.lstrip().startswith("def "):
        return line.replace("):", ", extra=None):")
    if line.lstrip().startswith("class "):
        return line.replace(":", "(Base):")
    if line.lstrip().startswith("with "):
        return line.replace("with ", "with lock, ")
    return line.replace(":\n", " and ready:\n")


def other_kind_header(line: str) -> str:
    """A header that opens another kind of block over the same lines."""
    indent = line[:len(line) - len(line.lstrip())]
    return indent + ("while running:\n" if line.lstrip().startswith("with ") else "with lock:\n")


@pytest.mark.parametrize("seed", range(40))
def test_a_change_in_a_block_whose_header_the_release_changed(seed):
    """A whole class of releases: the header of the block the fix edits changed by the release, either to
    open the same kind of block (the fix placed, the release's header kept) or another kind (`def read`
    made `with lock:`: refused, though the hunks' lines are all there). Through DiffTransform with the
    pre-image, as make_patch runs it."""
    rng = random.Random(seed)
    module = MODULE.replace("import sys\n", "import sys\nfrom debug import trace\n")
    lines = lines_of(module)
    in_blocks = [n for n, line in enumerate(lines) if line.startswith("    ") and line.strip()
                 and not line.rstrip().endswith((":", '"""'))]
    while True:  # a fix that stands on its own pre-image, binding what it bound (the name check aside)
        at, kind, post = random_edit(rng, lines, in_blocks)
        if kind != "add" and " = " in lines[at]:
            continue
        try:
            DiffTransform("m.py", hunks_between(module, "".join(post))).rewrite(module)
            break
        except TransformFailed:
            continue
    same = rng.random() < 0.5
    release, right = with_header(lines, post, at, same_kind_header if same else other_kind_header)
    try:
        got = DiffTransform("m.py", hunks_between(module, "".join(post))).rewrite("".join(release),
                                                                                  pre_image=module).source
    except TransformFailed as err:
        got = str(err)
    assert got == ("".join(right) if same else got) and (same or "another block here" in got), (kind, at)


def test_a_crlf_release_gets_crlf_lines():
    release = "# generated\n" + PRE.replace("\n", "\r\n")
    assert ported(PRE, POST, release) == "# generated\n" + POST.replace("\n", "\r\n")
