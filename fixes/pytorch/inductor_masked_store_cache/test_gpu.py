"""On a CUDA device (tag gpu, cuda: never in CI): the reproducer two-sided,
each side compiled with fresh Inductor and Triton caches in its own
interpreter. Measured on an H200 with torch 2.11.0+cu130 (README)."""
import json
import subprocess
import sys

from fixmono.runtime.child import child_env

REPRO = "fixmono.fixes.pytorch.inductor_masked_store_cache.repro"


def test_reproduced_on_cuda_and_the_hot_fix_fixes_it():
    run = subprocess.run([sys.executable, "-m", REPRO, "--json"], capture_output=True, text=True, env=child_env(),
                         timeout=1800)
    result = json.loads(run.stdout)
    assert result["verdict"] == "reproduced", run.stdout + run.stderr[-2000:]
    before, after = result["details"]["unpatched"]["cases"], result["details"]["patched"]["cases"]
    assert before["16384"]["compiled"] == [16384, 16384] and before["16384"]["eager"] == [0, 16384]
    assert all(case["compiled"] == case["eager"] for case in after.values()), after
