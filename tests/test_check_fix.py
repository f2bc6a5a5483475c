"""What tools/check_fix runs for one fix: its folder's targets, and the tests/
targets with cases of single fixes or checks of the whole catalogue
(tools/fix_targets.py), run with `--fix ID` (tools/pytest_main.py): only the
cases fixmono.testing.for_fix made for that fix, and the tests marked
`catalogue`. The fixes here are made up; the test file is written by the test."""
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import fix_targets  # noqa: E402
import pytest_main  # noqa: E402

TESTS = textwrap.dedent('''\
    import pytest
    from fixmono.testing import for_fix

    @pytest.mark.parametrize("n", [for_fix("fix-a", 1, id="a"), for_fix(["fix-a", "fix-b"], 2, id="a and b"),
                                   for_fix("fix-b", 3, id="b")])
    def test_per_fix(n):
        assert n != 3, "fix-b's own case fails"

    def test_of_the_framework():
        pass

    @pytest.mark.catalogue
    def test_of_the_whole_catalogue():
        pass
    ''')  # indented here: tools/fix_targets.py does not take this file for one with cases of single fixes


class Outcomes:
    """A pytest plugin keeping each case's outcome."""

    def __init__(self):
        self.seen = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            self.seen[report.nodeid.split("::")[-1]] = report.outcome


def run_with(tmp_path, monkeypatch, *args):
    from fixmono.model import registry
    monkeypatch.setattr(registry, "discover", lambda: [SimpleNamespace(id="fix-a"), SimpleNamespace(id="fix-b"),
                                                       SimpleNamespace(id="fix-c")])
    (tmp_path / "test_made_up.py").write_text(TESTS)
    outcomes = Outcomes()
    code = pytest.main([str(tmp_path / "test_made_up.py"), "-q", "-p", "no:cacheprovider", "--import-mode=importlib", *args],
                       plugins=[pytest_main, outcomes])
    return code, outcomes.seen


@pytest.mark.parametrize("fix_id, expected, code", [
    ("fix-a", {"test_per_fix[a]": "passed", "test_per_fix[a and b]": "passed", "test_of_the_whole_catalogue": "passed"},
     0),
    ("fix-b", {"test_per_fix[a and b]": "passed", "test_per_fix[b]": "failed", "test_of_the_whole_catalogue": "passed"},
     1),
    ("fix-c", {"test_of_the_whole_catalogue": "passed"}, 0),
])
def test_fix_keeps_that_fixs_cases_and_the_catalogue_checks(tmp_path, monkeypatch, fix_id, expected, code):
    assert run_with(tmp_path, monkeypatch, "--fix", fix_id) == (code, expected)


def test_without_fix_every_case_runs(tmp_path, monkeypatch):
    code, seen = run_with(tmp_path, monkeypatch)
    assert code == 1 and len(seen) == 5


def test_a_file_with_no_case_of_the_fix_passes(tmp_path, monkeypatch):
    from fixmono.model import registry
    monkeypatch.setattr(registry, "discover", lambda: [SimpleNamespace(id="fix-a")])
    (tmp_path / "test_other.py").write_text("def test_framework():\n    pass\n")
    assert pytest.main([str(tmp_path / "test_other.py"), "-q", "-p", "no:cacheprovider", "--import-mode=importlib", "--fix", "fix-a"],
                       plugins=[pytest_main]) == 0


def test_an_unknown_fix_is_one_line_and_exit_4(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools/pytest_main.py"), "--fix", "no-such-fix",
                           str(tmp_path / "test_x.py")], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 4 and "--fix no-such-fix: no such fix (known: " in proc.stderr, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and proc.stdout == ""


def test_check_fix_runs_the_folder_then_the_tests_with_cases_of_single_fixes(tmp_path, capsys):
    """A tree of our own: the files that call for_fix or mark catalogue checks, not the framework's."""
    (tmp_path / "fixes/pytorch/a_fix").mkdir(parents=True)
    (tmp_path / "fixes/pytorch/a_fix/fix.py").write_text('FIX = Fix(\n    id="pytorch-a-fix",\n)\n')
    (tmp_path / "fixes/pytorch/.hidden").mkdir(parents=True)
    (tmp_path / "fixes/pytorch/.hidden/fix.py").write_text('FIX = Fix(id="pytorch-hidden")\n')
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "BUILD.bazel").write_text('pytest_test(name = "test_a", srcs = ["test_a.py"])\n'
                                       'pytest_test(\n    name = "test_b",\n    srcs = ["test_b.py"],\n)\n'
                                       'pytest_test(name = "test_c", srcs = ["test_c.py"])\n')
    (tests / "test_a.py").write_text("from fixmono.testing import (\n    catalogue_tree,\n    for_fix,\n)\n")
    (tests / "test_b.py").write_text("@pytest.mark.catalogue\ndef test_b(): pass\n")
    (tests / "test_c.py").write_text("from fixmono.testing import discover  # a framework test\n"
                                     "# not for_fix(...) here\n    @pytest.mark.catalogue  # in a string, say\n")
    assert fix_targets.cross_cutting(tests) == {"//tests:test_a": "test_a.py", "//tests:test_b": "test_b.py"}
    assert fix_targets.main(["pytorch-a-fix"], tmp_path) == 0
    assert capsys.readouterr().out == "//fixes/pytorch/a_fix/...\n//tests:test_a //tests:test_b\n"
    assert fix_targets.main(["pytorch-hidden"], tmp_path) == 2
    assert capsys.readouterr().err == "check_fix: error: unknown fix id 'pytorch-hidden' (known: pytorch-a-fix)\n"


def test_check_fix_says_how_to_call_it():
    proc = subprocess.run(["bash", str(ROOT / "tools/check_fix")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr == "usage: tools/check_fix FIX_ID [bazel test arguments...]\n"
