"""The upstream form: transformers patched by the transformation, then used.

The behavioural test patches a copy of the installed transformers (5.23.0,
from requirements.txt) and trains the tiny model through the new
`pin_moe_routing` kwarg. The wheel tests (tag network) run make_patch on
published 5.x wheels and `git am` the result."""
import json
import os
import shutil
from pathlib import Path

import pytest
import transformers

from fixmono.apply.contract import apply_change
from fixmono.model.outcome import Status
from fixmono.testing import git, only_insertions
from fixmono.testing import make_patch
from fixmono.fixes.transformers.moe_determinism.fix import FIX
from fixmono.fixes.transformers.moe_determinism.validate import train_patched

WHEEL_VERSIONS = os.environ.get("TRANSFORMERS_WHEEL_VERSIONS", "5.2.0 5.5.0 5.17.0 5.23.0").split()

def test_patched_transformers_pins_routing_through_the_new_kwarg():
    package = Path(transformers.__file__).parent
    patched = {}
    for change in FIX.changes:
        text = (package / change.path.removeprefix("src/transformers/")).read_text()
        out = apply_change(change, text)
        assert out.status is Status.APPLIED, out.detail
        only_insertions(text, out.new_text)
        patched[change.path] = out.new_text
    result = train_patched(package, patched)
    assert isinstance(result, dict), result
    assert result["equal"] and result["compared"] > 10


@pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads transformers wheels (tag: network)")
@pytest.mark.parametrize("version", WHEEL_VERSIONS)
def test_published_wheel_gets_a_patch_that_applies(tmp_path, version):
    run = make_patch(FIX.id, "--upstream", f"pip:transformers=={version}", "--out", str(tmp_path / "o"), "--json")
    assert run.returncode == 0, run.stderr
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert result["status"] == "applied", result["detail"]
    cache = Path(os.environ.get("FIXMONO_CACHE", Path.home() / ".cache/fixmono"))
    clone = tmp_path / "tf"
    shutil.copytree(cache / "upstreams" / f"transformers-{version}", clone)
    git(clone, "am", str(tmp_path / "o" / result["patch"]))
    again = make_patch(FIX.id, "--upstream", str(clone), "--check", "--json")
    assert json.loads(again.stdout)["runs"][0]["results"][0]["status"] == "already-applied"


@pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads transformers wheels (tag: network)")
@pytest.mark.parametrize("version", ["4.57.1", "4.57.6"])
def test_published_wheel_4x_has_no_moe_integration_so_the_fix_is_not_applicable(tmp_path, version):
    """transformers 4.x has no integrations/moe.py: not-applicable saying where
    it looked, as a wheel and as a checkout, and no advice to pass a checkout."""
    run = make_patch(FIX.id, "--upstream", f"pip:transformers=={version}", "--check", "--json")
    assert run.returncode == 0, run.stderr
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert result["status"] == "not-applicable", result
    assert result["detail"].startswith(f"src/transformers/integrations/moe.py: not in transformers=={version}")
    assert "--upstream" not in result["detail"]
    cache = Path(os.environ.get("FIXMONO_CACHE", Path.home() / ".cache/fixmono"))
    checkout = tmp_path / "tf"
    shutil.copytree(cache / "upstreams" / f"transformers-{version}", checkout)
    run = make_patch(FIX.id, "--upstream", str(checkout), "--check", "--json")
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert result["status"] == "not-applicable" and "integrations/moe.py: not at HEAD" in result["detail"], result
    assert "--upstream" not in result["detail"]
