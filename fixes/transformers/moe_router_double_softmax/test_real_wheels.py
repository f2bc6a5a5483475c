"""Against published transformers wheels (tag network; ~10 MB each): the status
on each kind of release, the rewrite of 5.5.4 equal to 5.6.0's routers, and the
reproducer two-sided on 5.5.4 installed apart (its tokenizers pin beside it)."""
import ast
import json
import os
import subprocess
import sys

import pytest

from fixmono.fixes.transformers.moe_router_double_softmax.fix import FIX
from fixmono.fixes.transformers.moe_router_double_softmax.routers import FAMILIES
from fixmono.fixes.transformers.moe_router_double_softmax.transform import TRANSFORM
from fixmono.runtime.child import child_env
from fixmono.sources.open import open_upstream
from fixmono.testing import release_result

REPRO = "fixmono.fixes.transformers.moe_router_double_softmax.repro"
EXPECTED = {"5.0.0": "applied", "5.5.4": "applied", "5.6.0": "already-applied", "5.23.0": "already-applied"}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_published_release(version):
    result = release_result(FIX.id, "transformers", version)
    assert result["status"] == EXPECTED[version], result


def routers(text: str) -> dict[str, str]:
    lines = text.splitlines()
    return {n.name: "\n".join(lines[n.lineno - 1:n.end_lineno]) for n in ast.parse(text).body
            if isinstance(n, ast.ClassDef) and n.name.endswith("TopKRouter")}


def test_rewrite_of_the_last_affected_release_is_upstreams_fix():
    last, first_fixed = open_upstream("pip:transformers==5.5.4"), open_upstream("pip:transformers==5.6.0")
    for family in FAMILIES:
        ours = routers(TRANSFORM.rewrite(last.read(family.path).decode()).source)
        theirs = routers(first_fixed.read(family.path).decode())
        assert set(family.routers) <= set(ours)
        assert ours == theirs, family.name


def test_reproducer_two_sided_on_5_5_4(tmp_path):
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                          "--target", str(target), "transformers==5.5.4", "tokenizers==0.22.2"],
                         capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": os.devnull})
    assert pip.returncode == 0, pip.stderr
    env = child_env(before=(str(target),))
    run = subprocess.run([sys.executable, "-m", REPRO, "--json"], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.stdout.startswith("{"), run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["verdict"] == "reproduced", run.stdout + run.stderr
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert set(before) == {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"}
    for family in before:
        assert before[family]["router_logits_rows_sum_to_1"] and before[family]["grad_rel_error"] > 0.1
        assert not after[family]["router_logits_rows_sum_to_1"] and after[family]["grad_rel_error"] < 1e-4
