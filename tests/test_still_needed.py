"""make_patch --check-upstream: reproducer verdicts mapped to still-needed /
fixed-upstream / cannot-run-here."""
import json

import pytest

from fixmono.analysis.still_needed import CANNOT_RUN, FIXED_UPSTREAM, STILL_NEEDED, classify
from tests.helpers import make_patch


@pytest.mark.parametrize("code,report,status", [
    (1, {"verdict": "reproduced", "summary": "differ"}, STILL_NEEDED),
    (1, None, CANNOT_RUN),  # a crash (a traceback exits 1 too) is not a reproduction
    (0, {"summary": "agree", "needs": None}, FIXED_UPSTREAM),
    (0, {"summary": "agree on cpu", "needs": "ROCm"}, CANNOT_RUN),
    (77, {"summary": "no GPU", "needs": "a GPU"}, CANNOT_RUN),
    (3, None, CANNOT_RUN),
])
def test_classify(code, report, status):
    assert classify(code, report)[0] == status


def test_cli_runs_the_reproducer_and_says_what_it_needs():
    run = make_patch("te-rocm-unfused-bias-grad-fp32-wgrad", "--check-upstream", "--json")
    assert run.returncode == 0, run.stderr
    (result,) = json.loads(run.stdout)["check_upstream"]
    assert result["status"] == CANNOT_RUN and "ROCm" in result["detail"]


def test_check_upstream_takes_no_upstream():
    run = make_patch("--all", "--check-upstream", "--upstream", "default")
    assert run.returncode == 2 and "takes no --upstream" in run.stderr


def test_a_reproducer_whose_library_is_missing_is_skipped_naming_it(tmp_path, monkeypatch):
    """A reproducer importing a library this environment lacks would die with
    a traceback (exit 1, read as reproduced); run through run_repro it is
    cannot-run-here, naming the library."""
    from types import SimpleNamespace

    from fixmono.analysis.still_needed import check

    (tmp_path / "somefix").mkdir()
    (tmp_path / "somefix" / "__init__.py").write_text("")
    (tmp_path / "somefix" / "repro.py").write_text("import no_such_library_xyz\n\ndef main():\n    return 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    found = check(SimpleNamespace(id="some-fix", package="somefix"), timeout=60)
    assert found["status"] == CANNOT_RUN and "needs no_such_library_xyz" in found["detail"], found
