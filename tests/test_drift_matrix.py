"""The drift matrix over published wheels (tags network, slow): make_patch is
right on every version of the documented range, and the table says how the
static patch fares beside it."""
import os
import subprocess
import sys

import pytest

from tools.fixlib.registry import REPO_ROOT

pytestmark = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads wheels (tag: network)")


def run(*args):
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "drift_matrix"), *args],
                          capture_output=True, text=True)


def test_te_range_is_all_applied_and_static_patch_rate_is_reported():
    proc = run("--fix", "te-rocm-unfused-bias-grad-fp32-wgrad")
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("make_patch: 24/24 fix-versions handled correctly (24 applied")
    assert "| 2.1.0 | applied |" in proc.stdout and "| 2.20.2 | applied | applies |" in proc.stdout


def test_transformers_sample_and_bad_input():
    proc = run("--fix", "transformers-pin-moe-routing", "--versions", "transformers=5.2.0,5.23.0")
    assert proc.returncode == 0, proc.stderr
    assert "| 5.23.0 | applied | applies |" in proc.stdout
    bad = run("--versions", "nosuch=1.0")
    assert bad.returncode == 2 and bad.stderr.startswith("drift_matrix: error:")
