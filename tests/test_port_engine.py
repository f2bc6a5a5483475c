"""The port engine (engines/port.py) on generated Python files whose right
answer is known: each file is a structure (classes, functions, statements)
rendered as text; an edit is made to one function and turned into a diff by
`git diff --no-index`; the target is the same structure changed the way
releases change (functions moved, a class around them, a function added
above, a context line changed, the same body in two classes). The truth is
the edit made to the changed structure. For every case:
- where `git apply` applies it rightly, the engine's text is byte-identical to
  it (git apply also puts hunks in the wrong class: the same lines in another
  class, when the right one's context changed; counted, not copied);
- the engine's answer is the truth, or `failed`/`not-applicable`: never
  other text (a misplaced hunk counts as a failure of this test);
- applying the result again is `already-applied`.
Our own generated text; no upstream code."""
from __future__ import annotations

import random
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from fixmono.apply.contract import apply_change
from fixmono.engines.port import diff_fix
from fixmono.model.outcome import Status
from fixmono.model.patchfile import parse_patch

SEEDS = range(240)


@dataclass
class Func:
    name: str
    body: list[str]
    args: str = "x"


@dataclass
class Klass:
    name: str | None  # None: module level
    funcs: list[Func] = field(default_factory=list)


def render(module: list[Klass], header: str = "import os\n") -> str:
    out = [header]
    for klass in module:
        pad = "    " if klass.name else ""
        if klass.name:
            out.append(f"\n\nclass {klass.name}:\n")
        for n, func in enumerate(klass.funcs):
            out.append("\n" if klass.name and n else "\n\n" if not klass.name else "")
            self_arg = "self, " if klass.name else ""
            out.append(f"{pad}def {func.name}({self_arg}{func.args}):\n")
            out += [f"{pad}    {line}\n" for line in func.body]
    return "".join(out)


def make_module(rng: random.Random) -> list[Klass]:
    shared = [f"y = x + {rng.randint(0, 3)}", "z = y * 2", "return z"]  # the same body in two places
    module = []
    for c in range(rng.randint(1, 3)):
        funcs = []
        for f in range(rng.randint(2, 4)):
            body = [f"v{k} = x * {rng.randint(1, 9)}" for k in range(rng.randint(2, 6))] + ["return v0"]
            funcs.append(Func(f"f{c}{f}", body))
        funcs.append(Func("foo", list(shared)))
        module.append(Klass(f"C{c}" if c or rng.random() < 0.6 else None, funcs))
    return module


def copy(module: list[Klass]) -> list[Klass]:
    return [Klass(k.name, [replace(f, body=list(f.body)) for f in k.funcs]) for k in module]


def edit(module: list[Klass], rng: random.Random) -> tuple[int, int, str, str]:
    """Where and what: (class index, function index, kind, new line)."""
    c = rng.randrange(len(module))
    f = rng.randrange(len(module[c].funcs))
    kind = rng.choice(["replace", "insert", "delete", "insert-two"])
    return c, f, kind, f"w = x - {rng.randint(10, 99)}"


def edited(module: list[Klass], change) -> list[Klass]:
    c, f, kind, line = change
    out = copy(module)
    body = out[c].funcs[f].body
    at = min(1, len(body) - 1)
    if kind == "replace":
        body[at] = line
    elif kind == "insert":
        body.insert(at + 1, line)
    elif kind == "delete" and len(body) > 2:
        del body[at]
    else:
        body[at + 1:at + 1] = [line, line.replace("w =", "u =")]
    return out


VARIANTS = ["same", "function-above", "moved", "wrapped-in-class", "context-changed", "class-grew"]


def variant(module: list[Klass], name: str, change) -> list[Klass]:
    """The same change to the structure a later or earlier release has."""
    c, f, _, _ = change
    out = copy(module)
    if name == "function-above":
        out[0].funcs.insert(0, Func("added_above", ["a = 1", "return a"]))
    elif name == "moved":
        out[c].funcs.append(out[c].funcs.pop(f))
    elif name == "wrapped-in-class" and out[c].name is None:
        out[c].name = "Wrapper"
    elif name == "context-changed":
        body = out[c].funcs[f].body
        body[0] = body[0] + "  # tuned"
        body[:] = [line.replace("x *", "x **") if line.startswith("v3 =") else line for line in body]
    elif name == "class-grew":
        out[c].funcs.insert(max(f - 1, 0), Func("grown", ["g = 2", "return g"]))
    return out


def git_diff(a: str, b: str, tmp: Path, python_driver: bool = False) -> str:
    """`git diff` of two texts; `python_driver`: its section headers as git writes them
    with `*.py diff=python` (the nearest def/class line above, not only unindented ones)."""
    (tmp / "a").mkdir(exist_ok=True)
    (tmp / "b").mkdir(exist_ok=True)
    (tmp / "a" / "m.py").write_text(a)
    (tmp / "b" / "m.py").write_text(b)
    if python_driver and not (tmp / ".git").exists():
        subprocess.run(["git", "init", "-q"], cwd=tmp, check=True)
        (tmp / ".gitattributes").write_text("*.py diff=python\n")
    proc = subprocess.run(["git", "diff", "--no-index", "--no-color", "a/m.py", "b/m.py"], cwd=tmp,
                          capture_output=True, text=True)
    return proc.stdout.replace("a/a/m.py", "a/m.py").replace("b/b/m.py", "b/m.py")


def git_apply(diff: str, target: str, tmp: Path) -> str | None:
    work = tmp / "apply"
    work.mkdir(exist_ok=True)
    (work / "m.py").write_text(target)
    proc = subprocess.run(["git", "apply", "-"], cwd=work, input=diff, capture_output=True, text=True)
    return (work / "m.py").read_text() if proc.returncode == 0 else None


def outcome(diff: str, target: str):
    fix = diff_fix(parse_patch(diff, "generated.patch"), "pytorch", "generated")
    (change,) = fix.changes
    return change, apply_change(change, target)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_cases(seed, tmp_path):
    rng = random.Random(seed)
    base = make_module(rng)
    change = edit(base, rng)
    diff = git_diff(render(base), render(edited(base, change)), tmp_path)
    if not diff:
        pytest.skip("the edit changed nothing")
    for name in VARIANTS:
        target, truth = render(variant(base, name, change)), render(variant(edited(base, change), name, change))
        by_git = git_apply(diff, target, tmp_path)
        change_, result = outcome(diff, target)
        if by_git == truth:  # git apply placed it right: the same bytes
            assert result.status is Status.APPLIED and result.new_text == by_git, (name, result.detail)
        if result.status is Status.APPLIED:
            assert result.new_text == truth, f"{name}: misplaced or wrong\n{diff}\n{result.new_text}"
            assert applied_or_a_copy_left(apply_change(change_, result.new_text))
        else:
            assert result.status in (Status.FAILED, Status.NOT_APPLICABLE), result
        presence = apply_change(change_, truth)
        if name == "same":  # the diff's own post-image
            assert applied_or_a_copy_left(presence), (diff, truth)
        else:  # or, where the same lines are in two places the diff cannot tell apart, failed: never a guess
            assert presence.status in (Status.ALREADY_APPLIED, Status.FAILED), (name, diff, truth)


def applied_or_a_copy_left(outcome) -> bool:
    """Already applied; or, from the hunks alone, a line the diff removes still stands in the same def (a
    copy the pre-image had too, or the release moved it there: which, only the pre-image tells): refused."""
    return outcome.status is Status.ALREADY_APPLIED or \
        outcome.status is Status.FAILED and "stands in the same scope (moved there?)" in outcome.detail


def test_what_the_engine_places_over_the_generated_cases(tmp_path):
    """The counts behind the README's line, and at least as many as git apply places."""
    counts = {"git": 0, "git misplaced": 0, "engine": 0, "cases": 0}
    for seed in SEEDS:
        rng = random.Random(seed)
        base = make_module(rng)
        change = edit(base, rng)
        diff = git_diff(render(base), render(edited(base, change)), tmp_path)
        if not diff:
            continue
        for name in VARIANTS:
            target, truth = render(variant(base, name, change)), render(variant(edited(base, change), name, change))
            by_git = git_apply(diff, target, tmp_path)
            counts["cases"] += 1
            counts["git"] += by_git == truth
            counts["git misplaced"] += by_git not in (None, truth)
            counts["engine"] += outcome(diff, target)[1].status is Status.APPLIED
    print(f"\n{counts['cases']} cases: git apply right {counts['git']}, misplaced {counts['git misplaced']}; "
          f"port engine right {counts['engine']}, misplaced 0 (test_generated_cases)")
    assert counts["engine"] >= counts["git"]


NAMES_BASE = """import os

LIMIT = 3


class Model:
    scale = 2

    def forward(self, x):
        y = x + 1
        return y

    def other(self, width):
        return width
"""


@pytest.mark.parametrize("added, ok", [
    ("        y = y + os.sep.count('/') + LIMIT\n", True),  # module names and the function's own
    ("        z = y * 2\n        y = z\n", True),  # bound by an added line above
    ("        y = sum(int(c) for c in str(y) if c)\n", True),  # a comprehension's variable, on the same line
    ("        y = y + width\n", False),  # bound only in another method
    ("        y = y * scale\n", False),  # a class attribute is not seen from a method
    ("        total = total + y\n", False),  # x = f(x) where no x exists
    ("        y = helper(y)\n", False),  # nowhere
])
def test_the_added_lines_names_must_be_bound_where_they_go(tmp_path, added, ok):
    after = NAMES_BASE.replace("        y = x + 1\n", "        y = x + 1\n" + added)
    diff = git_diff(NAMES_BASE, after, tmp_path)
    change, result = outcome(diff, NAMES_BASE)
    if ok:
        assert result.status is Status.APPLIED and result.new_text == after, result.detail
    else:
        assert result.status is Status.FAILED and "not defined where they go" in result.detail, result.detail


LOST = '''import os
import sys

LIMIT = 3


def first():
    return LIMIT


def middle():
    return 0


def far_away(path):
    return os.path.join(path, "x")


def opened(
    path,
    mode,
):
    full = path
    full = full.strip()
    full = full.lower()
    full = full.upper()
    full = full.strip()
    return open(full, mode)
''' + "".join(f"\n\ndef filler{n}():\n    return {n}\n" for n in range(12))


@pytest.mark.parametrize("edit, lost", [
    (("import os\n", ""), "os"),  # read in a function the diff neither shows nor changes
    (("LIMIT = 3\n", ""), "LIMIT"),  # read in the function the hunk shows
    (("import sys\n", ""), None),  # read nowhere: the removal is fine
    (("    return 0\n", "    return 1\n"), None),  # no binding removed
    (("    mode,\n", ""), "mode"),  # an argument of a signature over lines, read further down its def
])
def test_a_binding_the_diff_removes_must_not_be_read_elsewhere(tmp_path, edit, lost):
    """Reads outside the hunks are checked where the diff removes a binding: every def whose text names
    what the removed lines may bind is walked, far from the hunks too (the defs the check leaves out name
    none of them)."""
    after = LOST.replace(*edit, 1)
    change, result = outcome(git_diff(LOST, after, tmp_path), LOST)
    if lost is None:
        assert result.status is Status.APPLIED and result.new_text == after, result.detail
    else:
        assert result.status is Status.FAILED and f"`{lost}` is read" in result.detail, result.detail


FAR = """import os

STEP = 2
WIDTH = 4


def near():
    return 0
""" + "".join(f"\n\ndef filler{n}():\n    return {n}\n" for n in range(12)) + """

def stepped(STEP=STEP):
    return STEP


def own(WIDTH):
    return WIDTH * 2


def counted(items):
    if (n := len(items)):
        return n
    return 0
"""


@pytest.mark.parametrize("edit, lost", [
    (("STEP = 2\n", ""), "STEP"),  # a default far below reads it where the def is defined, not in the def
    (("WIDTH = 4\n", ""), None),  # a def far below reads only its own argument of that name
])
def test_a_removed_binding_is_looked_for_in_defaults_not_in_a_defs_own_arguments(tmp_path, edit, lost):
    """The defs check_result leaves out: one whose body names a removed binding only as its own argument
    (every read there is bound); never one whose decorators or defaults read it (they are read outside)."""
    after = FAR.replace(*edit)
    change, result = outcome(git_diff(FAR, after, tmp_path), FAR)
    if lost is None:
        assert result.status is Status.APPLIED and result.new_text == after, result.detail
    else:
        assert result.status is Status.FAILED and f"`{lost}` is read" in result.detail, result.detail


@pytest.mark.parametrize("added, ok", [
    ("        total = n + 1\n", True),  # `n` bound by `:=` on the unchanged line above
    ("        total = m + 1\n", False),
    ("        total = sum(k for k in items) + k\n", True),  # a comprehension's name: taken as bound (lenient)
])
def test_a_walrus_on_an_unchanged_line_binds_for_the_added_lines(tmp_path, added, ok):
    """The names of a scope are read from its statements' targets and from the expressions that hold
    `:=` or a comprehension (the others bind nothing and are not walked): the walrus is still found."""
    after = FAR.replace("        return n\n", added + "        return total\n")
    change, result = outcome(git_diff(FAR, after, tmp_path), FAR)
    if ok:
        assert result.status is Status.APPLIED and result.new_text == after, result.detail
    else:
        assert result.status is Status.FAILED and "`m`" in result.detail, result.detail


@pytest.mark.parametrize("signature, ok", [
    ("    def other(self, width: int) -> int:\n", True),  # builtins
    ("    def other(self, width: os.PathLike) -> int:\n", True),  # an import of the module
    ("    def other(self, width: PathLike) -> int:\n", False),  # datasets 27ea8e8ead onto 2.18: never imported there
    ("    def other(self, width) -> PathLike:\n", False),  # a return annotation too
])
def test_a_signatures_annotations_are_read_where_the_function_is_defined(tmp_path, signature, ok):
    after = NAMES_BASE.replace("    def other(self, width):\n", signature)
    change, result = outcome(git_diff(NAMES_BASE, after, tmp_path), NAMES_BASE)
    if ok:
        assert result.status is Status.APPLIED and result.new_text == after, result.detail
    else:
        assert result.status is Status.FAILED and "`PathLike`" in result.detail, result.detail


def test_a_function_the_target_already_defines_elsewhere_is_not_added_twice():
    """The diff adds a method after `first`; the target already has it, moved below
    `second` and reformatted: adding it again would silently replace it."""
    from fixmono.apply.contract import apply_change
    from fixmono.engines.port import diff_fix
    from fixmono.model.patchfile import parse_patch

    before = "class A:\n    def first(self):\n        return 1\n\n    def second(self):\n        return 2\n"
    diff = ("--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1,5 +1,8 @@ class A:\n class A:\n     def first(self):\n"
            "         return 1\n \n+    def helper(self):\n+        return 3\n+\n     def second(self):\n")
    (change,) = diff_fix(parse_patch(diff, "helper.patch"), "pytorch", "helper").changes
    assert apply_change(change, before).new_text == before.replace("    def second", "    def helper(self):\n"
                                                                   "        return 3\n\n    def second")
    moved = before + "\n    def helper(self):\n        return 3  # moved here\n"
    outcome = apply_change(change, moved)
    assert outcome.status.value == "failed" and "already defined" in outcome.detail, outcome.detail
    setter = ("class A:\n    @property\n    def first(self):\n        return 1\n\n    def second(self):\n"
              "        return 2\n")
    prop = ("--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -3,4 +3,8 @@ class A:\n     def first(self):\n         return 1\n \n"
            "+    @first.setter\n+    def first(self, value):\n+        pass\n+\n     def second(self):\n")
    (change,) = diff_fix(parse_patch(prop, "setter.patch"), "pytorch", "setter").changes
    assert apply_change(change, setter).status.value == "applied"  # a setter is not a second definition


# Found by tools/bench_backports.py on real backports (the commits named); each made here from our own text.
def tuple_returns(n: int, extra: str = "") -> str:
    nones = "        None,\n" * 5
    return "".join(f"def backward_{i}(ctx, grad):\n    return (\n        grad,\n{nones}{extra}    )\n\n\n"
                   for i in range(n))


def test_the_same_edit_in_several_places_is_made_in_each(tmp_path):
    """TE release_v0.8 (d3d7ed2c89): `None,` added to three identical return tuples.
    Each hunk's post-image must not be judged by the lines an earlier hunk wrote."""
    before = tuple_returns(3)
    after = tuple_returns(3, "        None,\n")
    diff = git_diff(before, after, tmp_path)
    assert diff.count("\n@@ -") == 3
    _, result = outcome(diff, before)  # each at the line it names: as git apply does
    assert result.status is Status.APPLIED and result.new_text == after == git_apply(diff, before, tmp_path), \
        result.detail
    for moved in ("import torch\n\n\n" + before, "import torch\n\n\n" + after):
        # the added `None,` is like its neighbours: with and without it the file shows the diff's lines
        # alike; where the named line moved, that is failed, never a guess either way
        _, result = outcome(diff, moved)
        assert result.status is Status.FAILED and "cannot tell" in result.detail, result.detail


def test_a_later_hunk_finds_a_function_an_earlier_hunk_renamed(tmp_path):
    """TE 7d6c1d02dd: hunk 1 renames the def, hunk 2's header names the old name."""
    body = "".join(f"    v{i} = x + {i}\n" for i in range(12))
    before = f"def split(x):\n{body}    return v11\n"
    after = before.replace("def split(x):", "def split_last(x):").replace("return v11", "return v11 * 2")
    diff = git_diff(before, after, tmp_path)
    assert "@@ def split(x):" in diff
    _, result = outcome(diff, "import os\n\n\n" + before)
    assert result.status is Status.APPLIED and result.new_text == "import os\n\n\n" + after, result.detail


def test_a_later_hunks_header_may_name_a_def_an_earlier_hunk_removed(tmp_path):
    """TE 427c736dfc: hunk 1 folds `helper` into `first` (its def line goes);
    hunk 2's header still names `helper`, git took it from the pre-image."""
    v = "".join(f"    v{i} = x + {i}\n" for i in range(12))
    w = "".join(f"    w{i} = x - {i}\n" for i in range(12))
    before = f"def first(x):\n{v}    return v11\n\n\ndef helper(x):\n{w}    return w11\n\n\ndef old_name(x):\n    return x\n"
    after = f"def first(x):\n{v}{w}    return w11\n\n\ndef new_name(x):\n    return x\n"
    diff = git_diff(before, after, tmp_path)
    assert diff.count("\n@@ -") == 2 and "@@ def helper(x):" in diff, diff
    target = "import os\n\n\n" + before
    _, result = outcome(diff, target)
    assert result.status is Status.APPLIED and result.new_text == "import os\n\n\n" + after, result.detail
    assert result.new_text == git_apply(diff, target, tmp_path)


def test_a_header_line_inside_a_string_is_no_scope(tmp_path):
    """datasets 74d60213dc: git's header is the nearest unindented line above,
    here a `class` line inside a string that holds a script."""
    body = "".join(f"        x{i} = {i}\n" for i in range(10))
    before = f'import os\n\nSCRIPT = """\nclass Dummy(Base):\n    def info(self):\n{body}        return x9\n"""\n'
    after = before.replace("return x9", "return x0")
    diff = git_diff(before, after, tmp_path)
    assert "@@ class Dummy(Base):" in diff, diff
    target = "import sys\n" + before
    _, result = outcome(diff, target)
    assert result.status is Status.APPLIED and result.new_text == "import sys\n" + after, result.detail
    assert result.new_text == git_apply(diff, target, tmp_path)


def test_lines_that_fit_several_places_go_where_the_hunk_before_sat(tmp_path):
    """huggingface_hub 316db10b2f: a docstring line three methods share; the
    release is some lines off the diff's: git apply looks first at the named
    line shifted as the hunk before it was, so does the engine (still inside its scope)."""
    doc = '        """Do it.\n\n        Args:\n            a: one\n            b: two\n            repo: the repo\n' \
          '            c: three\n            d: four\n        """\n'
    methods = "".join(f"    def m{i}(self):\n{doc}        return {i}\n\n" for i in range(3))
    before = f'import os\nimport re\nimport sys\n\nX = 1\nY = 2\nZ = 3\n\n\nclass Api:\n{methods}'
    lines = before.splitlines(keepends=True)
    second = [i for i, line in enumerate(lines) if "repo: the repo" in line][1]
    lines[second] = lines[second].replace("the repo", "the repository id")
    diff = git_diff(before, "".join(lines).replace("Y = 2\n", "Y = 20\n"), tmp_path)
    assert diff.count("\n@@ -") == 2, diff
    target = "# a release some lines longer\n" * 5 + before
    _, result = outcome(diff, target)
    expected = git_apply(diff, target, tmp_path)
    assert expected is not None and expected.count("the repository id") == 1
    assert result.status is Status.APPLIED and result.new_text == expected, result.detail
    assert result.new_text.splitlines()[5 + second] == "            repo: the repository id"


def test_a_top_level_hunk_may_drop_context_but_stays_at_the_top_level(tmp_path):
    """TE 23f4864dbd onto v0.8: an import removed, the context below it differs
    in the release. The module is its scope: context may be trimmed (as patch
    --fuzz does) only to a place whose changed line is unindented too."""
    head = "import jax\nimport numpy as np\nimport pytest\n"
    before = f"{head}from jax.experimental import maps\n\nfrom utils import enough\nfrom te import rules\n\n\nX = 1\n"
    after = before.replace("from jax.experimental import maps\n", "")
    diff = git_diff(before, after, tmp_path)
    release = f"# the release\n{head}from jax.experimental import maps\n\nfrom te import rules, other\n\n\nX = 1\n"
    _, result = outcome(diff, release)
    assert git_apply(diff, release, tmp_path) is None  # its context is not there as it was
    assert result.status is Status.APPLIED and result.new_text == release.replace("from jax.experimental import maps\n", ""), \
        result.detail
    indented = ("def load():\n" + "".join("    " + line + "\n" for line in (head + "from jax.experimental import maps").splitlines())
                + "    return maps\n\n\nX = 1\n")
    _, result = outcome(diff, "# the release\n" + indented)  # the same lines only inside a function: never there
    assert result.status is not Status.APPLIED, result.detail


def signature_methods(names: list[str], kind: str = "Callable") -> str:
    params = "".join(f"        p{i}: bool = False,\n" for i in range(4))
    return "".join(f"    def {n}(\n        self,\n{params}        reduce: Union[str, {kind}] = 'mean',\n{params}"
                   f"    ) -> None:\n        pass\n\n" for n in names)


@pytest.mark.parametrize("places", [2, 3])
def test_the_same_edit_in_as_many_places_as_hunks_goes_one_to_each_in_order(tmp_path, places):
    """Lightning 46874dfa06 onto 2.2.5: one parameter's annotation changed in
    two methods' signatures (two hunks with the same lines), the release some
    lines off: two places, two hunks, one each in order; a third place is
    one too many to tell (failed)."""
    head = "from typing import Any, Callable, Union\n\n\nclass Module:\n"
    before = head + signature_methods(["log", "log_dict"])
    after = head + signature_methods(["log", "log_dict"], "Callable[[Any], Any]")
    diff = git_diff(before, after, tmp_path)
    assert diff.count("\n@@ -") == 2, diff
    names = ["log", "log_dict"] if places == 2 else ["log", "log_all", "log_dict"]
    release = "# the release\n" * 4 + head + signature_methods(names[:1]) + "    x = 1\n\n" + signature_methods(names[1:])
    _, result = outcome(diff, release)
    if places == 3:
        assert result.status is Status.FAILED and "3 places" in result.detail, result.detail
        return
    assert result.status is Status.APPLIED, result.detail
    assert result.new_text == release.replace("Union[str, Callable]", "Union[str, Callable[[Any], Any]]")
    assert result.new_text == git_apply(diff, release, tmp_path)


def test_a_module_level_statement_is_its_hunks_scope_when_context_is_dropped(tmp_path):
    """datasets 0f8c580024 onto 2.11.0: a pin changed inside `REQUIRED_PKGS = [`,
    its neighbours differ in the release; git's header names the statement. With
    context dropped, the place must be under that same statement (`EXTRAS = [`
    holds the same line: never there)."""
    def entries(name: str, n: int) -> str:
        return "".join(f'    "{name}{i}>=1.{i}",\n' for i in range(n))

    before = f'import os\n\nREQUIRED_PKGS = [\n{entries("pkg", 8)}    "fsspec>=2021.11",\n{entries("pkg", 8)}]\n\nX = 1\n'
    after = before.replace('"fsspec>=2021.11"', '"fsspec[http]>=2021.11"')
    diff = git_diff(before, after, tmp_path)
    assert "@@ REQUIRED_PKGS = [" in diff, diff
    extras = f'EXTRAS = [\n{entries("other", 2)}    "fsspec>=2021.11",\n]\n\n'
    required = f'REQUIRED_PKGS = [\n{entries("pkg", 3)}    "fsspec>=2021.11",\n{entries("new", 4)}]\n\n'
    release = f"import os\n\n{extras}{required}X = 1\n"
    _, result = outcome(diff, release)
    assert result.status is Status.APPLIED, result.detail
    assert result.new_text == f"import os\n\n{extras}{required.replace('fsspec>=', 'fsspec[http]>=')}X = 1\n"
    _, result = outcome(diff, f"import os\n\n{extras}X = 1\n")  # only the other list holds the line: not there
    assert result.status is not Status.APPLIED, result.detail


def test_lines_added_at_the_end_of_a_file_are_found_applied(tmp_path):
    """The catalogue's pin-moe-routing patch on transformers 5.23/5.24: a class
    added at the end of the file, the hunk's only context above it. Applied,
    its context is still there unchanged at the named line: the post-image
    holding it there is the sign it is applied (git apply would add it twice)."""
    before = "import os\n\n\ndef wrap(x):\n    return x\n"
    after = before + "\n\nclass Pinned:\n    pass\n"
    diff = git_diff(before, after, tmp_path)
    for text in (before, "import sys\n" + before):
        _, result = outcome(diff, text)
        assert result.status is Status.APPLIED and result.new_text.endswith(after), result.detail
        _, again = outcome(diff, result.new_text)
        assert again.status is Status.ALREADY_APPLIED, again.detail


def test_an_import_added_among_other_imports_of_another_release(tmp_path):
    """TE 57b4d7bc03 onto v2.5, datasets ead089d949 onto 2.18: a one-line import
    changed where the release's neighbouring imports (and so git's header, the
    import above) differ. Imports only: their place is the module's imports,
    unindented; an import inside a function or a try is never the place."""
    before = "import os\nimport sys\nfrom functools import reduce\nfrom jax import dtypes\nimport numpy as np\n\n\nX = 1\n"
    after = before.replace("from jax import dtypes\n", "from jax import dtypes, ffi\n")
    diff = git_diff(before, after, tmp_path)
    release = "import os\nfrom functools import reduce, partial\nfrom jax import dtypes\nimport jax.numpy as jnp\n\n\nX = 1\n"
    _, result = outcome(diff, release)
    assert git_apply(diff, release, tmp_path) is None
    assert result.status is Status.APPLIED and result.new_text == release.replace("dtypes\n", "dtypes, ffi\n"), \
        result.detail
    inside = "import os\n\n\ndef load():\n    from functools import reduce, partial\n    from jax import dtypes\n" \
             "    import jax.numpy as jnp\n    return dtypes\n"
    _, result = outcome(diff, inside)
    assert result.status is not Status.APPLIED, result.detail


def test_a_file_half_rewritten_need_not_parse(tmp_path):
    """TE 5f1eaffde8: hunk 1 opens a `try:` that hunk 2 closes."""
    middle = "".join(f"        print({i})\n" for i in range(10))
    before = f"def run(flag):\n    print('start')\n    if flag:\n{middle}    print('stop')\n"
    after = before.replace("    if flag:\n", "    try:\n").replace("    print('stop')\n",
                                                                "    except KeyError:\n        pass\n    print('stop')\n")
    diff = git_diff(before, after, tmp_path)
    assert diff.count("\n@@ -") == 2  # after the first hunk alone, a `try:` with no `except`: no parse
    _, result = outcome(diff, "import os\n\n\n" + before)
    assert result.status is Status.APPLIED and result.new_text == "import os\n\n\n" + after, result.detail


@pytest.mark.parametrize("before, after", [
    # hub f6343cb55f: a helper the diff adds below the function that calls it
    ("def load(card):\n    return card\n",
     "def load(card):\n    return _update(card)\n\n\ndef _update(card):\n    return card\n"),
    # datasets 4bedb7dcba: `:=` binds on the line that reads it
    ("def protocols(fs):\n    return fs\n",
     "def protocols(fs):\n    return (p,) if isinstance(p := fs.protocol, str) else p\n"),
    # Lightning 74d46d655d: a nested function reads a name its enclosing function binds below it
    ("def test():\n    return 1\n",
     "def test():\n    def inner():\n        return PATH\n\n    PATH = 'x'\n    return inner()\n"),
])
def test_names_bound_where_python_finds_them_when_the_code_runs(tmp_path, before, after):
    _, result = outcome(git_diff(before, after, tmp_path), before)
    assert result.status is Status.APPLIED and result.new_text == after, result.detail


def test_a_global_the_diff_removes_that_this_release_still_reads_is_refused(tmp_path):
    """TE fb749619ed @ v1.10: the diff drops module globals; the older release
    still reads them in code outside the hunks. Where only the diff's own lines
    read it, the author saw it: not this check's business."""
    filler = "".join(f"\ndef f{i}():\n    return {i}\n\n" for i in range(6))
    before = f"_GEMM = 1\n\n{filler}\ndef gemm():\n    return 2\n"
    after = f"{filler}\ndef gemm():\n    return 2\n".removeprefix("\n")
    diff = git_diff(before, after, tmp_path)
    _, fine = outcome(diff, before)
    assert fine.status is Status.APPLIED
    older = before.replace("    return 2\n", "    return _GEMM * 2\n")
    _, result = outcome(diff, older)
    assert result.status is Status.FAILED and "`_GEMM` is read" in result.detail, result.detail


def test_a_fix_made_there_in_another_form_is_failed_with_that_said(tmp_path):
    """jax.nn.standardize's NaN fix (c13c96b656) on jax 0.10.1+: the release holds
    the line the diff adds and not the line it removes, but inside a branch the
    function grew since. Still `failed` (a diff cannot judge another form), with
    the hint; a release that lacks one added line gets the plain reason."""
    before = "def scale(x, v):\n    v = v - 1\n    return sub(x, asarray(m)) * rsqrt(asarray(v) + eps)\n"
    after = "def scale(x, v):\n    v = v - 1\n    v = clip(v, 0)\n    return sub(x, m) * rsqrt(v + eps)\n"
    diff = git_diff(before, after, tmp_path)
    other_form = ("def scale(x, v, mode='fast'):\n    if mode == 'fast':\n        v = v - 1\n"
                  "        v = clip(v, 0)\n    else:\n        raise ValueError(mode)\n"
                  "    return sub(x, m) * rsqrt(v + eps)\n")
    _, result = outcome(diff, other_form)
    assert result.status is Status.FAILED and "fixed there in another form?" in result.detail, result.detail
    lacking = other_form.replace("        v = clip(v, 0)\n", "")
    _, result = outcome(diff, lacking)
    assert result.status is Status.FAILED and "another form" not in result.detail, result.detail


def test_a_keyword_added_where_the_calls_later_arguments_differ(tmp_path):
    """transformers 5.24's Falcon fix (position_ids passed to create_causal_mask) on
    5.10, whose call ends with other arguments: the hunk's trailing context is
    dropped, so its old lines are a prefix of its new ones. That is no sign of
    being applied unless an added line reads like its neighbour (`None,` among
    `None,`): applied once, then already-applied."""
    made_on = ("class Model:\n    def forward(self, x, mask, cache, pos):\n        m = build(\n            x=x,\n"
               "            mask=mask,\n            cache=cache,\n            skip=False,\n        )\n"
               "        return self.layer(x, mask=m, pos=pos)\n")
    fixed = made_on.replace("            cache=cache,\n", "            cache=cache,\n            pos=pos,\n", 1)
    diff = git_diff(made_on, fixed, tmp_path)
    release = made_on.replace("            skip=False,\n", "            extra=lambda *a: True,\n")
    _, result = outcome(diff, release)  # git's default header names the class only: which method is not shown
    assert result.status is Status.FAILED and "cannot tell which method of `Model`" in result.detail, result.detail
    diff = git_diff(made_on, fixed, tmp_path, python_driver=True)  # `@@ def forward(...)`: the method shown
    assert "@@ def forward(" in diff, diff
    _, result = outcome(diff, release)
    assert result.status is Status.APPLIED, result.detail
    assert result.new_text == release.replace("            cache=cache,\n", "            cache=cache,\n            pos=pos,\n")
    _, again = outcome(diff, result.new_text)
    assert again.status is Status.ALREADY_APPLIED, again.detail


def test_context_dropped_between_the_kept_lines_and_the_added_one_is_never_a_place(tmp_path):
    """The same Falcon fix on transformers 5.24 (a context argument renamed, the
    fix in) and 5.3 (another argument between): a core of kept lines that stops
    short of the added line gave `applied` with the text unchanged (caught only as
    'not idempotent'). Now: already-applied where the added line sits by the kept
    lines, failed where no kept lines reach it."""
    made_on = ("class Model:\n    def forward(self, x, mask, cache, pos):\n        m = build(\n            x=x,\n"
               "            mask=mask,\n            cache=cache,\n            # why\n            skip=False,\n"
               "        )\n        return m\n")
    fixed = made_on.replace("            cache=cache,\n", "            cache=cache,\n            pos=pos,\n", 1)
    renamed_and_fixed = fixed.replace("cache=cache", "store=store")
    _, result = outcome(git_diff(made_on, fixed, tmp_path), renamed_and_fixed)  # `@@ class Model:` only
    assert result.status is Status.FAILED and "cannot tell which method" in result.detail, result.detail
    diff = git_diff(made_on, fixed, tmp_path, python_driver=True)  # `@@ def forward(`
    _, result = outcome(diff, renamed_and_fixed)
    assert result.status is Status.ALREADY_APPLIED, result.detail
    between = made_on.replace("            cache=cache,\n", "            seen=seen,\n            cache=cache,\n").replace(
        "            skip=False,\n", "            other=lambda *a: True,\n")
    _, result = outcome(diff, between)
    assert result.status is Status.FAILED and "not idempotent" not in result.detail, result.detail


def test_old_lines_also_standing_without_the_addition_are_no_sign_it_is_applied(tmp_path):
    """Found by review: a check added to the second of two copied blocks, the line
    after it changed in the release. The first block already has the check, so
    its old lines sit inside the new ones there; the second block's stand alone.
    Which one the hunk meant cannot be told: failed, never already-applied; the
    release with both checks is already-applied."""
    block = "    y = g(x)\n    log(y)\n    z = h(y)\n"
    made_on = f"def f(x):\n{block}    check(z)\n    out = [z]\n{block}    out.append(z)\n    return out\n"
    fixed = made_on.replace("    z = h(y)\n    out.append(z)\n", "    z = h(y)\n    check(z)\n    out.append(z)\n")
    diff = git_diff(made_on, fixed, tmp_path)
    release = made_on.replace("    out.append(z)\n", "    out.append(z + 0)\n")
    _, result = outcome(diff, release)
    assert result.status is Status.FAILED and "cannot tell" in result.detail, result.detail
    both = release.replace("    z = h(y)\n    out.append", "    z = h(y)\n    check(z)\n    out.append")
    _, result = outcome(diff, both)
    assert result.status is Status.ALREADY_APPLIED, result.detail


# The floor (issue 40, part 1): generated cases of the classes where a text tool, and this engine before,
# wrote a wrong text: comment lines removed by a hunk placed on normalised lines, a change under a
# class-only header whose method is gone (a sibling has its trailing context), sibling classes with the same
# method reordered under a diff without headers, and a removal whose lines stand here in another form.
FLOOR_SEEDS = range(120)
FLOOR_VARIANTS = ["same", "context-changed", "reordered", "class-grew", "method-gone", "other-form"]


def floor_module(rng: random.Random) -> list[Klass]:
    """Two or three classes; the first two hold a method `run` with the same body
    (siblings), every body long enough that a change near its end has no def line
    in its context, with a comment line in it."""
    shared = [f"a{k} = x + {rng.randint(0, 9)}" for k in range(rng.randint(6, 8))] + ["return a0"]
    shared.insert(rng.randint(4, len(shared) - 2), f"# step {rng.randint(1, 9)}")
    module = []
    for c in range(rng.randint(2, 3)):
        funcs = [Func("run", list(shared))]
        for f in range(rng.randint(1, 2)):
            body = [f"b{k} = x * {rng.randint(1, 9)}" for k in range(rng.randint(6, 8))] + ["return b0"]
            body.insert(rng.randint(4, len(body) - 2), "# tuned by hand")
            funcs.append(Func(f"g{c}{f}", body))
        rng.shuffle(funcs)
        module.append(Klass(f"K{c}", funcs))
    return module


def floor_edit(module: list[Klass], rng: random.Random) -> tuple[str, str, str, int]:
    """(class, function, kind, line index): a change at or after the body's 5th line."""
    klass = rng.choice(module)
    func = rng.choice(klass.funcs)
    comment = next(i for i, line in enumerate(func.body) if line.startswith("#"))
    kind = rng.choice(["remove-comment", "replace-under-comment", "delete", "insert"])
    at = comment if kind in ("remove-comment", "replace-under-comment") else rng.randint(4, len(func.body) - 2)
    return klass.name, func.name, kind, at


def located(module: list[Klass], change) -> tuple[Klass, int]:
    """The class a change is in, and the index of its function there (by name: releases reorder them)."""
    klass = next(k for k in module if k.name == change[0])
    return klass, next(n for n, func in enumerate(klass.funcs) if func.name == change[1])


def floor_edited(module: list[Klass], change) -> list[Klass]:
    _, _, kind, at = change
    out = copy(module)
    klass, f = located(out, change)
    body = klass.funcs[f].body
    if kind == "remove-comment":
        del body[at]
    elif kind == "replace-under-comment":
        body[at:at + 2] = [f"{body[at + 1].split(' =')[0]} = x - 99"]
    elif kind == "delete":
        del body[at]
    else:
        body.insert(at, "w = x - 7")
    return out


def floor_variant(module: list[Klass], name: str, change) -> list[Klass] | None:
    """The release's structure (None: this variant does not apply to this change)."""
    _, _, kind, at = change
    out = copy(module)
    klass, f = located(out, change)
    body = klass.funcs[f].body
    if name == "context-changed":  # a statement far above the change differs, and one right above it too,
        above = next(i for i in range(at - 1, -1, -1) if not body[i].startswith("#"))  # in every copy of it
        for copied in (func for k in out for func in k.funcs if func.name == change[1]):
            copied.body[0] += "  # differs here"
            copied.body[above] = copied.body[above].replace("x ", "x  ").replace("= ", "=  ") + "  # and here"
    elif name == "reordered":
        out.reverse()
    elif name == "class-grew":
        klass.funcs.insert(f, Func("grown", ["g = 2", "return g"]))
    elif name == "method-gone":  # the method is in no class of this release; a sibling ends the same way
        gone = klass.funcs.pop(f)
        for other in out:
            other.funcs = [func for func in other.funcs if func.name != gone.name]
        klass.funcs.insert(f, Func("twin", [f"t{k} = x // 3" for k in range(at - 1)] + gone.body[at - 1:]))
    elif name == "other-form":  # the lines the change removes stand here in another form
        if kind not in ("delete", "replace-under-comment", "remove-comment"):
            return None
        target = at + 1 if kind == "replace-under-comment" else at
        for copied in (func for k in out for func in k.funcs if func.name == change[1]):  # in every copy
            copied.body[target] = "q = other(x)" if not body[target].startswith("#") else "# another note"
    return out


def plain(diff: str) -> str:
    """The diff as `diff -u` writes it: no `index` line, no section headers."""
    return "".join(re.sub(r"^(@@ [^@]* @@).*", r"\1", line) + "\n" for line in diff.splitlines()
                   if not line.startswith(("index ", "diff --git")))


def floor_cases(seed: int, tmp_path: Path):
    """The floor cases of one seed: (form, variant, the change, diff, target, truth),
    the truth None where there is no right edit (the code the diff changes is not
    in the release)."""
    rng = random.Random(seed)
    base = floor_module(rng)
    change = floor_edit(base, rng)
    made = git_diff(render(base), render(floor_edited(base, change)), tmp_path)
    for form, diff in (("git", made), ("plain", plain(made))):
        for name in FLOOR_VARIANTS:
            structure = floor_variant(base, name, change)
            if structure is None:
                continue
            truth = None if name in ("method-gone", "other-form") else render(floor_edited(structure, change))
            yield form, name, change, diff, render(structure), truth


@pytest.mark.parametrize("seed", FLOOR_SEEDS)
def test_generated_cases_of_the_floor(seed, tmp_path):
    """Each case's truth is known by construction. Never a text other than the truth,
    never `already-applied` where the release lacks the change (how often `git
    apply` writes the truth or other text: the test below)."""
    for form, name, change, diff, target, truth in floor_cases(seed, tmp_path):
        change_, result = outcome(diff, target)
        where = f"{form}/{name} ({change[2]})\n{diff}"
        if truth is None:
            assert result.status not in (Status.APPLIED, Status.ALREADY_APPLIED), \
                f"{where}: {result.status.value}: {result.detail}\n{result.new_text}"
            continue
        if result.status is Status.APPLIED:
            assert result.new_text == truth, f"{where}: misplaced or wrong\n{result.new_text}"
        else:
            assert result.status in (Status.FAILED, Status.NOT_APPLICABLE), f"{where}: {result.detail}"
        if name == "same" and form == "git":  # the diff's own post-image
            assert apply_change(change_, truth).status is Status.ALREADY_APPLIED, where


def test_what_the_engine_and_git_apply_write_on_the_floor_cases(tmp_path):
    """The counts behind docs/bring-your-patches.md's floor line: git apply writes
    wrong text in these classes; the engine never does."""
    counts = Counter()
    for seed in FLOOR_SEEDS:
        for _, _, _, diff, target, truth in floor_cases(seed, tmp_path):
            by_git = git_apply(diff, target, tmp_path)
            result = outcome(diff, target)[1]
            counts["cases"] += 1
            counts["git right"] += by_git is not None and by_git == truth
            counts["git wrong"] += by_git is not None and by_git != truth
            counts["engine right"] += result.status is Status.APPLIED and result.new_text == truth
            counts["engine wrong"] += result.status is Status.APPLIED and result.new_text != truth or \
                result.status is Status.ALREADY_APPLIED and truth is None
    print(f"\n{counts['cases']} floor cases: git apply right {counts['git right']}, wrong {counts['git wrong']}; "
          f"port engine right {counts['engine right']}, wrong {counts['engine wrong']}")
    assert counts["engine wrong"] == 0 and counts["git wrong"] > 0


def test_a_hunk_whose_added_lines_repeat_its_context_is_judged_by_its_post_image(tmp_path):
    """Issue 40 part 4, held-out release-branch backports refused as 'not idempotent':
    a hunk adding a test that copies the one above it. Applied where the release
    is some lines off, `git apply`'s text is right; a second port of the diff onto
    that text cannot tell which copy is new, so the engine judges the result by
    the diff's own lines (exactly its lines added), never by porting it again."""
    body = "    x = make()\n    y = x + 1\n    assert y == 2\n"
    before = f"from helpers import make\n\n\ndef test_a():\n{body}\n\ndef other():\n    pass\n"
    after = before.replace("\n\ndef other", f"\n\ndef test_b():\n{body}\n\ndef other")
    diff = git_diff(before, after, tmp_path)
    for target in (before, "import sys\n" + before, before.replace("    pass\n", "    return 1\n")):
        _, result = outcome(diff, target)
        assert result.status is Status.APPLIED, result.detail
        assert result.new_text == target.replace("\n\ndef other", f"\n\ndef test_b():\n{body}\n\ndef other")
        assert git_apply(diff, target, tmp_path) in (None, result.new_text)
        _, again = outcome(diff, result.new_text)  # never a third copy
        assert again.status in (Status.ALREADY_APPLIED, Status.FAILED), again.detail


def test_the_result_check_names_the_hunk_whose_lines_are_not_as_the_diff_has_them():
    """check_edit, the check that replaced the second port: a result missing an added
    line, keeping a removed one, or changing a line no hunk changes is refused, and
    the message names the hunk (or the line)."""
    from fixmono.engines.port import check_edit
    from fixmono.model.errors import TransformFailed

    (change,) = diff_fix(parse_patch("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@ def f(x):\n a = 1\n-b = 2\n+b = 3\n c = 4\n",
                                     "p.patch"), "pytorch", "p").changes
    (hunk,) = change.transform.hunks
    source = "a = 1\nb = 2\nc = 4\n"
    check_edit(source, "a = 1\nb = 3\nc = 4\n", [hunk])  # the diff's edit: no complaint
    for result, words in (("a = 1\nb = 2\nb = 3\nc = 4\n", "a line it removes, `b = 2`"),
                          ("a = 1\nc = 4\n", "a line it adds, `b = 3`"),
                          ("a = 1\nb = 3\nc = 5\n", "no hunk of the diff changes")):
        with pytest.raises(TransformFailed, match=re.escape(words)) as err:
            check_edit(source, result, [hunk])
        assert "no hunk" in words or hunk.label in str(err.value)


@pytest.mark.parametrize("release", [
    "def f(x):\n    if x:\n        y = 1\n    return y\n",  # the else branch the diff changes is not there
    "def f(x):\n    if x:\n        y = 1\n    return y\n\n\ndef g(z):\n    if z:\n        pass\n    else:\n"
    "        y = compute_default(z)\n    return y\n",  # ... and another function has an `else:` and a like line
])
def test_trivial_lines_are_no_evidence_that_the_code_is_there(tmp_path, release):
    """A release lacking the code a hunk changes is not-applicable, even where its
    trivial lines (`else:`, `return y`, brackets) stand in the file."""
    before = "def f(x):\n    if x:\n        y = 1\n    else:\n        y = compute_default(x)\n    return y\n"
    after = before.replace("compute_default(x)", "compute_default(x, strict=True)")
    _, result = outcome(git_diff(before, after, tmp_path), release)
    assert result.status is Status.NOT_APPLICABLE, result.detail


@pytest.mark.parametrize("form, status", [
    ("    b = call(\n        x,\n        y,\n        strict=True,\n    )\n", Status.ALREADY_APPLIED),  # wrapped
    ("    b = call(x,\n             y, strict=True)\n", Status.ALREADY_APPLIED),
    ("    b = call(\n        x, y, strict=False\n    )\n", Status.FAILED),  # wrapped, and other code
    ("    b = call(\n        x, y\n    )\n", Status.FAILED),  # the pre-image wrapped: not applied, not placeable
])
def test_a_fix_present_on_other_line_breaks_is_found_as_tokens(tmp_path, form, status):
    """Issue 40 part 4: upstream holds the fix with its arguments wrapped (black's
    trailing comma too): already-applied, found as the same tokens, never failed."""
    before = "import os\n\n\ndef f(x, y):\n    a = 1\n    b = call(x, y)\n    c = 3\n    return c\n"
    after = before.replace("call(x, y)", "call(x, y, strict=True)")
    release = before.replace("    b = call(x, y)\n", form)
    _, result = outcome(git_diff(before, after, tmp_path), release)
    assert result.status is status, result.detail


def test_a_line_one_hunk_removes_and_another_adds_is_moved_not_refused(tmp_path):
    """TE 2834e4ad83 on release_v2.1 (found by bench_backports): imports reordered,
    `import pytest` removed by the first hunk and added back by the second. The
    result check counts the diff's lines over all its hunks."""
    middle = "".join(f"X{i} = {i}\n" for i in range(12))
    before = f"import os\nimport pytest\nimport subprocess\n\n{middle}\ndef test():\n    return os\n"
    after = before.replace("import pytest\n", "").replace("def test():\n", "import pytest\n\n\ndef test():\n")
    diff = git_diff(before, after, tmp_path)
    assert diff.count("\n@@ -") == 2, diff
    _, result = outcome(diff, before)
    assert result.status is Status.APPLIED and result.new_text == after == git_apply(diff, before, tmp_path), \
        result.detail


def test_the_named_line_decides_between_places_of_the_named_scope_only_where_the_file_above_is_level(tmp_path):
    """TE 80222dc0c7 on release_v0.13 (found by bench_backports): the hunk's lines
    stand in two methods of the class its header names. Where the file above holds
    as many lines as the diff's, the line it names decides (as git apply, and right);
    where the release is lines off and nothing anchors it, it is failed; without a
    header (plain diff -u), only the pre-image's blob id would let it decide."""
    check = "        w = 0\n        x = prepare()\n        y = run(x)\n        assert y\n        return y\n"
    methods = "".join(f"    def test_{n}(self):\n{check}\n" for n in ("one", "two"))
    before = f"from t import prepare, run\n\n\nclass TestLayer:\n{methods}"
    lines = before.splitlines(keepends=True)
    second = [i for i, line in enumerate(lines) if "assert y" in line][1]
    lines[second] = "        assert y, 'two'\n"
    diff = git_diff(before, "".join(lines), tmp_path)
    release = before.replace("from t import", "from tt import")  # not the pre-image, as many lines
    _, result = outcome(diff, release)
    assert result.status is Status.APPLIED and result.new_text == git_apply(diff, release, tmp_path), result.detail
    _, result = outcome(diff, "import os\n" + release)  # a line off: which method, only the line would say
    assert result.status is Status.FAILED and "fit 2 places" in result.detail, result.detail
    _, result = outcome(plain(diff), release)  # no header, no index line
    assert result.status is Status.FAILED, result.detail
    _, result = outcome(diff, before)  # the pre-image itself (the diff's index line): the line decides
    assert result.status is Status.APPLIED and result.new_text == "".join(lines), result.detail
