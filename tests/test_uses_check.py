"""After placing, the uses (issue 42, part 3): what a diff's added lines import,
read on `self` and pass as keywords must be in the target tree, read as files.
A certain miss is `failed` with one line; whatever cannot be resolved is left
alone. The trees are our own small packages, shaped like a generation library."""
from __future__ import annotations

import difflib
import json

import pytest

from fixmono.apply.contract import apply_fix
from fixmono.engines.port import diff_fix
from fixmono.engines.uses import unresolved_uses
from fixmono.model.outcome import Status
from fixmono.model.patchfile import parse_patch, read_patch
from fixmono.model.projects import PROJECTS
from fixmono.model.registry import discover
from fixmono.testing import REPO_ROOT, catalogue_tree, fixture_changes, make_patch, make_repo

TREE = {
    "src/gen/__init__.py": "from .cache import Cache\nfrom .loop import *\n__all__ = ['Cache', 'Beam']\n",
    "src/gen/cache.py": (
        "class Cache:\n"
        "    def __init__(self, size, *, dtype=None):\n"
        "        self.size = size\n"
        "\n"
        "    def update(self, key, value, layer=0):\n"
        "        return key\n"
        "\n"
        "\n"
        "def flexible(x, **options):\n"
        "    return x\n"),
    "src/gen/base.py": (
        "class BaseGenerator:\n"
        "    def __init__(self):\n"
        "        self.step = 0\n"),
    "src/gen/options.py": (
        "from dataclasses import dataclass\n"
        "\n"
        "\n"
        "@dataclass\n"
        "class Options:\n"
        "    beams: int = 1\n"
        "    top_k: int = 0\n"),
    "src/gen/loop.py": "def run_loop(steps):\n    return steps\n",
    "src/gen/generator.py": (
        "from .base import BaseGenerator\n"
        "from .cache import Cache, flexible\n"
        "from gen.options import Options\n"
        "\n"
        "\n"
        "class Generator(BaseGenerator):\n"
        "    def __init__(self, model):\n"
        "        super().__init__()\n"
        "        self.model = model\n"
        "\n"
        "    def next_token(self, ids):\n"
        "        out = self.model(ids)\n"
        "        return out\n"
        "\n"
        "\n"
        "class Lazy:\n"
        "    def __getattr__(self, name):\n"
        "        return name\n"
        "\n"
        "    def value(self):\n"
        "        return 1\n"
        "\n"
        "\n"
        "class Registered:\n"
        "    def __init__(self):\n"
        "        setattr(self, 'slot', 0)\n"
        "\n"
        "    def value(self):\n"
        "        return 1\n"),
}
PATH = "src/gen/generator.py"


def after(old: str, new: str, path: str = PATH) -> str:
    """The generator module with the line `old` replaced by `new` (both whole lines)."""
    assert TREE[path].count(old) == 1, old
    return TREE[path].replace(old, new)


def uses(new_text: str, path: str = PATH, tree: dict | None = None, whole_tree: bool = True) -> list[str]:
    files = {**(tree or TREE), path: new_text}
    return unresolved_uses(path, (tree or TREE)[path], new_text, lambda p: files[p].encode() if p in files else None,
                           whole_tree)


OUT = "        return out\n"
CACHE, OPTIONS = "from .cache import Cache, flexible\n", "from gen.options import Options\n"
FAILED = [  # (a line of the module, what the change puts there, what it says)
    (OUT, "        cached = self.cache_index\n" + OUT,
     "the change reads `self.cache_index` (line 13), which `Generator` never sets in this release"),
    (CACHE, "from .cache import Cache, flexible, DynamicCache\n",
     "the change imports `DynamicCache` from `.cache` (line 2), which that module does not define in this release"),
    (OPTIONS, "from gen.options import Options, SamplingOptions\n",
     "the change imports `SamplingOptions` from `gen.options` (line 3), which that module does not define in this "
     "release"),
    (CACHE, "import gen.streaming\n" + CACHE,
     "the change imports `gen.streaming` (line 2), which this release does not have"),
    (CACHE, "from .streaming import TextStreamer\n" + CACHE,
     "the change imports `.streaming` (line 2), which this release does not have"),
    (OUT, "        out = Cache(4, device='cpu')\n" + OUT,
     "the change passes `device=` to `Cache` (line 13), which does not take it in this release"),
    (OUT, "        out = Options(beams=2, temperature=0.5)\n" + OUT,
     "the change passes `temperature=` to `Options` (line 13), which does not take it in this release"),
    ("class Lazy:\n", "@Options(beams=1, top_p=0.9)\nclass Lazy:\n",
     "the change passes `top_p=` to `Options` (line 16), which does not take it in this release"),
    (OUT, "        out = self.next_token(ids, cache=None)\n" + OUT,
     "the change passes `cache=` to `self.next_token` (line 13), which does not take it in this release"),
]


@pytest.mark.parametrize("old, new, message", FAILED)
def test_a_use_the_release_lacks_fails(old, new, message):
    assert uses(after(old, new)) == [message]


RESOLVED = [
    "        first = self.step\n",  # set in the base class, in another module of the package
    "        first = self.model\n",  # set in __init__
    "        first = self.next_token\n",  # a method
    "        self.cache_index = 0\n        first = self.cache_index\n",  # the change sets it
    "        first = Cache(4, dtype=None).size\n",  # a keyword __init__ takes
    "        first = flexible(ids, anything=1)\n",  # **options
    "        first = Options(beams=2, top_k=1)\n",  # dataclass fields
    "        first = self.next_token(ids=ids)\n",  # a method's own parameter
    "        first = dict(anything=1)\n",  # a builtin: not the target's to judge
    "        first = getattr(self, 'cache_index', None)\n",
    "        first = self.__class__\n",
    "        first = Cache(4).update(1, 2, cache_position=3)\n",  # a method of some instance: not resolved
]


@pytest.mark.parametrize("added", RESOLVED)
def test_a_use_the_release_has_or_that_cannot_be_told_stays(added):
    assert uses(after(OUT, added + OUT)) == []


def test_dynamic_classes_and_modules_are_not_judged():
    assert uses(after("    def value(self):\n        return 1\n\n\nclass Registered",
                      "    def value(self):\n        return self.anything\n\n\nclass Registered")) == []  # __getattr__
    assert uses(TREE[PATH] + "        first = self.slot\n") == []  # setattr
    mixin = "\n\nclass StreamingMixin:\n    def stream(self):\n        return self.tokenizer\n"
    assert uses(TREE[PATH] + mixin) == []  # no __init__: the class it is mixed into may set it
    reexported = "from . import Cache, Beam, run_loop\n"  # Cache bound, Beam in __all__, run_loop by star import
    assert uses(reexported + TREE[PATH]) == []
    missing = {**TREE, "src/gen/__init__.py": "from .cache import Cache\n"}
    assert uses("from . import Cache, Beam\n" + TREE[PATH], tree=missing) == [
        "the change imports `Beam` from `.` (line 1), which that module does not define in this release"]
    assert uses("from . import loop, cache\n" + TREE[PATH], tree=missing) == []  # submodules


def test_a_module_not_at_hand_is_not_missing():
    """A wheel's scratch tree holds only the targets: a module it does not hold may be there."""
    assert uses("import gen.streaming\n" + TREE[PATH], whole_tree=False) == []
    assert uses("from gen._native import kernel\n" + TREE[PATH]) == []  # maybe an extension module
    assert uses("import torch.streaming\n" + TREE[PATH]) == []  # another package: not this tree's


def test_a_use_the_file_had_before_is_not_judged():
    broken = after(OUT, "        cached = self.cache_index\n" + OUT)
    tree = {**TREE, PATH: broken}
    assert uses(broken.replace("        return out\n", "        return cached\n"), tree=tree) == []


def unified(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))


def test_a_diff_that_reads_an_attribute_the_class_never_sets_fails_in_apply_fix():
    new = after(OUT, "        cached = self.cache_index\n" + OUT)
    fix = diff_fix(parse_patch(unified(PATH, TREE[PATH], new), "x.patch"), "gen")
    read = lambda p: TREE[p].encode() if p in TREE else None  # noqa: E731
    outcome = apply_fix(fix, read, whole_tree=True)
    assert outcome.status is Status.FAILED
    assert outcome.detail == (f"{PATH}: the change reads `self.cache_index` (line 13), which `Generator` never "
                              "sets in this release")
    fine = after(OUT, "        cached = self.step\n" + OUT)
    assert apply_fix(diff_fix(parse_patch(unified(PATH, TREE[PATH], fine), "y.patch"), "gen"), read).status \
        is Status.APPLIED


def test_the_other_files_are_read_as_the_diff_leaves_them():
    """An attribute the same diff sets in the base class, in another file."""
    base = TREE["src/gen/base.py"] + "        self.cache_index = 0\n"
    new = after(OUT, "        cached = self.cache_index\n" + OUT)
    patch = unified("src/gen/base.py", TREE["src/gen/base.py"], base) + unified(PATH, TREE[PATH], new)
    outcome = apply_fix(diff_fix(parse_patch(patch, "x.patch"), "gen"),
                        lambda p: TREE[p].encode() if p in TREE else None, whole_tree=True)
    assert outcome.status is Status.APPLIED, outcome.detail


def test_make_patch_says_failed_with_the_reason(tmp_path):
    repo = make_repo(tmp_path / "gen", TREE)
    new = after(OUT, "        out = Cache(4, device='cpu')\n" + OUT)
    (tmp_path / "fix.patch").write_text(unified(PATH, TREE[PATH], new))
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", str(repo), "--check", "--json")
    assert proc.returncode == 1, proc.stderr
    (result,) = json.loads(proc.stdout)["runs"][0]["results"]
    assert result["status"] == "failed"
    assert "the change passes `device=` to `Cache` (line 13), which does not take it in this release" \
        in result["detail"]


@pytest.mark.parametrize("project", sorted(p for p, v in PROJECTS.items() if v.markers))
def test_no_right_result_of_the_catalogue_fails(project):
    """Every fix's own result on its fixture, and every checked-in patch ported as a
    diff, in the catalogue's tree of that project: the uses check finds nothing."""
    try:
        tree = catalogue_tree(project)
    except Exception as err:  # noqa: BLE001 -- a fixture that cannot be had here
        pytest.skip(str(err))
    fixes = [f for f in discover() if f.upstream == project]
    read = lambda p: tree[p].encode() if p in tree else None  # noqa: E731
    checked = 0
    for fix in {fix.id: fix for fix, _ in fixture_changes(fixes)}.values():
        outcome = apply_fix(fix, read)  # the fix's own transformation: the right result
        files = {**tree, **outcome.new_files}
        for path, text in outcome.new_files.items():
            if path.endswith(".py") and text is not None:
                assert unresolved_uses(path, tree[path], text, lambda p: files[p].encode() if p in files else None,
                                       True) == [], fix.id
                checked += 1
    for patch in sorted((REPO_ROOT / "patches" / project).glob("*.patch")):
        ported = apply_fix(diff_fix(read_patch(patch), project), read, whole_tree=True)
        assert ported.status is not Status.FAILED or "the change" not in ported.detail, ported.detail
    assert checked or all(not c.path.endswith('.py') for f in fixes for c in f.changes)
