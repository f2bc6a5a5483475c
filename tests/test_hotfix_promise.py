"""The promise of the runtime hot-fixes (issue 41): each one is applied
correctly or refused with one logged line, never half-applied, and the
program always starts. Every case runs in a fresh interpreter of a fresh
venv holding our own small `transformers` package (written here, not
upstream code) and fixmono's start-up hook; each checks that the program
started, the line said, and the function's behaviour before and after
enable and after disable."""
import subprocess
from pathlib import Path

import pytest

from tests.helpers import hotfix_venv, run_python, unified_diff

PLAIN = '''def clip(x):
    return min(x, 10)


def scale(x):
    return x * 2
'''

# methods wrapped by their class's machinery, each wrapper counting its calls
WRAPPED = '''CALLS = []


def counted(function):  # a wrapper that does not name what it wraps (no functools.wraps)
    def counting(*args):
        CALLS.append(function.__name__)
        return function(*args)
    return counting


class Sealed:  # a wrapper object keeping the function where nothing names it
    def __init__(self, function):
        self._hidden = function

    def __get__(self, obj, owner=None):
        return lambda *args: (CALLS.append("sealed"), self._hidden(obj, *args))[1]


def wrap_methods(namespace, wrapper):
    for key, value in list(namespace.items()):
        if callable(value) and not key.startswith("__"):
            yield key, wrapper(value)


class Counting(type):
    def __new__(mcs, name, bases, namespace):
        namespace.update(wrap_methods(dict(namespace), counted))
        return super().__new__(mcs, name, bases, namespace)


def count_methods(cls):
    for key, value in wrap_methods(dict(vars(cls)), counted):
        setattr(cls, key, value)
    return cls


class CountSubclasses:
    def __init_subclass__(cls):
        for key, value in wrap_methods(dict(vars(cls)), counted):
            setattr(cls, key, value)


class ByMetaclass(metaclass=Counting):
    def step(self, x):
        return x + 1


@count_methods
class ByDecorator:
    def step(self, x):
        return x + 1


class BySubclass(CountSubclasses):
    def step(self, x):
        return x + 1


class BySealedMetaclass(metaclass=type("SealingMeta", (type,), {
        "__new__": lambda mcs, name, bases, ns: type.__new__(mcs, name, bases, {
            **ns, **dict(wrap_methods(dict(ns), Sealed))})})):
    def step(self, x):
        return x + 1
'''

CLOSURES = '''def make_handler(limit):
    def handle(x):
        return min(x, limit)
    return handle


handler = make_handler(10)  # a closure made at import


def twice(x):  # a nested helper made anew at each call
    def once(y):
        return y + 1
    return once(once(x))
'''


@pytest.fixture(scope="module")
def python(tmp_path_factory) -> Path:
    return hotfix_venv(tmp_path_factory.mktemp("venv"), {"hf_plain.py": PLAIN, "hf_wrapped.py": WRAPPED,
                                                         "hf_closures.py": CLOSURES})


def patch(tmp_path: Path, name: str, text: str, change: tuple[str, str], module: str = "hf_plain",
          subject: str | None = None) -> str:
    """A patch file of `change` to one of our modules; a mail with `subject` when given."""
    body = unified_diff(text, text.replace(*change), f"src/transformers/{module}.py")
    assert body, change
    head = f"From: A User <user@example.com>\nSubject: [PATCH] {subject}\n\n---\n" if subject else ""
    (tmp_path / name).write_text(head + body)
    return str(tmp_path / name)


def logged(result: subprocess.CompletedProcess) -> list[str]:
    """The hot-fix lines on stderr; the program must have started and run to its end."""
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("FIXMONO_HOTFIXES")]


def script(python: Path, body: str, **env) -> tuple[list[str], list[str]]:
    """Run `body` after enable/disable are imported as e/d; its printed lines and the log lines."""
    done = run_python(python, "from fixmono.runtime.hotfixes import enable_hotfixes as e, disable_hotfixes as d\n"
                      + body, **env)
    return done.stdout.splitlines(), logged(done)


# --- hole 1: an entry that cannot be a hot-fix, named in FIXMONO_HOTFIXES ------------------------

def not_python(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Diffs with a file that no function swap can carry, each -> (text, why it is refused)."""
    json_diff = unified_diff('{"a": 1}\n', '{"a": 2}\n', "src/transformers/conf.json")
    py_diff = unified_diff(PLAIN, PLAIN.replace("min(x, 10)", "min(x, 5)"), "src/transformers/hf_plain.py")
    return {
        "json": (json_diff, "conf.json is not a Python module"),
        "json-crlf": (json_diff.replace("\n", "\r\n"), "conf.json is not a Python module"),
        "python-and-json": (py_diff + json_diff, "conf.json is not a Python module"),
        "adds-a-module": ("--- /dev/null\n+++ b/src/transformers/hf_new.py\n@@ -0,0 +1,2 @@\n+def f():\n+    return 1\n",
                          "adds src/transformers/hf_new.py"),
        "deletes-a-module": ("--- a/src/transformers/hf_plain.py\n+++ /dev/null\n@@ -1,5 +0,0 @@\n"
                             + "".join("-" + line for line in PLAIN.splitlines(True)[:5]), "deletes src/transformers/hf_plain.py"),
    }


@pytest.mark.parametrize("kind", ["json", "json-crlf", "python-and-json", "adds-a-module", "deletes-a-module"])
def test_an_entry_no_function_swap_can_carry_is_refused_and_the_program_starts(python, tmp_path, kind):
    text, why = not_python(tmp_path)[kind]
    entry = tmp_path / f"{kind}.patch"
    entry.write_bytes(text.encode())
    done = run_python(python, "import transformers.hf_plain as m\nprint(m.clip(20))\n", FIXMONO_HOTFIXES=str(entry))
    lines = logged(done)
    assert done.stdout.split() == ["10"] and len(lines) == 1 and why in lines[0] and "not enabled" in lines[0], lines


@pytest.mark.parametrize("kind, text, why", [
    ("missing", None, "No such file"),
    ("empty", "", "not a unified diff"),
    ("not-a-diff", "just some words\n", "not a unified diff"),
    ("binary", "diff --git a/src/transformers/hf_plain.py b/src/transformers/hf_plain.py\nindex 1..2 100644\n"
               "Binary files a/src/transformers/hf_plain.py and b/src/transformers/hf_plain.py differ\n", "binary"),
    ("does-not-apply", "--- a/src/transformers/hf_plain.py\n+++ b/src/transformers/hf_plain.py\n@@ -1,2 +1,2 @@\n"
                       " def clip(x):\n-    return max(x, 99)\n+    return max(x, 5)\n", "not enabled"),
])
def test_bad_entries_are_one_line_each_and_a_good_one_beside_them_is_enabled(python, tmp_path, kind, text, why):
    """A bad entry before a good one: the bad one is one line, the good one still applied."""
    bad = tmp_path / f"{kind}.patch"
    if text is not None:
        bad.write_text(text)
    good = patch(tmp_path, "good.patch", PLAIN, ("min(x, 10)", "min(x, 5)"))
    done = run_python(python, "import transformers.hf_plain as m\nprint(m.clip(20))\n",
                      FIXMONO_HOTFIXES=f"{bad},{good}")
    lines = logged(done)
    assert done.stdout.split() == ["5"], done.stdout + done.stderr
    assert len(lines) == 2 and sum(why in line and bad.stem in line for line in lines) == 1, lines


def test_crlf_diffs_of_a_python_module_are_enabled(python, tmp_path):
    """Every line end CRLF (a mail saved on Windows), or only the diff's content lines."""
    lf = patch(tmp_path, "lf.patch", PLAIN, ("min(x, 10)", "min(x, 5)"), subject="Clip at 5")
    crlf, body_only = tmp_path / "crlf.patch", tmp_path / "body-crlf.patch"
    crlf.write_bytes(Path(lf).read_bytes().replace(b"\n", b"\r\n"))
    head, _, body = Path(lf).read_text().partition("@@")
    body_only.write_bytes((head + "@@" + body.replace("\n", "\r\n")).encode())
    for entry in (crlf, body_only):
        done = run_python(python, "import transformers.hf_plain as m\nprint(m.clip(20))\n",
                          FIXMONO_HOTFIXES=str(entry))
        lines = logged(done)
        assert done.stdout.split() == ["5"] and len(lines) == 1 and "enabled" in lines[0], lines


def test_a_lazy_module_and_one_imported_before_enable(python, tmp_path):
    """The variable set: the module imported late gets the fix at its import. In a script:
    enable after the import, or before it (enable imports it)."""
    entry = patch(tmp_path, "five.patch", PLAIN, ("min(x, 10)", "min(x, 5)"))
    late = run_python(python, "import transformers\nprint('started')\nimport transformers.hf_plain as m\n"
                              "print(m.clip(20))\n", FIXMONO_HOTFIXES=entry)
    assert late.stdout.split() == ["started", "5"] and len(logged(late)) == 1, late.stdout + late.stderr
    out, _ = script(python, f"import transformers.hf_plain as m\nprint(m.clip(20)); print(e([{entry!r}])[0])\n"
                            f"print(m.clip(20)); d([{entry!r}]); print(m.clip(20))\n")
    assert out[0] == "10" and "enabled" in out[1] and out[2:] == ["5", "10"], out
    out, _ = script(python, f"print(e([{entry!r}])[0])\nimport transformers.hf_plain as m\nprint(m.clip(20))\n")
    assert "enabled" in out[0] and out[1] == "5", out


# --- hole 2: two hot-fixes changing one function ---------------------------------------------

def test_a_second_hot_fix_of_one_function_is_refused_by_name_and_disable_is_exact_in_either_order(python, tmp_path):
    first = patch(tmp_path, "first.patch", PLAIN, ("min(x, 10)", "min(x, 5)"))
    second = patch(tmp_path, "second.patch", PLAIN, ("return min(x, 10)", "return max(min(x, 10), 0)"))
    other = patch(tmp_path, "other.patch", PLAIN, ("x * 2", "x * 3"))  # another function of that module
    show = "print(m.clip(20), m.clip(-3), m.scale(1))\n"
    for order in ((first, other), (other, first)):  # disable in either order
        out, _ = script(python, "import transformers.hf_plain as m\n" + show +
                        f"print(e([{first!r}])[0]); print(e([{second!r}])[0]); print(e([{other!r}])[0])\n" + show +
                        f"print(d([{second!r}])[0])\n" + show +
                        f"d([{order[0]!r}])\n" + show + f"d([{order[1]!r}])\n" + show)
        assert out[0] == "10 -3 2" and "enabled" in out[1] and "enabled" in out[3], out
        assert "not enabled" in out[2] and "hf_plain: clip is changed already" in out[2] and "first.patch" in out[2], out[2]
        assert out[4] == "5 -3 3", out  # the first's change and the other's; not the second's
        assert "not enabled" in out[5] and out[6] == "5 -3 3", out  # the refused one had nothing to take back
        assert out[7] == ("10 -3 3" if order[0] == first else "5 -3 2") and out[8] == "10 -3 2", out


def test_two_patches_with_one_subject_are_two_hot_fixes(python, tmp_path):
    """Mails with the same subject once shared an id: the second said "already enabled" and did nothing."""
    one = patch(tmp_path, "one.patch", PLAIN, ("min(x, 10)", "min(x, 5)"), subject="Fix the scheduler")
    two = patch(tmp_path, "two.patch", PLAIN, ("x * 2", "x * 3"), subject="Fix the scheduler")
    done = run_python(python, "import transformers.hf_plain as m\nprint(m.clip(20), m.scale(1))\n",
                      FIXMONO_HOTFIXES=f"{one},{two}")
    lines = logged(done)
    assert done.stdout.split() == ["5", "3"] and len(lines) == 2 and all(": enabled" in x for x in lines), lines


def test_disable_all_takes_back_the_patch_files_enabled_too(python, tmp_path):
    entry = patch(tmp_path, "five.patch", PLAIN, ("min(x, 10)", "min(x, 5)"))
    out, _ = script(python, f"import transformers.hf_plain as m\ne([{entry!r}]); print(m.clip(20))\n"
                            "said = d(); print(m.clip(20)); print([s for s in said if 'five.patch' in s])\n")
    assert out[:2] == ["5", "10"] and "disabled" in out[2], out


# --- hole 3: methods wrapped by their class (metaclass, class decorator, __init_subclass__) ---

def step_patch(tmp_path: Path, owner: str) -> str:
    """A patch of `owner`.step only: x + 1 becomes x + 2."""
    start = WRAPPED.index(f"class {owner}")
    after = WRAPPED[:start] + WRAPPED[start:].replace("return x + 1", "return x + 2", 1)
    (tmp_path / "step.patch").write_text(unified_diff(WRAPPED, after, "src/transformers/hf_wrapped.py"))
    return str(tmp_path / "step.patch")


@pytest.mark.parametrize("owner", ["ByMetaclass", "ByDecorator", "BySubclass"])
def test_a_method_wrapped_by_its_class_keeps_the_wrapping(python, tmp_path, owner):
    entry = step_patch(tmp_path, owner)
    show = f"m.CALLS.clear(); print(m.{owner}().step(1), len(m.CALLS))\n"
    out, _ = script(python, "import transformers.hf_wrapped as m\n" + show + f"print(e([{entry!r}])[0])\n" +
                    show + f"print(d([{entry!r}])[0])\n" + show)
    assert out[0] == "2 1" and "enabled" in out[1] and out[2] == "3 1", out  # fixed, and still counted
    assert "disabled" in out[3] and out[4] == "2 1", out


def test_a_method_whose_wrapper_hides_it_is_refused_by_name(python, tmp_path):
    entry = step_patch(tmp_path, "BySealedMetaclass")
    show = "m.CALLS.clear(); print(m.BySealedMetaclass().step(1), len(m.CALLS))\n"
    out, _ = script(python, "import transformers.hf_wrapped as m\n" + show + f"print(e([{entry!r}])[0])\n" + show)
    assert out[0] == out[2] == "2 1", out
    assert "not enabled" in out[1] and "BySealedMetaclass.step" in out[1] and "wrap" in out[1], out[1]


# --- hole 4: a closure made at import ------------------------------------------------------

def test_a_closure_made_at_import_is_refused_by_name(python, tmp_path):
    for change in (("return min(x, limit)", "return min(x, limit - 5)"), ("def make_handler(limit):\n",
                                                                          "def make_handler(limit):\n    limit = 5\n")):
        entry = patch(tmp_path, "handler.patch", CLOSURES, change, module="hf_closures")
        out, _ = script(python, f"import transformers.hf_closures as m\nprint(m.handler(20))\n"
                                f"print(e([{entry!r}])[0]); print(m.handler(20), m.make_handler(10)(20))\n")
        assert out[0] == "10" and out[2] == "10 10", out
        assert "not enabled" in out[1] and "make_handler" in out[1] and "closure made at import" in out[1], out[1]


def test_a_nested_helper_made_at_each_call_is_enabled(python, tmp_path):
    entry = patch(tmp_path, "once.patch", CLOSURES, ("return y + 1", "return y + 10"), module="hf_closures")
    out, _ = script(python, f"import transformers.hf_closures as m\nprint(m.twice(0))\nprint(e([{entry!r}])[0])\n"
                            f"print(m.twice(0)); d([{entry!r}]); print(m.twice(0))\n")
    assert out[0] == "2" and "enabled" in out[1] and out[2:] == ["20", "2"], out


# --- hole 5: disable with nothing enabled -------------------------------------------------

NO_TORCH = '''import sys


class Absent:  # torch, jax and TransformerEngine not installed here
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("torch", "jax", "jaxlib", "transformer_engine"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, Absent())
'''


def test_disable_with_nothing_enabled_and_no_torch_does_nothing_and_says_so(python):
    done = run_python(python, NO_TORCH + "from fixmono.runtime.hotfixes import disable_hotfixes\n"
                                         "said = disable_hotfixes()\nprint(len(said), sum('nothing' in s or 'not' in s "
                                         "for s in said))\n")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    total, idle = done.stdout.split()
    assert total == idle, done.stdout


def test_disable_with_nothing_enabled_leaves_torch_settings_alone(python):
    """The MoE determinism recipe's remove turned deterministic algorithms off even when never enabled."""
    done = run_python(python, "import torch\ntorch.use_deterministic_algorithms(True)\n"
                              "from fixmono.runtime.hotfixes import disable_hotfixes\ndisable_hotfixes()\n"
                              "print(torch.are_deterministic_algorithms_enabled())\n")
    assert done.returncode == 0 and done.stdout.split() == ["True"], done.stdout + done.stderr


def test_a_hot_fix_that_raises_is_one_line_and_the_others_still_run(monkeypatch):
    """In a script too: one hot-fix's exception does not stop the ones after it."""
    import dataclasses

    from fixmono.model.fix import HotFix
    from fixmono.runtime import hotfixes

    def boom():
        raise RuntimeError("boom")

    first, second = hotfixes.discover()[:2]
    broken = dataclasses.replace(first, hotfix=HotFix(apply=boom, remove=boom))
    fine = dataclasses.replace(second, hotfix=HotFix(apply=lambda: "on", remove=lambda: "off"))
    monkeypatch.setattr(hotfixes, "_chosen", lambda ids: [broken, fine])
    assert hotfixes.enable_hotfixes() == [f"{broken.id}: failed, left off: RuntimeError: boom", f"{fine.id}: on"]
    assert hotfixes.disable_hotfixes() == [f"{fine.id}: off", f"{broken.id}: not removed: RuntimeError: boom"]
