"""Against scan.py of published torch wheels (read by HTTP range requests; tag
network): the status on each kind of release, --validate on each affected one."""
import json
import os

import pytest

from fixmono.fixes.pytorch.scan_closure_grad.fix import FIX
from fixmono.testing import make_patch

EXPECTED = {"2.9.1": "not-applicable", "2.10.0": "applied", "2.12.1": "applied", "2.13.0": "already-applied",
            "2.15.0": "already-applied"}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_published_release(version):
    run = make_patch(FIX.id, "--upstream", f"pip:torch=={version}", "--check", "--validate", "--json",
                     env={**os.environ, "PIP_CONSTRAINT": os.devnull})  # a machine's torch cap must not hide 2.15
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert result["status"] == EXPECTED[version], result
