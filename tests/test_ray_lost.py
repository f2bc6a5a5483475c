"""drift --run --ray when the cluster is lost or was never Ray: a real Ray
cluster on 127.0.0.1 (fixmono.testing.RayCluster: a head that runs nothing,
one CPU worker) whose head is killed or frozen, and plain TCP servers that
are not Ray. The command line runs in a child process, as a user runs it;
only its static part (which reads wheels from the network) is replaced by
cells at the releases installed here (DRIVER).

Shown: a head killed or frozen mid-run, or killed before the first cell, is
fixmono's one line and exit code 4 within --ray-timeout (or
FIXMONO_RAY_TIMEOUT), with the verdicts that finished in the report, --out
and --json; Ctrl-C after the head is killed is 130; an address where
something other than Ray listens (silent, HTTP, closing at once, through
RAY_ADDRESS too) is one line and exit 2 within the bound. No process is left
behind. The fixes are the test's own (made up, in a copy of the tree): two
whose reproducers answer at once, one whose reproducer runs until it is
killed (the cell that is running when the cluster goes)."""
import json
import re
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from fixmono.analysis.envs import Base
from fixmono.output.progress import STEP_LINE
from fixmono.testing import RayCluster, marked
from tests.helpers import throwaway_fix, tree_env, tree_with_fixes

pytest.importorskip("ray", reason="Ray is the optional extra fixmono[ray] (tools/setup installs it)")

INSTALLED = Base.of(sys.executable).installed
FAST = ["transformers-made-up-fast", "jax-made-up-fast"]
SLOW, SLOW_MODULE = "transformers-made-up-slow", b"made_up_slow"  # runs until killed: lost under the cluster
ANSWERS = ("from fixmono.model.fix import ReproResult, Verdict\nfrom fixmono.runtime.repro import cli\n\n\n"
           "def main(argv=None):\n    return cli(lambda: ReproResult(Verdict.REPRODUCED, 'made up'), '', argv)\n")
RUNS_ON = "import time\n\n\ndef main(argv=None):\n    time.sleep(3600)\n"
VERSIONS = ["--versions", f"transformers={INSTALLED['transformers']}", "--versions", f"jax={INSTALLED['jax']}"]
BOUND = 8  # --ray-timeout in these tests
SLACK = 40  # seconds allowed beyond the bound: a loaded 2-core machine, the cancel grace

# the command line of `fixmono drift`, its static matrix replaced: each fix at the versions asked for, as
# if make_patch applied (STATIC_GATE: wait there until the test says go, e.g. after killing the head)
DRIVER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import fixmono.cli.drift as drift
    from fixmono.analysis.drift import Cell
    from fixmono.cli.early import exit_quietly, interrupt_before_start

    def matrix(fixes, versions, patches, *rest):  # the static step, replaced: whatever else drift passes it
        gate = os.environ.get("STATIC_GATE")
        if gate:
            Path(gate + ".started").touch()
            while not Path(gate).exists():
                time.sleep(0.1)
        return {f.id: [Cell(v, "applied", "", "n/a") for v in versions.get(f.upstream, [])] for f in fixes}

    drift.matrix = matrix
    interrupt_before_start("fixmono")
    exit_quietly(drift.main(sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of this tree with the test's fixes."""
    folders = {"fixes/transformers/made_up_fast": ("transformers", FAST[0], ANSWERS),
               "fixes/jax/made_up_fast": ("jax", FAST[1], ANSWERS),
               "fixes/transformers/made_up_slow": ("transformers", SLOW, RUNS_ON)}
    return tree_with_fixes(tmp_path_factory.mktemp("tree") / "repo", {
        folder: throwaway_fix(upstream, fix_id, f"{upstream}/_made_up.py", repro)
        for folder, (upstream, fix_id, repro) in folders.items()})


def drift(args: list[str], cache: Path, mark: str, tree: Path, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", DRIVER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=tree_env(tree, FIXMONO_CACHE=str(cache), FIXMONO_TEST_DRIVER=mark, **env))


def finish(proc: subprocess.Popen, within: float) -> tuple[str, str, float]:
    started = time.monotonic()
    try:
        out, err = proc.communicate(timeout=within)
    finally:
        proc.kill()
    return out, err, time.monotonic() - started


def one_line(err: str) -> str:
    """The one line that ends the run, after its progress lines (a finished run each: STEP_LINE) and, when
    it was stopped, the table of the finished ones."""
    lines = err.splitlines()
    if "finished before it stopped" in err:
        lines = lines[:next(i for i, line in enumerate(lines) if line.startswith("finished before it stopped"))] + \
            lines[-1:]
    lines = [line for line in lines if not STEP_LINE.match(line)]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def cluster(tmp_path, tree):
    env = {"PYTHONPATH": tree_env(tree)["PYTHONPATH"], "FIXMONO_CACHE": str(tmp_path / "nodes"),
           "RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
    c = RayCluster([{"num_cpus": 1}], env=env)
    try:
        yield c
    finally:
        signal_node(c, 0, signal.SIGCONT)  # a frozen head is killed like the rest
        c.stop()
        assert [m for i in range(2) if (m := marked(c.mark(i)))] == [], "a Ray process outlived the cluster"


@pytest.fixture
def driver_mark(tmp_path):
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    yield mark
    assert marked(f"FIXMONO_TEST_DRIVER={mark}") == [], "the driver (or a child of it) outlived the test"


def signal_node(cluster, i: int, sig: int) -> None:
    for pid in marked(cluster.mark(i)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def running(cluster, i: int, module: bytes = b"run_repro") -> bool:
    """A reproducer (of `module`) is running on node i."""
    for pid in marked(cluster.mark(i)):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"run_repro" in cmdline and module in cmdline:
            return True
    return False


def until(condition, proc: subprocess.Popen, within: float = 180) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.2)


def cached_verdicts(cache: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (cache / "results").glob("*.json")]


def slow_cell_running_after_a_verdict(cluster, cache: Path):
    return lambda: cached_verdicts(cache) and running(cluster, 1, SLOW_MODULE)


def test_a_head_killed_mid_run_is_exit_4_with_what_finished(cluster, tmp_path, driver_mark, tree):
    cache, out = tmp_path / "driver", tmp_path / "report.md"
    proc = drift(["--fix", SLOW, *sum((["--fix", f] for f in FAST), []), *VERSIONS, "--run", "--fresh",
                  "--ray", cluster.address, "--json", "--out", str(out)], cache, driver_mark, tree,
                 FIXMONO_RAY_TIMEOUT=str(BOUND))
    until(slow_cell_running_after_a_verdict(cluster, cache), proc)
    cluster.kill(0)
    stdout, stderr, took = finish(proc, BOUND + SLACK)
    print(f"\nhead killed: exit {proc.returncode} {took:.1f} s later (bound {BOUND} s)")

    assert proc.returncode == 4, stderr
    line = one_line(stderr)
    assert line.startswith(f"drift_matrix: error: --ray {cluster.address}: the Ray cluster was lost"), line
    payload = json.loads(stdout)
    assert payload["exit_code"] == 4 and "the Ray cluster was lost" in payload["error"]
    runs = [r for rs in payload["runs"].values() for r in rs]
    finished = [r for r in runs if r["verdict"] in ("reproduced", "not-reproduced")]
    assert finished and len(finished) == len(cached_verdicts(cache))  # every finished verdict kept, and cached
    (slow,) = payload["runs"][SLOW]
    assert slow["verdict"] == "lost" and "the cluster was lost" in slow["detail"]
    assert "lost" in out.read_text() and all(r["version"] in out.read_text() for r in finished)


def test_ctrl_c_after_the_head_is_killed_is_130(cluster, tmp_path, driver_mark, tree):
    cache = tmp_path / "driver"
    proc = drift(["--fix", SLOW, *VERSIONS[:2], "--run", "--fresh", "--ray", cluster.address], cache, driver_mark, tree,
                 FIXMONO_RAY_TIMEOUT="60")  # the bound not reached: Ctrl-C ends it
    until(lambda: running(cluster, 1, SLOW_MODULE), proc)
    cluster.kill(0)
    time.sleep(2)  # the driver is waiting on the dead cluster
    proc.send_signal(signal.SIGINT)
    _, stderr, took = finish(proc, 60)
    print(f"\nCtrl-C after the head was killed: exit {proc.returncode} {took:.1f} s later")
    assert proc.returncode == 130, stderr
    assert one_line(stderr) == "drift_matrix: interrupted; no report was written"


def test_a_head_killed_before_the_first_cell_is_exit_4(cluster, tmp_path, driver_mark, tree):
    cache, gate = tmp_path / "driver", tmp_path / "gate"
    proc = drift(["--fix", FAST[0], *VERSIONS[:2], "--run", "--fresh", "--ray", cluster.address], cache,
                 driver_mark, tree, FIXMONO_RAY_TIMEOUT=str(BOUND), STATIC_GATE=str(gate))
    until(lambda: Path(f"{gate}.started").exists(), proc)  # connected; the static part is running
    cluster.kill(0)
    gate.touch()
    _, stderr, took = finish(proc, BOUND + SLACK)
    print(f"\nhead killed before the first cell: exit {proc.returncode} {took:.1f} s after the static part")
    assert proc.returncode == 4, stderr
    assert "the Ray cluster was lost" in one_line(stderr)
    assert cached_verdicts(cache) == []


def test_a_frozen_head_mid_run_is_exit_4(cluster, tmp_path, driver_mark, tree):
    """The head stopped (SIGSTOP), not dead: its port still accepts, nothing answers."""
    cache = tmp_path / "driver"
    proc = drift(["--fix", SLOW, *sum((["--fix", f] for f in FAST), []), *VERSIONS, "--run", "--fresh",
                  "--ray", cluster.address], cache, driver_mark, tree, FIXMONO_RAY_TIMEOUT=str(BOUND))
    until(slow_cell_running_after_a_verdict(cluster, cache), proc)
    signal_node(cluster, 0, signal.SIGSTOP)
    stdout, stderr, took = finish(proc, BOUND + SLACK)
    print(f"\nhead frozen: exit {proc.returncode} {took:.1f} s later (bound {BOUND} s)")
    assert proc.returncode == 4, stderr
    assert "the Ray cluster was lost" in one_line(stderr)
    assert re.search(r"\d lost", stdout), stdout


def test_a_frozen_head_is_refused_at_connect(cluster, tmp_path, driver_mark, tree):
    signal_node(cluster, 0, signal.SIGSTOP)
    proc = drift(["--fix", FAST[0], *VERSIONS[:2], "--run", "--ray", cluster.address], tmp_path / "driver",
                 driver_mark, tree, FIXMONO_RAY_TIMEOUT=str(BOUND))
    _, stderr, took = finish(proc, BOUND + SLACK)
    assert proc.returncode == 2, stderr
    assert one_line(stderr).startswith(f"drift_matrix: error: --ray {cluster.address}: "), stderr


def serve(kind: str):
    """A server on 127.0.0.1 that is not Ray: `silent` accepts and says nothing, `http` answers HTTP,
    `close` accepts and closes at once. Returns (port, stop)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop, held = threading.Event(), []

    def loop():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            if kind == "silent":
                held.append(conn)
                continue
            if kind == "http":
                conn.settimeout(2)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass
            conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()

    def close():
        stop.set()
        thread.join(5)
        for conn in [listener, *held]:
            conn.close()

    return listener.getsockname()[1], close


@pytest.mark.parametrize("kind,through", [("silent", "--ray"), ("http", "--ray"), ("close", "--ray"),
                                          ("silent", "RAY_ADDRESS"), ("silent", "--ray-timeout")])
def test_an_address_where_something_else_listens_is_exit_2(kind, through, tmp_path, driver_mark, tree):
    """The address through --ray or RAY_ADDRESS (--ray auto); the bound through FIXMONO_RAY_TIMEOUT or
    --ray-timeout."""
    port, close = serve(kind)
    address = f"127.0.0.1:{port}"
    env = {"RAY_ADDRESS": address} if through == "RAY_ADDRESS" else {}
    bound = ["--ray-timeout", str(BOUND)] if through == "--ray-timeout" else []
    env.update({} if bound else {"FIXMONO_RAY_TIMEOUT": str(BOUND)})
    try:
        proc = drift(["--fix", FAST[0], *VERSIONS[:2], "--run", "--ray", "auto" if through == "RAY_ADDRESS"
                      else address, *bound], tmp_path / "driver", driver_mark, tree, **env)
        _, stderr, took = finish(proc, BOUND + SLACK)
    finally:
        close()
    print(f"\n{kind} server: exit {proc.returncode} after {took:.1f} s")
    assert proc.returncode == 2, stderr
    assert one_line(stderr).startswith("drift_matrix: error: --ray "), stderr
    assert address in stderr


@pytest.mark.parametrize("given,env,message", [
    (["--ray-timeout", "0"], {}, "--ray-timeout 0: must be more than 0"),
    ([], {"FIXMONO_RAY_TIMEOUT": "soon"}, "FIXMONO_RAY_TIMEOUT=soon: not a number of seconds"),
])
def test_the_ray_timeout_is_checked_before_anything(given, env, message, tree):
    proc = subprocess.run([sys.executable, "-m", "fixmono.cli.drift", "--fix", FAST[0], "--run", "--ray",
                           "127.0.0.1:1", *given], capture_output=True, text=True, timeout=60,
                          env=tree_env(tree, **env))
    assert proc.returncode == 2 and one_line(proc.stderr) == f"drift_matrix: error: {message}"
    assert "--ray-timeout" in subprocess.run([sys.executable, "-m", "fixmono.cli.drift", "--help"],
                                             capture_output=True, text=True, timeout=60, env=tree_env(tree)).stdout
