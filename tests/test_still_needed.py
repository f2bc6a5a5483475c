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
