"""The `N passed, N failed` line CI reads is counted from JUnit files."""
import io
import sys

import test_summary


def write_xml(root, label, tests, failures, skipped=0):
    d = root.joinpath(*label[2:].replace(":", "/").split("/"))
    d.mkdir(parents=True)
    (d / "test.xml").write_text(f'<testsuites><testsuite name="pytest" tests="{tests}" '
                                f'failures="{failures}" errors="0" skipped="{skipped}"/></testsuites>')


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
