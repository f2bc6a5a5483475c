"""A newcomer's fix from nothing to green in one pass (docs/adding-a-fix.md):
`fixmono new` writes the folder of a working example fix into a copy of the
tree (the folder and its README row, nothing else), and every check
tools/check_fix runs takes it as it is: its inline cases, and the tests/ files
tools/fix_targets.py names with --fix (its cases of the catalogue, property,
validate... tests, and the checks of the catalogue as a whole). Bad input is
one line and nothing written. Also the message that says how to make two
fixes' fixtures share one file."""
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixmono import testing
from fixmono.model.fix import FileChange, Fixture, Rewrite
from tests.helpers import copy_tree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import fix_targets  # noqa: E402  (tools/, beside tools/check_fix)

ROOT = Path(__file__).resolve().parents[1]
FOLDER = Path("fixes/pytorch/scaffold_example")
FIX_ID = "pytorch-scaffold-example"


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def run(copy: Path, *argv: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{copy / 'tools'}{os.pathsep}{copy}", "PYTHONDONTWRITEBYTECODE": "1",
           **extra_env}
    env.pop("XML_OUTPUT_FILE", None)  # the inner pytest must not overwrite Bazel's report
    return subprocess.run([sys.executable, *argv], cwd=copy, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    root = copy_tree(tmp_path_factory.mktemp("tree") / "repo")
    before = digests(root)
    made = run(root, "-m", "fixmono", "new", "pytorch", "scaffold_example", "--target", "torch/_scaffold.py",
               "--function", "Box.fill")
    assert made.returncode == 0, made.stderr
    assert f"tools/check_fix {FIX_ID}" in made.stdout
    after = digests(root)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {"README.md"} | {str(FOLDER / n) for n in ("__init__.py", "BUILD.bazel", "fix.py",
                                                                   "transform.py", "validate.py", "README.md",
                                                                   "fixtures/_scaffold.py")}
    return root


def test_its_row_is_in_the_readme_table(copy):
    rows = [line for line in (copy / "README.md").read_text().splitlines() if line.startswith(f"| {FIX_ID} |")]
    assert rows == [f"| {FIX_ID} | (fill in: upstream file, releases hit, issue) | Python | "
                    f"[README]({FOLDER.as_posix()}/README.md) |"]
    proc = run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_docs.py", "-k", "fix_table")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_its_cases_pass_as_written(copy):
    proc = run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tools/fix_cases_test.py",
               FIX_PACKAGE="fixmono.fixes.pytorch.scaffold_example")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 passed" in proc.stdout  # its three cases, the declares-cases and the distinct-cases checks


def fill_in(root: Path) -> None:
    """Each "(fill in ...)" of the scaffold's folder and its README row written, as its author would."""
    for path in [*(root / FOLDER).rglob("*.md"), *(root / FOLDER).rglob("*.py"), root / "README.md"]:
        text = path.read_text()
        path.write_text(re.sub(r"\(fill in(?:[^()]|\([^()]*\))*\)", "written by its author", text))


def test_every_test_check_fix_runs_takes_it(copy):
    """The tests/ files of tools/check_fix (tools/fix_targets.py, in the copy) with --fix, as check_fix runs them:
    as written, only the check for '(fill in ...)' fails (it names what to write); filled in, all pass."""
    files = [f"tests/{src}" for src in fix_targets.cross_cutting(copy / "tests").values()]
    assert {"tests/test_validate.py", "tests/test_properties.py", "tests/test_catalogue.py"} <= set(files)
    assert "tests/test_docs.py" in files
    unfilled = run(copy, "tools/pytest_main.py", "--fix", FIX_ID, "-rA", *files)
    failed = [line.split()[1] for line in unfilled.stdout.splitlines() if line.startswith("FAILED ")]
    assert failed == [f"tests/test_docs.py::test_no_placeholder_is_left_in_a_fix[{FIX_ID}]"], unfilled.stdout[-5000:]
    fill_in(copy)  # what its author writes; then every check passes
    proc = run(copy, "tools/pytest_main.py", "--fix", FIX_ID, "-rA", *files)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr
    for case in ("test_properties.py::test_reformatted_target_gives_a_correct_edit_or_a_reason",
                 "test_validate.py::test_every_fix_declares_a_check_that_passes_the_fix_and_rejects_no_fix",
                 "test_validate.py::test_a_wrong_output_fails_validation_with_the_reason"):
        assert f"PASSED tests/{case}[{FIX_ID}" in proc.stdout, case


def test_its_example_edit_is_what_the_docs_say(copy, tmp_path):
    fixture = (copy / FOLDER / "fixtures/_scaffold.py").read_text()
    proc = run(copy, "-c", "import sys; from fixmono.model.registry import load; from fixmono.apply.contract import "
                           "apply_change; fix = load('fixmono.fixes.pytorch.scaffold_example'); "
                           "print(apply_change(fix.changes[0], sys.stdin.read()).new_text)", )
    proc = subprocess.run(proc.args, input=fixture, capture_output=True, text=True, cwd=copy,
                          env={**os.environ, "PYTHONPATH": f"{copy / 'tools'}{os.pathsep}{copy}"})
    assert proc.returncode == 0, proc.stderr
    assert "class Box:\n    def fill(self, x):\n        y = x + 1\n        return 0.0\n" in proc.stdout
    assert proc.stdout.count("return None") == 1  # other() is not Box.fill
    commented = fixture.replace("        return None", "        # a comment above the line\n        return None", 1)
    again = subprocess.run(proc.args, input=commented, capture_output=True, text=True, cwd=copy,
                           env={**os.environ, "PYTHONPATH": f"{copy / 'tools'}{os.pathsep}{copy}"})
    assert "        # a comment above the line\n        return 0.0\n" in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize("argv, message", [
    (["nosuch", "x", "--target", "a.py", "--function", "f"], "unknown project 'nosuch'"),
    (["pytorch", "Bad-Name", "--target", "a.py", "--function", "f"], "lower case, digits and _"),
    (["pytorch", "x", "--target", "a.cpp", "--function", "f"], "Python transformations"),
    (["pytorch", "x", "--target", "/etc/a.py", "--function", "f"], "a path inside the upstream repository"),
    (["pytorch", "x", "--target", "../a.py", "--function", "f"], "a path inside the upstream repository"),
    (["pytorch", "x", "--target", "a.py", "--function", "1f"], "a function's name, or Class.method"),
    (["pytorch", "x", "--target", "a.py", "--function", "return"], "no keywords"),
    (["pytorch", "x", "--target", "a.py", "--function", "Box.class"], "no keywords"),
    (["pytorch", "x", "--target", "a.py", "--function", "None"], "no keywords"),
    (["pytorch", "x", "--target", 'torch/a".py', "--function", "f"], "as git names it"),
    (["pytorch", "x", "--target", "torch/a\\b.py", "--function", "f"], "as git names it"),
    (["pytorch", "x", "--target", "torch/a\nb.py", "--function", "f"], "as git names it"),
    (["pytorch", "x", "--target", "./torch/x.py", "--function", "f"], "as git names it"),
    (["pytorch", "x", "--target", "torch//x.py", "--function", "f"], "as git names it"),
    (["pytorch", "scan_closure_grad", "--target", "a.py", "--function", "f"], "already there"),
    (["pytorch", "x", "--target", "a.py"], "--function"),
    (["pytorch", "x", "--target", "a.py", "--function", "f", "--into", "/tmp"], "not a checkout of this repository"),
])
def test_bad_input_is_one_line_and_nothing_written(argv, message):
    before = digests(ROOT / "fixes")
    proc = subprocess.run([sys.executable, "-m", "fixmono", "new", *argv], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "tools")})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert proc.stderr.startswith("fixmono new: error: ") and digests(ROOT / "fixes") == before


class CountMarker:
    """A transform double: one site where its marker stands, fixed where the marker is followed by '!'."""
    description = "mark"

    def __init__(self, marker):
        self.marker = marker

    def rewrite(self, text):
        changed = text.count(self.marker + "\n")
        return Rewrite(text.replace(self.marker + "\n", self.marker + "!\n"), changed, text.count(self.marker + "!"))


class StubFix:
    def __init__(self, fix_id, change, text):
        self.id, self.upstream, self.changes, self.text = fix_id, "pytorch", (change,), text

    def fixture_text(self, change):
        return self.text


def marked(fix_id: str, marker: str, path: str, text: str) -> StubFix:
    """A fix whose one site is `marker`'s line in `path`, its fixture `text`."""
    return StubFix(fix_id, FileChange(path, CountMarker(marker), sites=1, fixture=Fixture("x")), text)


def refusal(monkeypatch, path: str, text_a: str, text_b: str) -> str:
    """Why catalogue_tree cannot hold fix-a's fixture `text_a` and fix-b's `text_b` of one file."""
    monkeypatch.setattr(testing, "discover", lambda: [marked("fix-a", "# A", path, text_a),
                                                      marked("fix-b", "# B", path, text_b)])
    with pytest.raises(AssertionError) as err:
        testing.catalogue_tree("pytorch")
    return str(err.value)


def test_two_fixes_on_one_file_whose_fixtures_clash_are_told_how(monkeypatch):
    """Each fixture holds the other's marker too: joined, each fix finds two sites where it declares one."""
    message = refusal(monkeypatch, "torch/shared.py", "# A\n# B!\n# B!\n", "# B\n# A!\n# A!\n")
    assert "no fixture of ['fix-a', 'fix-b'] lets all of them apply; on their fixtures merged: fix-a: " in message
    assert "match contract expects 1 site(s)" in message and "'Two fixes on one file'" in message


TRAINER_A = "import os\n\n\nclass Trainer:\n    def save(self):\n        return os.sep  # A\n"
TRAINER_B = ("import os\n\n\nclass Trainer:\n    class State:\n        step = 0\n\n    def train(self):\n"
             "        return 1  # B\n\n\ndef helper():\n    return 2\n")


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_two_fixes_framed_in_one_class_get_one_class(monkeypatch, order):
    """Two fixtures of one file framed under the same `class Trainer:` (an imported fix's fixture stands under
    git's header): the tree holds one class with both methods, one `import os`, and both fixes apply there,
    so a fix's check that looks up *the* class finds one."""
    import ast
    a, b = marked("fix-a", "# A", "torch/trainer.py", TRAINER_A), marked("fix-b", "# B", "torch/trainer.py", TRAINER_B)
    monkeypatch.setattr(testing, "discover", lambda: [a, b] if order == "ab" else [b, a])
    text = testing.catalogue_tree("pytorch")["torch/trainer.py"]
    module = ast.parse(text)
    (trainer,) = [n for n in module.body if isinstance(n, ast.ClassDef)]
    assert sorted(n.name for n in trainer.body) == ["State", "save", "train"]
    assert [type(n).__name__ for n in module.body].count("Import") == 1
    assert "def helper():" in text and text.count("# A\n") == 1 and text.count("# B\n") == 1


def test_two_fixtures_defining_one_method_differently_are_named(monkeypatch):
    """One method with two bodies cannot stand once in one class: the failure names the method."""
    message = refusal(monkeypatch, "torch/trainer.py", "class Trainer:\n    def save(self):\n        return 1  # A\n",
                      "class Trainer:\n    def save(self):\n        return 2  # B\n")
    assert "Trainer.save is defined by both fixtures, differently" in message


@pytest.mark.parametrize("name, function", [("plain_example", "fill_value"), ("none", "neighbour"),
                                            ("python_transform", "A.B.c"), ("true", "other")])
def test_other_names_and_functions_scaffold_green_too(tmp_path, name, function):
    """Names that were a keyword or an import as the class's name, a function named like the fixture's other def,
    three parts: the folder still imports and its cases pass (a review found the first three broke the tool)."""
    root = copy_tree(tmp_path / "repo")
    made = run(root, "-m", "fixmono", "new", "transformers", name, "--target",
               "src/transformers/plain.py", "--function", function)
    assert made.returncode == 0, made.stderr
    proc = run(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tools/fix_cases_test.py",
               FIX_PACKAGE=f"fixmono.fixes.transformers.{name}")
    assert proc.returncode == 0 and "5 passed" in proc.stdout, proc.stdout + proc.stderr
    status = run(root, "-m", "fixmono", "status", "--json")
    assert status.returncode == 0, status.stderr  # the catalogue still imports
    if name != "plain_example":
        return
    again = run(root, "-m", "fixmono", "new", "transformers", "plain_example", "--target",
                "src/transformers/plain.py", "--function", "fill_value")
    assert again.returncode == 2 and "already there" in again.stderr


@pytest.mark.parametrize("readme, expected", [
    ("# X\n\n| fix | upstream, releases hit | kind | README |\n|---|---|---|---|\n| a | b | c | d |",  # last, no EOL
     "# X\n\n| fix | upstream, releases hit | kind | README |\n|---|---|---|---|\n| a | b | c | d |\nROW"),
    ("# X\r\n\r\n| fix | upstream, releases hit | kind | README |\r\n|---|---|---|---|\r\n| a | b | c | d |\r\n\r\n## Next\r\n",
     "# X\r\n\r\n| fix | upstream, releases hit | kind | README |\r\n|---|---|---|---|\r\n| a | b | c | d |\r\nROW\r\n"
     "\r\n## Next\r\n"),
    ("| fix | upstream, releases hit | kind | README |\n|---|---|---|---|\n## Next\n",  # an empty table
     "| fix | upstream, releases hit | kind | README |\n|---|---|---|---|\nROW\n## Next\n"),
])
def test_the_row_goes_after_the_tables_last_row_in_the_readmes_own_line_ends(readme, expected):
    from fixmono.cli.import_patch import with_rows
    assert with_rows(readme, ["ROW"]) == expected


@pytest.mark.parametrize("failure", [OSError(30, "Read-only file system"), KeyboardInterrupt()],
                         ids=["README not writable", "interrupted"])
def test_a_failure_as_the_readme_is_written_takes_the_folder_back(tmp_path, monkeypatch, failure):
    from fixmono.cli import import_patch
    from fixmono.model.errors import UserError
    (tmp_path / "fixes").mkdir()
    readme = "| fix | upstream, releases hit | kind | README |\n|---|---|---|---|\n"
    (tmp_path / "README.md").write_text(readme)

    def fail(path, text):
        raise failure
    monkeypatch.setattr(import_patch, "swap_in", fail)
    with pytest.raises(UserError if isinstance(failure, OSError) else KeyboardInterrupt) as err:
        import_patch.write(tmp_path, [(Path("fixes/pytorch/x"), {"fix.py": "", "fixtures/a.py": ""})], ["ROW"])
    assert sorted(p.name for p in (tmp_path / "fixes").rglob("*")) == ["pytorch"]  # no folder, no staging
    assert (tmp_path / "README.md").read_text() == readme
    if isinstance(failure, OSError):
        assert "nothing was written" in str(err.value)


def test_the_checkouts_launcher_writes_into_its_own_checkout_from_anywhere(copy, tmp_path):
    """tools/new_fix (the README's command) run from another folder: the fix goes into the checkout it belongs to."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    made = subprocess.run([sys.executable, str(copy / "tools" / "new_fix"), "jax", "launcher_example", "--target",
                           "jax/_src/example.py", "--function", "scale"], cwd=elsewhere, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert made.returncode == 0, made.stderr
    assert (copy / "fixes/jax/launcher_example/fix.py").is_file() and list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("other", ["class Trainer(Base):\n    def train(self):\n        return 1  # B\n",
                                   "@dataclass\nclass Trainer:\n    def train(self):\n        return 1  # B\n",
                                   "class Trainer: x = 1  # B\n"])
def test_one_class_framed_with_different_class_lines_is_named(monkeypatch, other):
    """Bases, decorators or a one-line body that differ: no single class line is right for both fixes."""
    message = refusal(monkeypatch, "torch/trainer.py", "class Trainer:\n    def save(self):\n        return 1  # A\n", other)
    assert "Trainer is framed by the fixtures with different class lines" in message


def test_a_fixture_that_is_not_a_module_is_named_not_crashed_on(monkeypatch):
    message = refusal(monkeypatch, "torch/trainer.py", "class Trainer:\n    def save(self):\n        return 1  # A\n",
                      "    def train(self):\n        return 1  # B\n")
    assert "a fixture does not parse as a module" in message and "on the last of them" in message
