"""A diff's hunks placed through its pre-image (engines/three_way.py): where the
checkout holds the blob the diff's `index` line names (a fix made on another
branch of the same repository), the pre-image's lines are aligned to the
target's and each change goes where its own lines and both neighbours are.
Our own files, shaped like a library module; real git repositories."""
from __future__ import annotations

import json

import pytest

from fixmono.engines import three_way
from fixmono.model.patchfile import parse_patch
from fixmono.testing import git, hunks_between, make_patch, make_repo, ported
from tests.helpers import LOADER_BASE, LOADER_FIX, LOADER_RELEASE

PATH = "torch/utils/loader.py"
BASE, FIX, RELEASE = LOADER_BASE, LOADER_FIX, LOADER_RELEASE


def branches(tmp_path, release: str, fixed_base: str = BASE, fix: tuple[str, str] = FIX) -> tuple:
    """One repository: `main` makes `fix` in BASE (as `fixed_base` has it), `release` forked before and
    became `release`. Returns (the checkout at release, the fix's format-patch)."""
    repo = make_repo(tmp_path / "repo", {"torch/__init__.py": "", PATH: BASE})
    git(repo, "branch", "release")
    if fixed_base != BASE:
        (repo / PATH).write_text(fixed_base)
        git(repo, "commit", "-qam", "main: a refactor")
    (repo / PATH).write_text(fixed_base.replace(*fix, 1))
    git(repo, "commit", "-qam", "load: an empty read is no data")
    patch = tmp_path / "fix.patch"
    patch.write_text(git(repo, "format-patch", "-1", "--stdout"))
    git(repo, "checkout", "-q", "release")
    (repo / PATH).write_text(release)
    git(repo, "commit", "-qam", "release: retries and strict decoding")
    return repo, patch


def port(patch, checkout) -> dict:
    run = make_patch("--diff", str(patch), "--upstream", str(checkout), "--check", "--json")
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    return result


def test_changed_context_is_ported_through_the_pre_image_and_refused_without_it(tmp_path):
    repo, patch = branches(tmp_path, RELEASE)
    result = port(patch, repo)
    assert result["status"] == "applied", result
    blob = parse_patch(patch.read_text(), "fix.patch").files[0].old_blob
    assert result["evidence"] == {PATH: f"placed through the diff's pre-image (blob {blob}, in the checkout)"}
    assert f"(placed through the diff's pre-image (blob {blob}" in result["detail"]
    wanted = RELEASE.replace("        data = read(path, retries=3)\n        if data is None:\n",
                             "        data = read(path, retries=3)\n        if not data:\n")
    assert wanted != RELEASE
    out = make_patch("--diff", str(patch), "--upstream", str(repo), "--out", str(tmp_path / "series"))
    assert out.returncode == 0, out.stderr
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "am", "-q", *sorted(str(p) for p in (tmp_path / "series").glob("0*.patch")))
    assert (clone / PATH).read_text() == wanted  # the release's own context kept, the fix's line changed
    # the same release in a repository without main's objects: hunks only, and the class-only header
    # (git's, over an indented def) cannot say which method of Loader the changed line is in
    alone = make_repo(tmp_path / "alone", {"torch/__init__.py": "", PATH: RELEASE})
    refused = port(patch, alone)
    assert refused["status"] == "failed" and "cannot tell which method of `Loader`" in refused["detail"], refused


@pytest.mark.parametrize("release, why", [
    (RELEASE.replace("        data = read(path, retries=3)\n        if data is None:\n",
                     "        data = read(path, retries=3)\n        if data is None or data == '':\n"),
     "the line it edits changed"),
])
def test_where_the_release_changed_the_edit_or_its_neighbour_the_alignment_places_nothing(tmp_path, release, why):
    """A conflict as git merge-file sees one, or the neighbour gone: not placed by the alignment nor by the
    syntax; the hunk ladder decides as without the pre-image, and the detail says why it did not place it."""
    repo, patch = branches(tmp_path, release)
    result = port(patch, repo)
    assert result["status"] != "applied" or result["evidence"] == {PATH: "hunks only"}, (why, result)
    if result["status"] != "applied":
        assert "differ here from its pre-image" in result["detail"], result


@pytest.mark.parametrize("above", ["        data = read(path, retries=3)\n        log(path)\n",
                                   "        data = read(path, retries=3)\n\n        # an empty read is no data\n"],
                         ids=["a statement added above it", "a blank and a comment line added above it"])
def test_a_change_beside_the_edit_is_kept_and_the_edit_placed_by_the_syntax(tmp_path, above):
    """`git merge-file` calls a line added or removed right above an edited line a conflict; the edited
    statement is there unchanged, in its method, with its other neighbour: the syntax places the edit."""
    release = RELEASE.replace("        data = read(path, retries=3)\n        if data is None:\n",
                              above + "        if data is None:\n")
    repo, patch = branches(tmp_path, release)
    result = port(patch, repo)
    assert result["status"] == "applied", result
    assert result["evidence"][PATH].startswith("placed by the syntax of the diff's pre-image"), result
    series = tmp_path / "series"
    make_patch("--diff", str(patch), "--upstream", str(repo), "--out", str(series))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "am", "-q", *sorted(str(p) for p in series.glob("0*.patch")))
    assert (clone / PATH).read_text() == release.replace(above + "        if data is None:\n",
                                                         above + "        if not data:\n", 1)


def test_the_alignment_alone():
    pre = ["a\n", "b\n", "c\n", "d\n", "e\n"]
    hunk = parse_patch("--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n", "p").files[0].hunks
    assert three_way.verified(pre, hunk)
    assert not three_way.verified(["x\n"] + pre, hunk)
    assert [p[:4] for p in three_way.placements(pre, ["z\n", "a\n", "B\n", "c\n", "d\n", "e\n"], hunk)] == \
        [(3, 4, ["C\n"], [0])]  # its context line changed, its own line and neighbours' places hold: placed
    assert three_way.placements(pre, ["a\n", "b\n", "c2\n", "d\n", "e\n"], hunk) is None  # its line changed
    assert three_way.placements(pre, ["a\n", "b\n", "x\n", "c\n", "d\n", "e\n"], hunk) is None  # a line beside it
    insert = parse_patch("--- a/f\n+++ b/f\n@@ -2,2 +2,3 @@\n b\n+new\n c\n", "p").files[0].hunks
    assert [p[:4] for p in three_way.placements(pre, ["a\n", "b\n", "c\n", "d\n", "e\n"], insert)] == \
        [(2, 2, ["new\n"], [0])]
    assert three_way.placements(pre, ["a\n", "b\n", "q\n", "c\n", "d\n", "e\n"], insert) is None


PY_BLOCK = "x = 0\n\n\nclass Defaults:\n    alpha = 1\n    beta = 2\n    gamma = 3\n\n\ndef other():\n    return x\n"
CPP_BLOCK = "#include <x.h>\n\nenum Kind {\n  kAlpha = 1,\n  kBeta = 2,\n  kGamma = 3,\n};\n\nint Use(int k) {\n  return k;\n}\n"
HEADER_CASES = {  # name: (pre-image, its header line, the line the diff adds after it, the release's header, placed)
    "python: a class made a def": (PY_BLOCK, "class Defaults:", "    beta = 2\n", "def defaults():", False),
    "python: a class made a with block": (PY_BLOCK, "class Defaults:", "    beta = 2\n", "with lock:", False),
    "python: a class given a base": (PY_BLOCK, "class Defaults:", "    beta = 2\n", "class Defaults(Base):", True),
    "c++: an enum made an array": (CPP_BLOCK, "enum Kind {", "  kBeta = 2,\n", "static const int kinds[] = {", False),
    "c++: an enum made a struct": (CPP_BLOCK, "enum Kind {", "  kBeta = 2,\n", "struct Kind {", False),
    "c++: an enum given a type": (CPP_BLOCK, "enum Kind {", "  kBeta = 2,\n", "enum class Kind : int {", True),
    "c++: a function made static, an argument added": (
        CPP_BLOCK, "int Use(int k) {", "  return k;\n", "static int Use(int k, int scale) {", True),
    "c++: a function renamed, one for one": (CPP_BLOCK, "int Use(int k) {", "  return k;\n", "int Apply(int k) {", True),
}


@pytest.mark.parametrize("case", HEADER_CASES)
def test_a_change_goes_through_the_alignment_only_into_the_same_kind_of_block(case):
    from fixmono.engines.structure import PYTHON, Headers
    from fixmono.engines.structure_cpp import CPP

    pre, header, after, release_header, placed = HEADER_CASES[case]
    added = after[:len(after) - len(after.lstrip())] + "extra = 4;\n"
    hunks = hunks_between(pre, pre.replace(after, after + added), "f.cpp")
    release = pre.replace(header, release_header).splitlines(True)
    syntax = PYTHON if case.startswith("python") else CPP
    assert three_way.placements(pre.splitlines(True), release, hunks) is not None  # the lines alone: placed
    found = three_way.placements(pre.splitlines(True), release, hunks,
                                 Headers(pre.splitlines(True), release, syntax))
    if placed:
        (start, stop, replacement, _, _), = found
        assert release[:start] + replacement + release[stop:] == pre.replace(header, release_header).replace(
            after, after + added).splitlines(True)
    else:  # a conflict that names both headers (port.py refuses the hunk with it)
        assert isinstance(found, three_way.Conflict) and header in found and release_header in found


def test_base_names_the_tree_the_diff_was_made_on(tmp_path):
    """--base: a release checkout without main's objects, and the tree the diff was made on beside it."""
    _, patch = branches(tmp_path, RELEASE)
    alone = make_repo(tmp_path / "alone", {"torch/__init__.py": "", PATH: RELEASE})
    made_on = make_repo(tmp_path / "made-on", {"torch/__init__.py": "", PATH: BASE})
    with_base = make_patch("--diff", str(patch), "--upstream", str(alone), "--base", str(made_on), "--check", "--json")
    (result,) = json.loads(with_base.stdout)["runs"][0]["results"]
    assert result["status"] == "applied" and "placed through the diff's pre-image" in result["evidence"][PATH], result
    other = make_repo(tmp_path / "other", {"torch/__init__.py": "", PATH: BASE + "\n# another text\n"})
    not_it = make_patch("--diff", str(patch), "--upstream", str(alone), "--base", str(other), "--check", "--json")
    (result,) = json.loads(not_it.stdout)["runs"][0]["results"]
    assert result["status"] == "failed" and "pre-image" not in result["detail"], result  # its blob id is another
    plain = tmp_path / "plain.patch"  # no index line: the base's file is taken where every hunk stands in it
    plain.write_text("".join(line for line in patch.read_text().splitlines(True) if not line.startswith("index ")))
    for base, placed in ((made_on, True), (other, True)):  # other text elsewhere: its lines still map
        run = make_patch("--diff", str(plain), "--upstream", str(alone), "--base", str(base), "--check", "--json")
        (result,) = json.loads(run.stdout)["runs"][0]["results"]
        assert (result["status"] == "applied") is placed, result
    shifted = make_repo(tmp_path / "shifted", {"torch/__init__.py": "", PATH: "# one line more\n" + BASE})
    run = make_patch("--diff", str(plain), "--upstream", str(alone), "--base", str(shifted), "--check", "--json")
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert result["status"] == "failed" and "does not hold them" in result["detail"], result
    for args, message in ((["--base", str(made_on)], "--base names the tree a --diff was made on"),
                          (["--diff", str(patch), "--base", str(tmp_path / "nowhere")], "--base ")):
        bad = make_patch(*args, "--upstream", str(alone), "--check")
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.splitlines()) == 1, bad.stderr


def test_history_is_a_repository_whose_objects_hold_the_pre_image(tmp_path):
    """--history: a release checkout without main's objects, and a clone with history (here a bare mirror)
    beside it: the pre-image blob is found there by the diff's `index` line; the evidence says where."""
    repo, patch = branches(tmp_path, RELEASE)
    alone = make_repo(tmp_path / "alone", {"torch/__init__.py": "", PATH: RELEASE})
    without = make_patch("--diff", str(patch), "--upstream", str(alone), "--check", "--json")
    (result,) = json.loads(without.stdout)["runs"][0]["results"]
    assert result["status"] == "failed", result  # the hunks alone cannot tell which method
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo), str(mirror))
    before = sorted(p.name for p in (mirror / "objects").rglob("*"))
    run = make_patch("--diff", str(patch), "--upstream", str(alone), "--history", str(mirror), "--check", "--json")
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert result["status"] == "applied", result
    assert result["evidence"][PATH].endswith(f", in --history {mirror})"), result
    assert sorted(p.name for p in (mirror / "objects").rglob("*")) == before  # only read
    in_checkout = make_patch("--diff", str(patch), "--upstream", str(repo), "--check", "--json")
    (result,) = json.loads(in_checkout.stdout)["runs"][0]["results"]
    assert result["evidence"][PATH].endswith(", in the checkout)"), result
    unrelated = make_repo(tmp_path / "unrelated", {"a.py": "x = 1\n"})
    run = make_patch("--diff", str(patch), "--upstream", str(alone), "--history", str(unrelated), "--check", "--json")
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert result["status"] == "failed", result  # no blob there: the hunks decide, as without it
    for args, message in ((["--history", str(mirror)], "--history names a repository"),
                          (["--diff", str(patch), "--history", str(tmp_path / "nowhere")], "--history "),
                          (["--diff", str(patch), "--history", str(tmp_path)], "not a git repository")):
        bad = make_patch(*args, "--upstream", str(alone), "--check")
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.splitlines()) == 1, bad.stderr


@pytest.mark.parametrize("base, ours, theirs, merged", [
    ("x = f(a)\n", "x = g(a)\n", "x = f(a, b)\n", "x = g(a, b)\n"),  # the call renamed; an argument added
    ("return y\n", "return y + 1\n", "return  y\n", "return  y + 1\n"),
    ("t = load(p, 1)\n", "t = load(p, 2)\n", "total = load(p, 1)\n", "total = load(p, 2)\n"),
    ("x = f(a)\n", "x = f(a, c)\n", "x = f(a, b)\n", None),  # both add an argument at one place
    ("x = f(a)\n", "x = g(a)\n", "x = h(a)\n", None),  # both edit one token
    ("x = f(a)\n", "x = f(b)\n", "x = f(a)  # note\n", "x = f(b)  # note\n"),
    ("if data is None:\n", "if blob is None or x:\n", "if blob is None:\n", "if blob is None or x:\n"),  # one edit
    ("x = 'a\n", "x = 'b\n", "y = 'a\n", None),  # a string the line does not close: not merged
    # the diff adds code that repeats what the release changed (`args[1]` is `args[0]` there): not merged
    ("if f(a.args[1]):\n", "if f(a.args[1]) or a.args[1] in c:\n", "if f(a.args[0]):\n", None),
    ("if f(a.args[1]):\n", "if f(a.args[1]) or a.args[2] in c:\n", "if f(a.args[0]):\n",
     "if f(a.args[0]) or a.args[2] in c:\n"),  # what it adds is other code: merged
    # (review 14) an argument wrapped by the diff, one added after it by the release: `int(n, s)` was written
    ("x = f(a, n)\n", "x = f(a, int(n))\n", "x = f(a, n, s)\n", None),
    ("x = f(a) + b\n", "x = f(int(a)) + b\n", "x = f(a) + c\n", "x = f(int(a)) + c\n"),  # outside its brackets
    # an operator and the constant beside it, only a space between: `n >= 1` undid the fix
    ("if n > 0:\n", "if n >= 0:\n", "if n > 1:\n", None),
])
def test_a_line_both_changed_takes_both_edits_only_where_they_touch_different_tokens(base, ours, theirs, merged):
    assert three_way.merge_line(base, ours, theirs) == merged


def test_a_line_the_release_changed_too_is_ported_with_both_edits(tmp_path):
    """The fix edits `if data is None:` in load(); the release renamed its variable there (`data` -> `blob`)
    and changed the lines around: the line takes both edits, the name the release renamed is renamed in what
    the fix adds, and the result is checked as the edit of the release's line."""
    release = RELEASE.replace("        data = read(path, retries=3)\n        if data is None:\n            return None\n"
                              "        return decode(data, strict=True)\n",
                              "        blob = read(path, retries=3)\n        if blob is None:\n            return None\n"
                              "        return decode(blob, strict=True)\n", 1)
    fix = ("        if data is None:\n            return None\n", "        if data is None or not len(data):\n"
           "            return None\n")
    repo, patch = branches(tmp_path, release, fix=fix)
    result = port(patch, repo)
    assert result["status"] == "applied" and "placed through the diff's pre-image" in result["evidence"][PATH], result
    out = make_patch("--diff", str(patch), "--upstream", str(repo), "--out", str(tmp_path / "series"))
    assert out.returncode == 0, out.stderr
    (mail,) = (tmp_path / "series").glob("0*.patch")
    assert "-        if blob is None:\n+        if blob is None or not len(blob):\n" in mail.read_text()


def test_a_name_renamed_on_one_line_but_kept_on_another_is_not_renamed(tmp_path):
    """The release renamed `data` on the fix's line only (its other lines still read `data`): no rename is
    consistent, the merged line reads a name the release does not bind there, and the name check refuses it."""
    release = RELEASE.replace("        if data is None:\n            return None\n",
                              "        if blob is None:\n            return None\n", 1)
    assert three_way.renamed_names(
        parse_patch(git_diff(BASE, BASE.replace("        if data is None:\n", "        if not data:\n", 1)),
                    "p").files[0].hunks[0],
        three_way.aligned(BASE.splitlines(True), release.splitlines(True)), BASE.splitlines(True),
        release.splitlines(True)) == {}


def git_diff(before: str, after: str) -> str:
    import difflib
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{PATH}", f"b/{PATH}"))


def test_a_release_that_has_the_fix_already_is_already_applied_with_the_pre_image_at_hand(tmp_path):
    """The fix itself on the release (its lines changed in place as the diff changes them): no edit to make,
    not a change merged into itself."""
    repo, patch = branches(tmp_path, RELEASE.replace(*FIX[::1]).replace("        data = read(path, retries=3)\n"
                                                                         "        if data is None:\n",
                                                                         "        data = read(path, retries=3)\n"
                                                                         "        if not data:\n", 1))
    result = port(patch, repo)
    assert result["status"] == "already-applied", result


@pytest.mark.parametrize("seed", range(30))
def test_the_alignment_pairs_equal_lines_in_order_and_keeps_every_unique_common_line(seed):
    """aligned() (patience anchors, difflib between them): every pair is two equal lines, both sides in
    increasing order; a line found once in each file and in the same order as the rest is paired; where one
    side is the other with lines inserted, every line of the shorter is paired."""
    import random
    rng = random.Random(seed)
    pool = [f"    line{n}\n" for n in range(rng.randint(2, 40))] + ["\n", "    )\n", "    return x\n"]
    pre = [rng.choice(pool) for _ in range(rng.randint(0, 200))]
    target = list(pre)
    for _ in range(rng.randint(0, 12)):
        at = rng.randint(0, len(target))
        if rng.random() < 0.2 and len(target) > 4:  # a block moved elsewhere
            start = rng.randrange(len(target) - 2)
            block = target[start:start + rng.randint(1, 3)]
            del target[start:start + len(block)]
            target[at % (len(target) + 1):at % (len(target) + 1)] = block
        elif rng.random() < 0.5 and target:
            del target[min(at, len(target) - 1)]
        else:
            target.insert(at, rng.choice(pool + [f"    new{rng.random()}\n"]))
    pairs = sorted(three_way.aligned(pre, target).items())
    assert all(pre[a] == target[b] for a, b in pairs)
    assert all(a2 > a1 and b2 > b1 for (a1, b1), (a2, b2) in zip(pairs, pairs[1:]))
    grown = list(pre)
    for _ in range(rng.randint(1, 12)):
        grown.insert(rng.randint(0, len(grown)), rng.choice(pool))
    assert sorted(three_way.aligned(pre, grown)) == list(range(len(pre)))  # nothing of pre left out


def test_the_alignment_anchors_on_lines_found_once_not_on_the_longest_run_of_common_ones():
    """A def moved down past a block of blank and bracket lines: the unique lines (the defs' own) decide,
    not the runs of lines every def has."""
    common = ["\n", "    )\n", "\n"]
    pre = ["def a():\n", "    return 1\n", *common, "def b():\n", "    return 2\n", *common]
    target = ["def b():\n", "    return 2\n", *common, "def a():\n", "    return 1\n", *common]
    pairs = three_way.aligned(pre, target)
    assert all(pre[a] == target[b] for a, b in pairs.items())
    ordered = sorted(pairs.items())
    assert all(a2 > a1 and b2 > b1 for (a1, b1), (a2, b2) in zip(ordered, ordered[1:]))
    assert pairs.get(0) == 5 or pairs.get(5) == 0  # one of the two defs is paired with itself, its lines together
    assert (pairs.get(0) == 5) == (pairs.get(1) == 6) and (pairs.get(5) == 0) == (pairs.get(6) == 1)


LOADING = ("import os\nimport sys\n\nfrom .io import read\n\nLIMIT = 10\nNAME = 'loader'\nMODE = 'rb'\n\n\n"
          "def load(path):\n    data = read(path)\n    if data is None:\n        return None\n    return data\n\n\n"
          "def other(x):\n    return x + 1\n")
LOADING_FIX = LOADING.replace("import sys\n", "import sys\nimport json\n").replace(
    "    if data is None:\n", "    if not data:\n")


IMPORTS, JOINED = "import os\nimport sys\n\nfrom .io import read\n", "import os\nimport sys\nfrom .io import read\n"


@pytest.mark.parametrize("release, right", [
    # its imports' blank line gone: the code hunk through the pre-image, the import among the imports by its text
    (LOADING.replace(IMPORTS, JOINED), LOADING_FIX.replace("import json\n\nfrom", "import json\nfrom")),
    # and the line the code hunk edits changed by the release where the fix edits it: refused, the import
    # hunk alone not placed either (half a diff)
    (LOADING.replace(IMPORTS, JOINED).replace("    if data is None:\n", "    if data is None or data == b'':\n"), None),
])
def test_with_the_pre_image_only_one_line_imports_are_placed_by_their_text(release, right):
    from fixmono.engines.port import DiffTransform
    from fixmono.model.errors import TransformFailed

    try:
        done = DiffTransform("m.py", hunks_between(LOADING, LOADING_FIX)).rewrite(release, pre_image=LOADING)
    except TransformFailed as err:
        assert right is None, err
        assert "differ here from its pre-image" in str(err)  # (the evidence, after the ladder's own reason)
        return
    assert done.source == right and done.evidence.endswith("its one-line imports by their text")


SPLIT = ("class Mapped:\n    def __iter__(self):\n        yield from self._iter()\n\n    def _iter(self):\n"
         "        for key, batch in self.source:\n            out = self.fn(batch)\n            yield key, out\n")
UNSPLIT = ("class Mapped:\n    def __iter__(self):\n        for key, batch in self.source:\n            out = self.fn(batch)\n"
           "            yield key, out\n")
TWO = ("class Eager:\n    def step(self, batch):\n        out = self.fn(batch)\n        return out\n\n\n"
       "class Lazy:\n    def step(self, batch):\n        out = self.fn(batch)\n        return out\n")
CHAIN_CASES = {  # name: (pre-image, the diff's (old, new), release, placed)
    "a loop main split out of __iter__ into _iter, still in the release's __iter__": (
        SPLIT, ("            out = self.fn(batch)\n", "            out = self.fn(batch, key)\n"), UNSPLIT, True),
    "a method of one of two classes of one text the release swapped": (
        TWO, ("class Eager:\n    def step(self, batch):\n        out = self.fn(batch)\n",
              "class Eager:\n    def step(self, batch):\n        out = self.fn(batch).detach()\n"),
        "\n\n\n".join(reversed(TWO.rstrip("\n").split("\n\n\n"))) + "\n", False),
}


@pytest.mark.parametrize("case", CHAIN_CASES)
def test_every_header_around_a_change_is_judged_by_the_alignment(case):
    """The blocks around a change are judged up to the top level: a method of the other class of one text is
    not the method (the class header the alignment paired line for line is another class's); a def the
    release lacks around the change's own block may be the release's def still holding its lines (main split
    `_iter` out of `__iter__`: the release's `__iter__` is where the change goes)."""
    from fixmono.engines.structure import PYTHON, Headers

    pre, (old, new), release, placed = CHAIN_CASES[case]
    lines, theirs = pre.splitlines(True), release.splitlines(True)
    found = three_way.placements(lines, theirs, hunks_between(pre, pre.replace(old, new), "m.py"),
                                 Headers(lines, theirs, PYTHON))
    if placed:
        (start, stop, replacement, _, _), = found
        assert "".join(theirs[:start] + replacement + theirs[stop:]) == release.replace(old, new)
    else:
        assert found is None or isinstance(found, three_way.Conflict)


INIT = ("class Loader:\n    def __init__(self, path):\n        self.path = path\n        self.size = 0\n"
        "        self.cache = {}\n        self.hits = 0\n        self.open()\n")
INIT_RELEASE = INIT.replace("        self.cache = {}\n        self.hits = 0\n", "")  # main added two lines since
ROWS = "def rows(path, strict):\n    fh = open(path)\n    if strict:\n        check(fh)\n    data = fh.read()\n    return data\n"
ROWS_RELEASE = ROWS.replace("    if strict:\n        check(fh)\n", "")  # no strict mode in the release
TWO = "import os\n\n\ndef first():\n    a = 1\n    return a\n\n\ndef second():\n    b = 2\n    return b\n\n\ndef third():\n    return 3\n"
LACKING_CASES = {  # name: (pre-image, post-image, release, the right answer or None: refused)
    "the lines below the insertion are new in main": (
        INIT, INIT.replace("        self.size = 0\n", "        self.size = 0\n        self.mode = 'r'\n"), INIT_RELEASE,
        INIT_RELEASE.replace("        self.size = 0\n", "        self.size = 0\n        self.mode = 'r'\n")),
    "the lines above the insertion are new in main": (
        INIT, INIT.replace("        self.open()\n", "        self.mode = 'r'\n        self.open()\n"), INIT_RELEASE,
        INIT_RELEASE.replace("        self.open()\n", "        self.mode = 'r'\n        self.open()\n")),
    "a line after a block the release lacks (its neighbour above is in that block)": (
        ROWS, ROWS.replace("        check(fh)\n", "        check(fh)\n    fh.seek(0)\n"), ROWS_RELEASE, None),
    "a line inside the block the release lacks": (
        ROWS, ROWS.replace("        check(fh)\n", "        check(fh)\n        fh.seek(0)\n"), ROWS_RELEASE, None),
    "a line in a def the release lacks, after the def above it": (
        TWO, TWO.replace("    b = 2\n", "    b = 2\n    print(b)\n"), TWO.replace(TWO[TWO.index("def second"):
                                                                                     TWO.index("def third")], ""), None),
    "a line that reads an attribute the lines the release lacks set": (
        INIT, INIT.replace("        self.cache = {}\n", "        self.cache = {}\n        self.warm = len(self.cache)\n"),
        INIT.replace("        self.cache = {}\n", ""), None),
    "a line that reads what the lines the release lacks set": (
        ROWS, ROWS.replace("        check(fh)\n", "        check(fh)\n    print(strict_mode)\n").replace(
            "    if strict:\n", "    strict_mode = strict\n    if strict:\n"), ROWS_RELEASE, None),
}
MOVED = INIT_RELEASE.replace("        self.path = path\n", "        self.cache = {}\n        self.path = path\n")
REWORDED = INIT_RELEASE.replace("        self.open()\n", "        self.cache = dict()\n        self.open()\n")


@pytest.mark.parametrize("case", LACKING_CASES)
def test_an_insertion_beside_lines_the_release_lacks_goes_next_to_its_other_neighbour(case):
    """The release lacks the pre-image's lines on one side of the lines a diff adds (main added them since,
    or the release deleted them) and has nothing in their stead: the added lines go beside the neighbour
    it has, where that is the same block; refused where a lacking line stands elsewhere in the release
    (moved: their order to it is unknown), or the added lines belong in a block the release lacks."""
    pre, post, release, right = LACKING_CASES[case]
    assert ported("m.py", pre, post, release, with_pre_image=True) == right
    if case.startswith("the lines"):
        assert three_way.placements(pre.splitlines(True), release.splitlines(True), hunks_between(pre, post))
        # a line it lacks moved elsewhere, or moved and reworded: the alignment places nothing (the hunks judge it)
        for moved in (MOVED, REWORDED):
            assert three_way.placements(pre.splitlines(True), moved.splitlines(True), hunks_between(pre, post)) is None


def test_a_decorator_holds_its_own_arguments_only():
    """three_way.decorator_head: a line inside a decorator's arguments written over lines is in it; a line at
    the top level, or below a method whose docstring leaves a bracket open, is in none (a blank line added
    before the next class was taken for a change of `@staticmethod`'s arguments: TE attention.py on v0.12)."""
    lines = ["class Combine(Function):\n", "    @staticmethod\n", "    def backward(ctx, grad):\n",
             '        """The gradients\n', "        (one per input, as forward takes them.\n", '        """\n',
             "        return grad\n", "\n", "class Next:\n", "    @pytest.mark.parametrize(\n", '        "dtype",\n',
             "        [torch.half],\n", "    )\n", "    def test(self, dtype):\n", "        pass\n"]
    assert three_way.decorator_head(lines, 1) == 1
    assert [three_way.decorator_head(lines, n) for n in (10, 11, 12)] == [9, 9, 9]
    assert [three_way.decorator_head(lines, n) for n in (6, 7, 8, 14)] == [None, None, None, None]
