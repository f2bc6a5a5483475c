"""The reproducer two-sided on the installed transformers (5.23.0, the last
release with the bug), each side in a fresh interpreter (the hot-fix reaches a
forward wrapped by a closure decorator through its __wrapped__)."""
import json
import subprocess
import sys

from fixmono.runtime.child import child_env

REPRO = "fixmono.fixes.transformers.umt5_decoder_output_scale.repro"


def test_reproduced_on_the_installed_release_and_the_hot_fix_fixes_it():
    run = subprocess.run([sys.executable, "-m", REPRO, "--json"], capture_output=True, text=True, env=child_env(),
                         timeout=600)
    result = json.loads(run.stdout)
    assert run.returncode == 1 and result["verdict"] == "reproduced", run.stdout + run.stderr[-2000:]
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert abs(before["ratio"] - 64 ** -0.5) < 1e-5 and abs(after["ratio"] - 1) < 1e-5, result
    assert abs(after["loss"] - after["unscaled_loss"]) < 1e-4 < abs(before["loss"] - before["unscaled_loss"]), result
