"""The `N passed, N failed` line CI reads is counted from JUnit files."""
import io
import re
import sys
from pathlib import Path

import test_summary


def write_xml(root, label, tests, failures, skipped=0):
    """A JUnit file shaped as pytest writes it: a skipped case holds <skipped message=...>."""
    d = root.joinpath(*label[2:].replace(":", "/").split("/"))
    d.mkdir(parents=True)
    cases = "".join(f'<testcase name="test_{i}"><skipped type="pytest.skip" message="why {i}\n  more">'
                    f'</skipped></testcase>' if i < skipped else f'<testcase name="test_{i}"/>' for i in range(tests))
    (d / "test.xml").write_text(f'<testsuites><testsuite name="pytest" tests="{tests}" failures="{failures}" '
                                f'errors="0" skipped="{skipped}">{cases}</testsuite></testsuites>')


def run(tmp_path, monkeypatch, capsys, output):
    monkeypatch.setattr(sys, "stdin", io.StringIO(output))
    code = test_summary.main(str(tmp_path))
    return code, capsys.readouterr().out.splitlines()[-1]


def test_counts_cases_and_failed_targets(tmp_path, monkeypatch, capsys):
    write_xml(tmp_path, "//a:t1", tests=5, failures=0, skipped=1)
    write_xml(tmp_path, "//a:t2", tests=3, failures=2)
    out = ("//a:t1    PASSED in 1.0s\n//a:t2    FAILED in 2.0s\n"
           "//a:t3    TIMEOUT in 300.0s\n//a:old   (cached) PASSED in 0.1s\n")
    write_xml(tmp_path, "//a:old", tests=2, failures=0)
    code, last = run(tmp_path, monkeypatch, capsys, out)
    assert last == "7 passed, 3 failed" and code == 1


def test_no_targets_is_a_failure(tmp_path, monkeypatch, capsys):
    code, last = run(tmp_path, monkeypatch, capsys, "ERROR: build failed\n")
    assert last == "0 passed, 0 failed" and code == 1


def test_each_skipped_case_is_listed_with_its_reason_before_the_counts(tmp_path, monkeypatch):
    write_xml(tmp_path, "//a:t1", tests=4, failures=0, skipped=2)
    monkeypatch.setattr(sys, "stdin", io.StringIO("//a:t1    PASSED in 1.0s\n"))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    assert test_summary.main(str(tmp_path)) == 0
    assert out.getvalue().splitlines()[-5:] == [
        "SKIPPED //a:t1 test_0: why 0 more", "SKIPPED //a:t1 test_1: why 1 more",
        "ten slowest targets this run (of 1 run, 1 s in all): //a:t1 1 s",
        "1 test targets; 2 test cases skipped", "2 passed, 0 failed"]


def test_a_failing_target_is_named_when_bazel_reports_it_and_every_target_is_in_the_table(tmp_path, monkeypatch):
    """tools/check_fix feeds two runs one after the other; a target with no case of its fix ran none."""
    d = tmp_path / "a" / "t2"
    d.mkdir(parents=True)
    (d / "test.xml").write_text('<testsuites><testsuite tests="2" failures="1" errors="0" skipped="0">'
                                '<testcase name="test_ok"/><testcase name="test_bad[x]"><failure message="no"/>'
                                '</testcase></testsuite></testsuites>')
    write_xml(tmp_path, "//a:t1", tests=3, failures=0, skipped=1)
    write_xml(tmp_path, "//b:none", tests=0, failures=0)
    out = ("INFO: a line\nFAIL: //a:t2 (see /x/test.log)\nmore output\n//a:t1    PASSED in 1.0s\n"
           "//a:t2    FAILED in 2.0s\nINFO: the second run\n//b:none    PASSED in 0.5s\n")
    monkeypatch.setattr(sys, "stdin", io.StringIO(out))
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stdout", printed)
    assert test_summary.main(str(tmp_path)) == 1
    lines = printed.getvalue().splitlines()
    assert lines[1:3] == ["FAIL: //a:t2 (see /x/test.log)", "FAILED //a:t2: test_bad[x]"]  # before the run ended
    table = lines[lines.index("//b:none    PASSED in 0.5s") + 1:]
    assert [line.split() for line in table[:4]] == [["target", "result", "passed", "failed", "skipped"],
                                                    ["//a:t1", "PASSED", "2", "0", "1"],
                                                    ["//a:t2", "FAILED", "1", "1", "0"],
                                                    ["//b:none", "no", "cases", "0", "0", "0"]]
    assert table[-1] == "3 passed, 1 failed"


def test_the_ten_slowest_targets_of_the_run_are_named_before_the_counts(tmp_path, monkeypatch, capsys):
    lines = []
    for n in range(12):
        write_xml(tmp_path, f"//a:t{n}", tests=1, failures=0)
        lines.append(f"//a:t{n}    PASSED in {n + 1}.0s\n")
    write_xml(tmp_path, "//a:old", tests=1, failures=0)
    lines.append("//a:old   (cached) PASSED in 99.0s\n")  # took nothing this run
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(lines)))
    code = test_summary.main(str(tmp_path))
    out = capsys.readouterr().out.splitlines()
    slow = next(line for line in out if line.startswith("ten slowest targets"))
    assert slow == ("ten slowest targets this run (of 12 run, 78 s in all): " +
                    ", ".join(f"//a:t{n} {n + 1} s" for n in range(11, 1, -1)))
    assert out[-1] == "13 passed, 0 failed" and code == 0


def test_every_test_file_is_a_target_the_suite_runs():
    """A tests/test_*.py no `pytest_test` names would pass unseen: the suite (bazel test //tests/...) runs
    only declared targets (test_structure.py was missing once)."""
    here = Path(__file__).resolve().parent
    build = (here / "BUILD.bazel").read_text()
    declared = set(re.findall(r'"(test_\w+\.py)"', build))
    assert sorted(p.name for p in here.glob("test_*.py") if p.name not in declared) == []
