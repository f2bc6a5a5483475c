"""The upstream form: transformers patched by the transformation, then used.

The behavioural test patches a copy of the installed transformers (5.23.0,
from requirements.txt) and trains the tiny model through the new
`pin_moe_routing` kwarg. The wheel tests (tag network) run make_patch on
published 5.x wheels and `git am` the result."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import transformers

from tools.fixlib.apply import Status, apply_change
from tools.fixlib.testing import git, only_insertions
from tools.fixlib.testing import make_patch
from fixes.transformers.moe_determinism.fix import FIX

WHEEL_VERSIONS = os.environ.get("TRANSFORMERS_WHEEL_VERSIONS", "5.2.0 5.5.0 5.17.0 5.23.0").split()

CHILD = """
import json, sys, torch
import transformers
assert transformers.__file__.startswith(sys.argv[1]), transformers.__file__
from fixes.transformers.moe_determinism.inject import RecomputeRoutingDrift
from fixes.transformers.moe_determinism.models import batch, tiny_model

def grads(kwargs, drift):
    model = tiny_model("mixtral", "eager")
    model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    with RecomputeRoutingDrift() if drift else torch.enable_grad():
        model(**batch()).loss.backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}

base = grads({"use_reentrant": False}, drift=False)
pinned = grads({"pin_moe_routing": True}, drift=True)
print(json.dumps({"equal": all(torch.equal(base[n], pinned[n]) for n in base), "compared": len(base)}))
"""


def test_patched_transformers_pins_routing_through_the_new_kwarg(tmp_path):
    package = Path(transformers.__file__).parent
    copy = tmp_path / "transformers"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for change in FIX.changes:
        target = copy / change.path.removeprefix("src/transformers/")
        out = apply_change(change, target.read_text())
        assert out.status is Status.APPLIED, out.detail
        only_insertions(target.read_text(), out.new_text)
        target.write_text(out.new_text)
    repo_root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{repo_root}"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(copy)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
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
