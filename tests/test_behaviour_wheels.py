"""drift_matrix --run on published releases (tag: network): each release in
its own environment built from PyPI's wheels beside this interpreter, the
fix's reproducer run there, its verdict set against make_patch's status.
A sample of the README's full run: the sentinel fix on an affected and a
fixed transformers, the jaxlib plugin fix on an affected jaxlib, and a jax
release that needs a newer Python than this one (cannot-run-here with pip's
reason). (Ctrl-C while a reproducer runs, on a throwaway fix: test_behaviour.py.)"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixmono.runtime.child import child_env

pytestmark = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads wheels (tag: network)")

SENTINEL, PLUGIN, OFFSETS = ("transformers-moe-sentinel-router-grad", "jaxlib-rocm-plugin-discovery",
                             "jax-cudnn-gqa-kv-offsets")


def drift(*args: str, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fixmono.cli.drift", *args], capture_output=True, text=True,
                          env=child_env({**os.environ, "FIXMONO_CACHE": str(cache)}), timeout=1800)


def test_sample_of_the_behavioural_matrix(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    args = ["--fix", SENTINEL, "--fix", PLUGIN, "--fix", OFFSETS, "--versions", "transformers=5.8.0,5.18.0",
            "--versions", "jaxlib=0.9.1", "--versions", "jax=0.11.2", "--run", "--jobs", "2", "--json"]
    proc = drift(*args, cache=cache)
    assert proc.returncode == 0, proc.stderr
    runs = {fix: {r["version"]: r for r in rs} for fix, rs in json.loads(proc.stdout)["runs"].items()}
    assert runs[SENTINEL]["5.8.0"]["static"] == "applied" and runs[SENTINEL]["5.8.0"]["verdict"] == "reproduced"
    assert "transformers 5.8.0" in runs[SENTINEL]["5.8.0"]["detail"]  # that release, not this environment's
    assert (runs[SENTINEL]["5.18.0"]["static"], runs[SENTINEL]["5.18.0"]["verdict"]) == \
        ("already-applied", "not-reproduced")
    assert runs[PLUGIN]["0.9.1"]["verdict"] == "reproduced" and "jaxlib 0.9.1" in runs[PLUGIN]["0.9.1"]["detail"]
    jax_run = runs[OFFSETS]["0.11.2"]
    if sys.version_info < (3, 12):  # jax 0.11 needs Python 3.12: said, not guessed
        assert jax_run["verdict"] == "cannot-run-here" and "different python version" in jax_run["detail"]
    assert not any(r["finding"] for rs in runs.values() for r in rs.values())

    records = sorted(cache.glob("envs/*/*/env.json"))
    assert len(records) == 3  # transformers 5.8.0, 5.18.0, jaxlib 0.9.1
    built = {p: p.stat().st_mtime_ns for p in records}
    again = drift(*args, cache=cache)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["runs"].keys() == runs.keys()
    assert {p: p.stat().st_mtime_ns for p in records} == built  # reused, not rebuilt
    assert not list(cache.glob("envs/*/.building-*"))
