"""The reproducer on the installed jax (0.10.2, which has the fix in another
form, inside an `algorithm` branch added since: not reproduced, and the
hot-fix says so rather than guess), each side in its own interpreter."""
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
    assert "not enabled" in result["details"]["patched"]["hotfix"], result
    assert result["details"]["patched"]["hotfix"].endswith("fixed there in another form? refusing to guess"), result
