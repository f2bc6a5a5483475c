"""The reproducer on the installed jax (0.10.2, which has the fix in another
form, inside an `algorithm` branch added since, as fix.py declares: not
reproduced, and the hot-fix has nothing to do), each side in its own
interpreter."""
import json
import subprocess
import sys

from fixmono.runtime.child import child_env

REPRO = "fixmono.fixes.jax.standardize_nan.repro"


def test_the_installed_release_has_the_fix():
    run = subprocess.run([sys.executable, "-m", REPRO, "--json"], capture_output=True, text=True, env=child_env(),
                         timeout=600)
    result = json.loads(run.stdout)
    assert run.returncode == 0 and result["verdict"] == "not-reproduced", run.stdout + run.stderr[-2000:]
    assert result["details"]["patched"]["hotfix"].endswith("already have the diff; nothing to do"), result
