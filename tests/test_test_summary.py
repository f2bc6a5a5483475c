"""The `N passed, N failed` line CI reads is counted from JUnit files."""
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import test_summary


def write_xml(root, label, tests, failures, skipped=0, timeout=None, shard=None):
    """A JUnit file shaped as pytest writes it: a skipped case holds <skipped message=...>; and the test.log
    beside it as Bazel keeps it, with tools/pytest_main.py's TEST_TIMEOUT line (shard: (i, n), Bazel's
    shard_i_of_n folder)."""
    d = root.joinpath(*label[2:].replace(":", "/").split("/"))
    if shard:
        d = d / f"shard_{shard[0]}_of_{shard[1]}"
    d.mkdir(parents=True)
    if timeout:
        (d / "test.log").write_text(f"exec ${{PAGER:-/usr/bin/less}} \"$0\" || exit 1\nExecuting tests from "
                                    f"{label}\n{'-' * 80}\nTEST_TIMEOUT={timeout}\n.....{' ' * 60}[100%]\n")
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
        "ten slowest targets this run (of 1 run, 1 s in all): //a:t1 1 s (timeout unknown)",
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
                    ", ".join(f"//a:t{n} {n + 1} s (timeout unknown)" for n in range(11, 1, -1)))
    assert out[-1] == "13 passed, 0 failed" and code == 0


def test_the_slowest_say_their_share_of_their_timeout_and_over_a_third_is_flagged(tmp_path, monkeypatch, capsys):
    """The share is the run's time over the timeout test.log names; a sharded target's `in` is its slowest shard
    (Bazel's `Stats over` line gives the time of all its shards), its cases are counted over its shards."""
    write_xml(tmp_path, "//a:fast", tests=2, failures=0, timeout=300)
    write_xml(tmp_path, "//a:slow", tests=2, failures=0, timeout=300)
    write_xml(tmp_path, "//a:edge", tests=1, failures=0, timeout=60)
    write_xml(tmp_path, "//a:long", tests=1, failures=0, timeout=900)
    write_xml(tmp_path, "//a:hung", tests=1, failures=1, timeout=300)
    write_xml(tmp_path, "//a:nolog", tests=1, failures=0)
    for i in (1, 2, 3):
        write_xml(tmp_path, "//a:sharded", tests=3, failures=0, timeout=300, shard=(i, 3))
    out = ("//a:fast    PASSED in 50.0s\n//a:slow    PASSED in 120.0s\n//a:edge    PASSED in 20.0s\n"
           "//a:long    PASSED in 250.0s\n//a:hung    TIMEOUT in 300.0s\n//a:nolog    PASSED in 1.0s\n"
           "//a:sharded    PASSED in 110.0s\n  Stats over 3 runs: max = 110.0s, min = 30.0s, avg = 60.0s, dev = 30.0s\n")
    monkeypatch.setattr(sys, "stdin", io.StringIO(out))
    assert test_summary.main(str(tmp_path)) == 1
    lines = capsys.readouterr().out.splitlines()
    slow = next(line for line in lines if line.startswith("ten slowest targets"))
    assert slow == ("ten slowest targets this run (of 7 run, 921 s in all): //a:hung 300 s (timed out), "
                    "//a:long 250 s (28% of 900 s), //a:slow 120 s (40% of 300 s), //a:sharded 110 s (37% of 300 s), "
                    "//a:fast 50 s (17% of 300 s), //a:edge 20 s (33% of 60 s), //a:nolog 1 s (timeout unknown)")
    assert [line for line in lines if line.startswith("OVER")] == [
        "OVER A THIRD OF ITS TIMEOUT //a:hung 300 s (timed out)",
        "OVER A THIRD OF ITS TIMEOUT //a:slow 120 s (40% of 300 s)",
        "OVER A THIRD OF ITS TIMEOUT //a:sharded 110 s (37% of 300 s)"]
    assert ["//a:sharded", "PASSED", "9", "0", "0"] in [line.split() for line in lines]
    assert lines[-1] == "16 passed, 1 failed"


def test_pytest_main_says_its_timeout_and_deals_the_cases_out_over_the_shards(tmp_path):
    """Each shard runs every n-th case, together all of them once; it tells Bazel it shards (the status file),
    a shard left with no case passes, and test.log starts with the timeout test_summary reads."""
    main = Path(__file__).resolve().parents[1] / "tools" / "pytest_main.py"
    (tmp_path / "test_some.py").write_text("import os, pytest\n@pytest.mark.parametrize('n', range(7))\n"
                                           "def test_case(n):\n    print('RAN', n)\n"
                                           "def test_children_run_whole_and_quiet():\n"  # a pytest_main run inside
                                           "    assert not {'TEST_TOTAL_SHARDS', 'TEST_TIMEOUT'} & set(os.environ)\n")
    ran = []
    for total, index in [(3, 0), (3, 1), (3, 2), (9, 8)]:
        status = tmp_path / f"status{total}{index}"
        env = {**os.environ, "TEST_TOTAL_SHARDS": str(total), "TEST_SHARD_INDEX": str(index),
               "TEST_SHARD_STATUS_FILE": str(status), "TEST_TIMEOUT": "300"}
        env.pop("XML_OUTPUT_FILE", None)
        proc = subprocess.run([sys.executable, str(main), "-s", str(tmp_path / "test_some.py")], env=env,
                              cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.splitlines()[0] == "TEST_TIMEOUT=300" and status.exists()
        cases = [int(n) for n in re.findall(r"RAN (\d+)", proc.stdout)]
        assert ("RAN" in proc.stdout) == bool(cases)
        if total == 3:
            assert cases == list(range(index, 7, 3))
            ran += cases
        else:
            assert cases == []
    assert sorted(ran) == list(range(7))


def test_every_test_file_is_a_target_the_suite_runs():
    """A tests/test_*.py no `pytest_test` names would pass unseen: the suite (bazel test //tests/...) runs
    only declared targets (test_structure.py was missing once)."""
    here = Path(__file__).resolve().parent
    build = (here / "BUILD.bazel").read_text()
    declared = set(re.findall(r'"(test_\w+\.py)"', build))
    assert sorted(p.name for p in here.glob("test_*.py") if p.name not in declared) == []
