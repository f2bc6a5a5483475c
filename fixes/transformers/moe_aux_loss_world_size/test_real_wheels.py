"""Against published transformers wheels (tag network; ~10 MB each): the status
on each kind of release, with --validate, and the reproducer two-sided on
4.50.3 installed apart (mixtral: no qwen3_moe before 4.51; token averaging
opt-in there), its huggingface_hub and tokenizers pins beside it."""
import json
import os
import subprocess
import sys

import pytest

from fixmono.fixes.transformers.moe_aux_loss_world_size.fix import FIX
from fixmono.runtime.child import child_env
from fixmono.testing import release_result

REPRO = "fixmono.fixes.transformers.moe_aux_loss_world_size.repro"
EXPECTED = {"4.46.1": "not-applicable", "4.46.2": "applied", "4.57.6": "applied", "5.24.0": "applied"}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_published_release(version):
    result = release_result(FIX.id, "transformers", version)
    assert result["status"] == EXPECTED[version], result


def test_reproducer_two_sided_on_4_50_3(tmp_path):
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                          "--target", str(target), "transformers==4.50.3", "huggingface_hub==0.36.0",
                          "tokenizers==0.21.4"],
                         capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": os.devnull})
    assert pip.returncode == 0, pip.stderr
    run = subprocess.run([sys.executable, "-m", REPRO, "--json"], capture_output=True, text=True,
                         env=child_env(before=(str(target),)), timeout=600)
    assert run.stdout.startswith("{"), run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["verdict"] == "reproduced" and result["details"]["model"] == "mixtral", run.stdout
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert abs(before["aux_ratio"] - 2) < 1e-3 and abs(after["aux_ratio"] - 1) < 1e-4
    assert after["grad_rel_diff"] < 1e-4 < before["grad_rel_diff"]
