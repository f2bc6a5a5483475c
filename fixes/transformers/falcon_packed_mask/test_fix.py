"""The reproducer two-sided on the installed transformers (5.23.0, the last
release with the bug), each side in a fresh interpreter."""
import json
import subprocess
import sys

from fixmono.runtime.child import child_env

REPRO = "fixmono.fixes.transformers.falcon_packed_mask.repro"


def test_reproduced_on_the_installed_release_and_the_hot_fix_fixes_it():
    run = subprocess.run([sys.executable, "-m", REPRO, "--json"], capture_output=True, text=True, env=child_env(),
                         timeout=600)
    result = json.loads(run.stdout)
    assert run.returncode == 1 and result["verdict"] == "reproduced", run.stdout + run.stderr[-2000:]
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert before["doc_a"] < 1e-5 < 0.05 < before["doc_b"], before  # the first document is unaffected either way
    assert after["doc_a"] < 1e-5 and after["doc_b"] < 1e-5, after
    assert after["hotfix"].endswith("FalconModel.forward from the diff, ported to the installed source"), after
