"""The reproducer two-sided on the installed transformers (5.23.0, the last
release with the bug), each side in a fresh interpreter; the hot-fix sets the
class attribute `_can_record_outputs` to the fixed recorders."""
import json
import subprocess
import sys

from fixmono.runtime.child import child_env

REPRO = "fixmono.fixes.transformers.jetmoe_router_logits_twice.repro"


def test_reproduced_on_the_installed_release_and_the_hot_fix_fixes_it():
    run = subprocess.run([sys.executable, "-m", REPRO, "--json"], capture_output=True, text=True, env=child_env(),
                         timeout=600)
    result = json.loads(run.stdout)
    assert run.returncode == 1 and result["verdict"] == "reproduced", run.stdout + run.stderr[-2000:]
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert before["routers"] == after["routers"] == 4 and before["router_logits"] == 6, before
    assert abs(before["aux_loss"] - before["reference"]) > 1e-3, before
    assert after["router_logits"] == 4 and abs(after["aux_loss"] - after["reference"]) < 1e-6, after
    assert "JetMoePreTrainedModel._can_record_outputs" in after["hotfix"], after
