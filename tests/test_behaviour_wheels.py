"""drift_matrix --run on published releases (tag: network): each release in
its own environment built from PyPI's wheels beside this interpreter, the
fix's reproducer run there, its verdict set against make_patch's status.
A sample of the README's full run: the sentinel fix on an affected and a
fixed transformers, the jaxlib plugin fix on an affected jaxlib, and a jax
release that needs a newer Python than this one (cannot-run-here with pip's
reason). Then a Ctrl-C while a reproducer runs."""
import json
import os
import signal
import subprocess
import sys
import time
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


def test_ctrl_c_while_a_reproducer_runs(tmp_path):
    """No environment needed (the base's own transformers): SIGINT once the reproducer runs."""
    from fixmono.analysis.envs import Base

    version = Base.of(sys.executable).installed.get("transformers")
    if version is None:
        pytest.skip("needs transformers in this environment")
    marker = f"FIXMONO_TEST_MARK={time.time_ns()}"
    env = child_env({**os.environ, "FIXMONO_CACHE": str(tmp_path), marker.split("=")[0]: marker.split("=")[1]})
    proc = subprocess.Popen([sys.executable, "-m", "fixmono.cli.drift", "--fix", "transformers-pin-moe-routing",
                             "--versions", f"transformers={version}", "--run"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def reproducers() -> list[int]:
        found = []
        for p in Path("/proc").iterdir():
            try:
                if p.name.isdigit() and int(p.name) != proc.pid and marker.encode() in (p / "environ").read_bytes():
                    found.append(int(p.name))
            except OSError:
                continue
        return found

    try:
        deadline = time.monotonic() + 600
        while not reproducers() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reproducers(), f"the reproducer never started: {proc.stderr.read() if proc.poll() is not None else ''}"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and err == "drift_matrix: interrupted; no report was written\n", err
    time.sleep(0.2)
    assert reproducers() == []
