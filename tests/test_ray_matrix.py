"""drift --run --ray on a real Ray cluster on this machine: a head (no CPUs)
and two worker nodes started by `ray start` (fixmono.testing.RayCluster),
worker 1 with a custom `rocm` resource and one declared GPU, worker 2 with a
CPU only. No network: every cell is a release this interpreter has (no
environment to build) or one whose environment pip is told it cannot find.

Shown: rocm cells land only on worker 1 (by node id), CPU cells spread over
both, a cuda cell no node offers is said, the verdicts equal a local run's
for the same cells (wall times printed side by side), a second run reuses
every verdict, a worker killed mid-run gives a retry on the other node or
`lost` with the count, and Ctrl-C leaves no reproducer running anywhere."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from fixmono.analysis import behaviour
from fixmono.analysis.drift import Cell
from fixmono.analysis.envs import Base
from fixmono.model.registry import discover
from fixmono.runtime.child import child_env
from fixmono.testing import RayCluster, marked

ray = pytest.importorskip("ray", reason="Ray is the optional extra fixmono[ray] (tools/setup installs it)")

from fixmono.analysis import on_ray  # noqa: E402  (imports ray)

BASE = Base.of(sys.executable)
FIXES = {f.id: f for f in discover()}
CPU_FIXES = {  # fix id -> the project whose installed release it runs against here
    "jaxlib-rocm-plugin-discovery": "jaxlib", "jax-cudnn-gqa-kv-offsets": "jax",
    "transformers-moe-sentinel-router-grad": "transformers", "pytorch-memory-budget-rng-recompute": "torch",
}
ROCM_FIX, CUDA_FIX = "pytorch-batchnorm-negative-running-var", "pytorch-sdpa-mask-grad-logsumexp"
OFFLINE = ["--no-index", "--find-links", os.devnull]  # an environment to build fails at once, without network


def statics(ids) -> dict:
    return {fix_id: [Cell(BASE.installed[CPU_FIXES.get(fix_id, "torch")], "applied", "", "n/a")] for fix_id in ids}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cluster-cache")
    env = {"PYTHONPATH": child_env()["PYTHONPATH"], "FIXMONO_CACHE": str(cache),
           "RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
    started = time.monotonic()
    c = RayCluster([{"num_cpus": 1, "num_gpus": 1, "resources": {"rocm": 1}}, {"num_cpus": 1}], env=env)
    print(f"\ncluster of 3 nodes up in {time.monotonic() - started:.1f} s")
    try:
        on_ray.connect(c.address)
        yield c
    finally:
        ray.shutdown()
        c.stop()
        assert [m for i in range(3) if (m := marked(c.mark(i)))] == [], "a Ray process outlived the cluster"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path / "driver-cache"))


def fixes(ids):
    return [FIXES[i] for i in ids]


def test_placement_equality_with_a_local_run_and_reuse(cluster):
    ids = [*CPU_FIXES, ROCM_FIX, CUDA_FIX]
    nodes = cluster.node_ids()
    started = time.monotonic()
    on_cluster = on_ray.run_matrix(ray, statics(ids), fixes(ids), [], 300, OFFLINE, 2, fresh=True)
    cluster_s = time.monotonic() - started
    started = time.monotonic()
    local = behaviour.run_matrix(statics(CPU_FIXES), fixes(CPU_FIXES), [BASE], 1, 300, OFFLINE, fresh=True)
    local_s = time.monotonic() - started
    print(f"\n{len(CPU_FIXES)} CPU cells: local (1 job) {local_s:.1f} s; cluster (2 workers, + rocm/cuda cells) "
          f"{cluster_s:.1f} s")

    (rocm_run,) = on_cluster[ROCM_FIX]
    assert rocm_run.node["ray_node"] == nodes[1] and rocm_run.verdict == "cannot-run-here"  # ran: no ROCm GPU
    assert "rocm" in rocm_run.detail.lower()
    (cuda_run,) = on_cluster[CUDA_FIX]
    assert (cuda_run.verdict, cuda_run.detail) == ("cannot-run-here", "no node with cuda in the cluster")
    cpu_nodes = {on_cluster[i][0].node["ray_node"] for i in CPU_FIXES}
    assert cpu_nodes == {nodes[1], nodes[2]}, "CPU cells should spread over both workers"
    for fix_id in CPU_FIXES:  # the same verdicts as the local run
        assert [(r.version, r.verdict, r.finding) for r in on_cluster[fix_id]] == \
            [(r.version, r.verdict, r.finding) for r in local[fix_id]], fix_id
    assert sum(r.verdict in ("reproduced", "not-reproduced") for rs in on_cluster.values() for r in rs) == 4

    again = on_ray.run_matrix(ray, statics(ids), fixes(ids), [], 300, OFFLINE, 2)
    assert all(again[i][0].reused for i in CPU_FIXES)  # verdicts only: cannot-run-here is never kept
    assert not again[ROCM_FIX][0].reused
    assert [again[i][0].verdict for i in CPU_FIXES] == [on_cluster[i][0].verdict for i in CPU_FIXES]


def running_on(cluster, i: int) -> bool:
    """A reproducer is running on worker i."""
    for pid in marked(cluster.mark(i)):
        try:
            if b"run_repro" in open(f"/proc/{pid}/cmdline", "rb").read():
                return True
        except OSError:
            continue
    return False


def test_ctrl_c_cancels_every_task(cluster, tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from fixmono.analysis import on_ray
        from fixmono.analysis.drift import Cell
        from fixmono.model.registry import discover
        ray = on_ray.connect({cluster.address!r})
        fixes = [f for f in discover() if f.id == "transformers-pin-moe-routing"]
        cells = {{"transformers-pin-moe-routing": [Cell({BASE.installed['transformers']!r}, "applied", "", "n/a")]}}
        on_ray.run_matrix(ray, cells, fixes, [], 300, [], 0, fresh=True)
    """)
    driver = subprocess.Popen([sys.executable, "-c", script], env=child_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (running_on(cluster, 1) or running_on(cluster, 2)) and time.monotonic() < deadline:
            assert driver.poll() is None, driver.stderr.read()
            time.sleep(0.2)
        driver.send_signal(signal.SIGINT)
        _, err = driver.communicate(timeout=90)
    finally:
        driver.kill()
    assert driver.returncode != 0 and "KeyboardInterrupt" in err
    deadline = time.monotonic() + 30
    while (running_on(cluster, 1) or running_on(cluster, 2)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not running_on(cluster, 1) and not running_on(cluster, 2)


def run_in_thread(*args, **kw):
    out = {}
    thread = threading.Thread(target=lambda: out.update(result=on_ray.run_matrix(*args, **kw)))
    thread.start()
    return thread, out


def test_a_killed_worker_gives_a_retry_then_lost(cluster):
    """Last: it kills both workers. First worker 2 dies under a CPU cell, which runs again on worker 1
    (attempt 2); then worker 1, the only rocm node, dies under a rocm cell with no retry left: lost."""
    slow = "transformers-pin-moe-routing"  # ~20 s: long enough to be killed under
    nodes = cluster.node_ids()
    cells = {slow: [Cell(BASE.installed["transformers"], "applied", "", "n/a")]}
    blocker = on_ray.placement(FIXES[slow])  # keep worker 1 busy so that the cell starts on worker 2
    hold = ray.remote(lambda: time.sleep(8)).options(**blocker, resources={"fixmono_worker_1": 1}).remote()
    thread, out = run_in_thread(ray, cells, fixes([slow]), [], 300, [], 1, fresh=True)
    deadline = time.monotonic() + 120
    while not running_on(cluster, 2) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert running_on(cluster, 2)
    cluster.kill(2)
    thread.join(400)
    ray.get(hold)
    (run,) = out["result"][slow]
    assert (run.attempts, run.node["ray_node"], run.verdict) == (2, nodes[1], "reproduced")
    summary = behaviour.summary(out["result"])
    assert "1 ran again after their node died" in summary

    rocm_cells = {ROCM_FIX: [Cell(BASE.installed["torch"], "applied", "", "n/a")]}
    thread, out = run_in_thread(ray, rocm_cells, fixes([ROCM_FIX]), [], 300, [], 0, fresh=True)
    deadline = time.monotonic() + 120
    while not running_on(cluster, 1) and time.monotonic() < deadline:
        time.sleep(0.2)
    cluster.kill(1)
    thread.join(120)
    (run,) = out["result"][ROCM_FIX]
    assert run.verdict == "lost" and run.detail.startswith("lost: ") and run.attempts == 1
    assert "1 lost" in behaviour.summary(out["result"])
