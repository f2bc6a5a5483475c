"""The hot-fix of a diff (runtime/diff_hotfix.py), in a fresh venv: its own
`transformers` package (our text, a division by zero in a scheduler) and
fixmono from this tree through the start-up .pth the wheel installs. The
reproducer says reproduced without FIXMONO_HOTFIXES and not reproduced with
the patch file named in it, the diff having been made where the lines sat
elsewhere; a diff that changes more than function bodies is refused with one
line and the import goes on; a method calling super() keeps its class."""
import subprocess
from pathlib import Path

import pytest

from tests.helpers import hotfix_venv, run_python, unified_diff

INSTALLED = '''"""Our own module, shaped like a transformers one."""
import math

WARMUP_DEFAULT = 0


class Base:
    def scale(self):
        return 1.0


class Scheduler(Base):
    def __init__(self, warmup=WARMUP_DEFAULT, total=10):
        self.warmup = warmup
        self.total = total

    def describe(self):
        return f"warmup {self.warmup}"

    def factor(self, step):
        if step < self.warmup:
            return step / self.warmup
        progress = (step - self.warmup) / (self.total - self.warmup)
        return self.scale() * 0.5 * (1.0 + math.cos(math.pi * progress)) / self.warmup

    def scale(self):
        return super().scale()
'''
# the user's patch was made on another release: no describe() above factor, so other line numbers
MADE_ON = INSTALLED.replace('''    def describe(self):
        return f"warmup {self.warmup}"

''', "")
PATH = "src/transformers/fixmono_example.py"
REPRO = ("from transformers.fixmono_example import Scheduler\n"
         "try:\n    value = Scheduler().factor(3)\nexcept ZeroDivisionError:\n    print('reproduced')\n"
         "else:\n    print('not-reproduced', round(value, 6), Scheduler().scale())\n")


# a rule registered in a table when the module runs (as jax registers its batching rules), and a decorated one
REGISTRY = '''import functools

RULES = {}


def rule(x):
    return x + 1


RULES["add"] = rule


class traced:  # a wrapper object naming its function, as jax.jit gives
    def __init__(self, f):
        self.f = self.__wrapped__ = f

    def __call__(self, *args):
        return self.f(*args)


class opaque:  # a wrapper that does not say what it wraps
    def __init__(self, f):
        self.f = f

    def __call__(self, *args):
        return self.f(*args)


@traced
def wrapped(x):
    return x + 1


@opaque
def hidden(x):
    return x + 1


def logged(f):  # a closure wrapper, as transformers' @can_return_tuple
    @functools.wraps(f)
    def wrapper(*args):
        return f(*args)
    return wrapper


@logged
def closed(x):
    return x + 1


class Table:
    LIMIT = 2
    KINDS = {"add": rule}
    DOUBLE = LIMIT * 2

    @staticmethod
    def lookup(x):
        return x + 1
'''


def diff(before: str, after: str, path: str = PATH) -> str:
    return unified_diff(before, after, path)


@pytest.fixture(scope="module")
def python(tmp_path_factory) -> Path:
    return hotfix_venv(tmp_path_factory.mktemp("venv"), {"fixmono_example.py": INSTALLED,
                                                         "fixmono_registry.py": REGISTRY})


run = run_python


def test_reproduced_without_and_not_reproduced_with_the_patch_named(python, tmp_path):
    fixed = MADE_ON.replace("return step / self.warmup", "return step / max(1, self.warmup)").replace(
        "(self.total - self.warmup)", "max(1, self.total - self.warmup)").replace(
        " * (1.0 + math.cos(math.pi * progress)) / self.warmup", " * (1.0 + math.cos(math.pi * progress))").replace(
        "        return super().scale()\n", "        return super().scale() * 2\n")  # super() keeps its class
    patch = tmp_path / "0001-scheduler.patch"
    patch.write_text(diff(MADE_ON, fixed))
    assert run(python, REPRO).stdout.strip() == "reproduced"
    named = run(python, REPRO, FIXMONO_HOTFIXES=str(patch))
    assert named.returncode == 0, named.stderr
    assert named.stdout.split()[0] == "not-reproduced" and named.stdout.split()[2] == "2.0", named.stdout + named.stderr
    assert named.stderr.count("enabled: transformers.fixmono_example.Scheduler.factor, "
                              "transformers.fixmono_example.Scheduler.scale from the diff") == 1, named.stderr
    # in a script: enable, then disable gives the installed functions back
    toggled = run(python, "from fixmono.runtime.hotfixes import enable_hotfixes, disable_hotfixes\n"
                          f"print(enable_hotfixes([{str(patch)!r}]))\n" + REPRO +
                  f"print(disable_hotfixes([{str(patch)!r}]))\n" + REPRO)
    lines = toggled.stdout.splitlines()
    assert toggled.returncode == 0 and lines[1].startswith("not-reproduced") and lines[3] == "reproduced", \
        toggled.stdout + toggled.stderr
    assert "disabled: the installed functions are back" in lines[2]


@pytest.mark.parametrize("change, why", [
    (("WARMUP_DEFAULT = 0", "WARMUP_DEFAULT = 1"), "outside function bodies"),
    (("    def scale(self):\n        return super()", "    def scale(self, by=1):\n        return super()"),
     "decorators or signature"),
    (("class Base:\n", "def clip(x):\n    return x\n\n\nclass Base:\n"), "adds or removes functions"),
])
def test_more_than_function_bodies_is_refused_with_one_line(python, tmp_path, change, why):
    patch = tmp_path / "wide.patch"
    patch.write_text(diff(MADE_ON, MADE_ON.replace(*change)))
    named = run(python, REPRO, FIXMONO_HOTFIXES=str(patch))
    assert named.returncode == 0 and named.stdout.strip() == "reproduced", named.stdout + named.stderr
    assert named.stderr.count("not enabled: transformers.fixmono_example: ") == 1 and why in named.stderr and "Traceback" not in named.stderr, named.stderr


def test_a_patch_that_cannot_be_read_is_logged_and_the_import_goes_on(python, tmp_path):
    missing = run(python, REPRO, FIXMONO_HOTFIXES=str(tmp_path / "nowhere.patch"))
    assert missing.returncode == 0 and missing.stdout.strip() == "reproduced"
    assert "nowhere.patch: not set up" in missing.stderr and "Traceback" not in missing.stderr, missing.stderr


def test_a_function_is_fixed_in_place_for_every_holder_and_an_opaque_wrapper_by_name(python, tmp_path):
    """A registry and a `from m import f` made before the hot-fix see the fixed
    body (the function keeps its object, its code is replaced), also through a
    decorator's wrapper that names it as __wrapped__ (as jax.jit's and functools.wraps'
    closures do); a
    decorated def whose wrapper does not is rebound by name, so an early alias
    of its wrapper keeps the old; disable puts every one back."""
    patch = tmp_path / "0001-rules.patch"
    patch.write_text(diff(REGISTRY, REGISTRY.replace("return x + 1", "return x + 2"),
                          "src/transformers/fixmono_registry.py"))
    code = ("from transformers import fixmono_registry as m\n"
            "from transformers.fixmono_registry import rule as early, wrapped as early_wrapped, hidden, closed\n"
            "from fixmono.runtime.hotfixes import enable_hotfixes, disable_hotfixes\n"
            "show = lambda: print(m.RULES['add'](1), early(1), m.rule(1), m.wrapped(1), early_wrapped(1), "
            "m.Table.lookup(1), m.hidden(1), hidden(1), closed(1))\n"
            f"show(); print(enable_hotfixes([{str(patch)!r}])); show()\n"
            f"print(disable_hotfixes([{str(patch)!r}])); show()\n")
    done = run(python, code)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 5, done.stdout + done.stderr
    assert lines[0] == lines[4] == "2 2 2 2 2 2 2 2 2" and lines[2] == "3 3 3 3 3 3 3 2 3", lines


def test_a_class_attribute_gets_its_new_value_read_as_its_class_body_would(python, tmp_path):
    """transformers' `_can_record_outputs = {...}` (a dict of recorders, read when a
    model is made): the new value is evaluated as its class body would (its class's
    names, then the module's) and set on the class; disable sets the old one back."""
    path = "src/transformers/fixmono_registry.py"
    kinds = tmp_path / "0001-kinds.patch"
    kinds.write_text(diff(REGISTRY, REGISTRY.replace('KINDS = {"add": rule}', 'KINDS = {"add": rule, "again": rule}'),
                          path))
    code = ("from transformers import fixmono_registry as m\n"
            "from fixmono.runtime.hotfixes import enable_hotfixes, disable_hotfixes\n"
            f"print(sorted(m.Table.KINDS)); print(enable_hotfixes([{str(kinds)!r}])); print(sorted(m.Table.KINDS))\n"
            f"print(m.Table.KINDS['again'] is m.rule); disable_hotfixes([{str(kinds)!r}]); print(sorted(m.Table.KINDS))\n")
    done = run(python, code)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 5, done.stdout + done.stderr
    assert lines[0] == lines[4] == "['add']" and lines[2] == "['add', 'again']" and lines[3] == "True", lines
    assert "enabled: transformers.fixmono_registry.Table.KINDS from the diff" in lines[1], lines[1]
    double = tmp_path / "0002-double.patch"  # a value reading its class's own names: read there first
    double.write_text(diff(REGISTRY, REGISTRY.replace("DOUBLE = LIMIT * 2", "DOUBLE = LIMIT * 3"), path))
    read = run(python, "from transformers import fixmono_registry as m\n"
                       "from fixmono.runtime.hotfixes import enable_hotfixes\n"
                       f"print(enable_hotfixes([{str(double)!r}])); print(m.Table.DOUBLE)\n")
    lines = read.stdout.splitlines()
    assert read.returncode == 0 and lines[1] == "6", read.stdout + read.stderr


@pytest.mark.parametrize("before, change, expect", [
    # a def whose @functools.wraps(other) only copies docs: its own body is what runs, and is fixed
    ("import functools\n\n\ndef reference(x):\n    return x\n\n\n@functools.wraps(reference)\ndef fast(x):\n"
     "    return x + 1\n", ("return x + 1", "return x + 2"), "m.fast(1) == 3 and m.reference(1) == 1"),
    # a class attribute reads its class's own names first, as the class body would
    ("SIZE = 4\n\n\nclass C:\n    SIZE = 8\n    LIMIT = SIZE * 2\n", ("SIZE * 2", "SIZE * 3"), "m.C.LIMIT == 24"),
    # one that another statement of the body reads would not carry that one along: refused, nothing changed
    ("class T:\n    LIMIT = 2\n    DOUBLE = LIMIT * 2\n", ("LIMIT = 2", "LIMIT = 3"), "m.T.LIMIT == 2 and 'reads LIMIT' in said"),
    # a swap that fails (an Enum member) takes back the ones made before it: nothing half-enabled
    ("import enum\n\n\ndef helper():\n    return 1\n\n\nclass Mode(enum.Enum):\n    FAST = 1\n    SLOW = 2\n",
     ("SLOW = 2", "SLOW = 3"), "m.helper() == 1 and 'nothing was changed' in said"),
], ids=["wraps-another", "class-namespace", "read-by-another-statement", "enum-rolls-back"])
def test_what_review_found_in_the_hot_fix(python, tmp_path, before, change, expect):
    """Found by a review of the in-place swap and of class attributes, each in its own module."""
    site = Path(subprocess.run([python, "-c", "import transformers, os; print(os.path.dirname(transformers.__file__))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    name = f"fixmono_review_{tmp_path.name[-12:].replace('-', '_')}"
    (site / f"{name}.py").write_text(before)
    after = before.replace(*change).replace("return 1\n\n\nclass Mode", "return 2\n\n\nclass Mode")
    patch = tmp_path / "review.patch"
    patch.write_text(diff(before, after, f"src/transformers/{name}.py"))
    code = (f"from transformers import {name} as m\nfrom fixmono.runtime.hotfixes import enable_hotfixes\n"
            f"said = enable_hotfixes([{str(patch)!r}])[0]\nprint(said)\nprint({expect})\n")
    done = run(python, code)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "True", done.stdout + done.stderr
