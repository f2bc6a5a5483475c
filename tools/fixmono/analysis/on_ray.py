"""drift --run --ray ADDRESS: every cell (fix x release) of the behavioural
matrix is a Ray task. Imported only with --ray: Ray is an optional
dependency (`pip install 'fixmono[ray]'`).

Placement comes from the fix: a CPU reproducer runs on any node; one that
needs a GPU asks for num_gpus=1 and its backend as a custom resource
(`ray start --num-gpus=8 --resources='{"rocm": 8}'` on a ROCm node), so it
lands only on a matching node. A backend that no live node offers is
reported (`no node with rocm in the cluster`), before anything is submitted
and again if the last such node dies while its cells wait: never dropped,
never waited on forever.

Each task runs behaviour.run_one on its node: the node builds and caches the
release environments itself, with its own interpreter (or --python, a path
on the nodes), and the result says where it ran (results.where()). A task
whose node or worker died runs again elsewhere up to --retries times (the
driver counts the attempts; Ray's own retries are off), then is `lost` with
the reason. Ctrl-C cancels every task (each worker's finally-blocks stop
its pip and reproducer and remove a half-built environment), then forces
what is still running. The driver keeps the verdicts it got, keyed by fix
source, release, backend and interpreters (results.py), so a second run with
the same inputs submits nothing for them.

A cluster that dies or stops answering is bounded (--ray-timeout, default
30 s): every blocking Ray call runs in a daemon thread that the driver waits
on at most that long, so the driver's main thread never sits inside Ray (Ray
ends the whole process 60 s after its GCS goes away, exit 1, and a thread
blocked in Ray's C++ does not see Ctrl-C). The run then raises ClusterLost,
which carries every verdict that finished; the cells left are `lost`. An
address where something other than Ray listens is refused within the same
bound (connect). At exit, Ray's own atexit ray.shutdown is replaced by one
that is bounded too, and skipped once the cluster is lost.
"""
from __future__ import annotations

import atexit
import dataclasses
import logging
import math
import os
import socket
import sys
import threading
import time

from fixmono.output.progress import step_done
from fixmono.analysis import behaviour, results
from fixmono.analysis.behaviour import LOST, Run
from fixmono.analysis.still_needed import CANNOT_RUN
from fixmono.model.errors import UserError
from fixmono.model.fix import Fix

CHECK_EVERY = 2.0  # seconds between looks at which nodes are alive, while cells wait
CANCEL_GRACE = 15.0  # seconds a cancelled task has to clean up before it is forced
TIMEOUT = 30.0  # default seconds the cluster has to answer one call (--ray-timeout, FIXMONO_RAY_TIMEOUT)
EXIT_LOST = 4  # drift_matrix's exit code when the cluster was lost mid-run
SHUTDOWN_WITHIN = 10.0  # seconds ray.shutdown has at exit
# an HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS) answers with its SETTINGS
HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
SETTINGS = 4

_lost = threading.Event()  # set once the cluster stopped answering: nothing more is asked of it


class Unanswered(Exception):
    """A Ray call that got no answer within the bound."""


class ClusterLost(Exception):
    """The cluster died or stopped answering mid-run. `runs`: every cell, as run_matrix returns them: the
    verdicts that finished, the other cells `lost`."""

    def __init__(self, message: str, runs: dict):
        super().__init__(message)
        self.runs = runs


def answer_timeout(given: float | None = None) -> float:
    """--ray-timeout, else FIXMONO_RAY_TIMEOUT, else 30 s."""
    if given is not None:
        name, value = f"--ray-timeout {given:g}", given
    else:
        text = os.environ.get("FIXMONO_RAY_TIMEOUT", "").strip()
        name = f"FIXMONO_RAY_TIMEOUT={text}"
        try:
            value = float(text) if text else TIMEOUT
        except ValueError:
            raise UserError(f"{name}: not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise UserError(f"{name}: must be more than 0")
    return value


def bounded(what: str, within: float, call, *args, **kw):
    """call(*args, **kw) in a daemon thread, waited on at most `within` seconds (Unanswered after). The
    caller waits on an Event, where Ctrl-C reaches it; the thread left behind is never joined."""
    if _lost.is_set():
        raise Unanswered(f"{what}: the cluster was already lost")
    out: dict = {}
    finished = threading.Event()

    def target():
        try:
            out["value"] = call(*args, **kw)
        except BaseException as err:  # handed to the caller
            out["error"] = err
        finally:
            finished.set()

    threading.Thread(target=target, name=f"fixmono-{what}", daemon=True).start()
    if not finished.wait(within):
        raise Unanswered(f"{what} got no answer in {within:g} s")
    if "error" in out:
        raise out["error"]
    return out["value"]


def ray_module(within: float = TIMEOUT):
    if "ray" not in sys.modules:
        # read by Ray's C++ when it loads: its driver ends the process (exit 1) this long after the GCS went
        # away, which must come after our own bound; its log lines on stderr are not ours to show
        settings = {"RAY_gcs_rpc_server_reconnect_timeout_s": str(max(60, math.ceil(within) + 60)),
                    "RAY_BACKEND_LOG_LEVEL": "fatal"}
        before = {k: os.environ.get(k) for k in settings}
        os.environ.update({k: v for k, v in settings.items() if before[k] is None})
        try:
            import ray
        except ImportError:
            raise UserError("--ray needs Ray in this environment: pip install 'fixmono[ray]'") from None
        finally:
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)  # not inherited by what the tests start
    import ray
    return ray


def reachable(address: str, within: float) -> None:
    """Something that speaks gRPC at HOST:PORT, else one line within `within` s: ray.init would retry for
    minutes against a closed port, a silent server or an HTTP one."""
    given = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address
    host, sep, port = given.rpartition(":")
    if not sep or "://" in given or not port.isdigit():
        return  # 'auto' without RAY_ADDRESS, ray:// clients: Ray's own check, bounded in connect
    deadline = time.monotonic() + within
    try:
        with socket.create_connection((host, int(port)), timeout=within) as sock:
            if os.environ.get("RAY_USE_TLS", "0") not in ("", "0"):
                return  # a TLS GCS: no plain preface to exchange
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.sendall(HTTP2_HELLO)
            frame = sock.recv(9)
    except socket.timeout:
        raise UserError(f"--ray {address}: nothing answered at {given} in {within:g} s: no Ray cluster there") \
            from None
    except OSError as err:
        raise UserError(f"--ray {address}: no Ray cluster at {given} ({err.strerror or err})") from None
    if len(frame) < 4 or frame[3] != SETTINGS:
        said = "closed the connection" if not frame else f"answered {frame[:8]!r}"
        raise UserError(f"--ray {address}: {given} is not a Ray cluster (it {said}, not gRPC)")


def connect(address: str, within: float | None = None):
    """ray.init for `address` ('auto': RAY_ADDRESS or the local cluster); one line if there is none, or if
    what is there does not answer as Ray within `within` seconds (--ray-timeout)."""
    within = answer_timeout(within)
    started = time.monotonic()
    ray = ray_module(within)
    reachable(address, within)
    atexit.unregister(ray._private.worker.shutdown)  # Ray's own: unbounded against a dead cluster
    atexit.unregister(shutdown)
    atexit.register(shutdown)
    try:
        bounded("ray.init", max(1.0, within - (time.monotonic() - started)), ray.init, address=address,
                log_to_driver=False, logging_level=logging.ERROR, include_dashboard=False)
    except Unanswered:
        _lost.set()  # the half-done ray.init is left to the process's exit
        raise UserError(f"--ray {address}: no answer from a Ray cluster there in {within:g} s") from None
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise UserError(f"--ray {address}: no Ray cluster there ({str(err).splitlines()[0]})") from None
    _lost.clear()
    return ray


def shutdown() -> None:
    """At exit, in place of Ray's own: ray.shutdown, bounded; nothing once the cluster is lost (the
    command-line tools end with os._exit, cli/early.py, so no thread stuck in Ray holds the process)."""
    ray = sys.modules.get("ray")
    if ray is None or _lost.is_set():
        return
    try:
        bounded("ray.shutdown", SHUTDOWN_WITHIN, ray._private.worker.shutdown, _exiting_interpreter=True)
    except Exception:  # nothing to report at exit
        pass


def runnable(fixes: list[Fix]) -> tuple[list[Fix], dict[str, str]]:
    """On a cluster every fix that has a reproducer runs, on a node of its backend."""
    here = [f for f in fixes if f.repro_needs]
    return here, {f.id: "it declares no reproducer backend" for f in fixes if not f.repro_needs}


def cell_task(fix_id: str, version: str, static: str, pythons: list[str], timeout: float, pip_args: list[str],
              fresh: bool) -> dict:
    """One cell on a node (a Ray task): the same run as a local one, under the node's interpreter."""
    from fixmono.analysis.envs import Base
    from fixmono.model.registry import discover

    (fix,) = [f for f in discover() if f.id == fix_id]
    try:
        bases = [Base.of(python) for python in pythons or [sys.executable]]
    except UserError as err:  # a --python that this node does not have
        return dataclasses.asdict(Run(version, static, CANNOT_RUN, str(err), "", 0.0, node=results.where()))
    return dataclasses.asdict(behaviour.run_one(fix, version, static, bases, timeout, pip_args, lambda m: None,
                                                fresh))


def placement(fix: Fix) -> dict:
    if fix.repro_needs == "cpu":  # spread over the nodes (Ray's default packs a node before using the next)
        return {"num_cpus": 1, "scheduling_strategy": "SPREAD"}
    return {"num_cpus": 1, "num_gpus": 1, "resources": {fix.repro_needs: 1}}


def offered(nodes: list[dict], fix: Fix) -> bool:
    """Whether a live node (of ray.nodes()) has what the fix's cells ask for."""
    wanted = {"CPU": 1, **({} if fix.repro_needs == "cpu" else {"GPU": 1, fix.repro_needs: 1})}
    return any(node["Alive"] and all(node["Resources"].get(k, 0) >= v for k, v in wanted.items())
               for node in nodes)


def lost(version: str, static: str, attempts: int, why: str) -> Run:
    return Run(version, static, LOST, why, "", 0.0, attempts=attempts)


def run_matrix(ray, statics: dict, fixes: list[Fix], pythons: list[str], timeout: float, pip_args: list[str],
               retries: int, progress=lambda m: None, fresh: bool = False,
               within: float | None = None) -> dict[str, list[Run]]:
    """Every cell's Run. `within`: seconds the cluster has to answer each call (--ray-timeout); past it,
    ClusterLost with the verdicts that finished."""
    within = answer_timeout(within)
    by_id = {f.id: f for f in fixes}
    interpreters = ["ray", *pythons]
    remote = ray.remote(max_retries=0)(cell_task)  # retries are counted here, not by Ray
    done: dict[tuple[str, str], Run] = {}
    pending: dict = {}  # object ref -> (fix id, version, static, attempt)

    def nodes() -> list[dict]:
        return bounded("ray.nodes", within, ray.nodes)

    def submit(fix_id: str, version: str, static: str, attempt: int) -> None:
        ref = bounded("submitting a cell", within, remote.options(**placement(by_id[fix_id])).remote, fix_id,
                      version, static, pythons, timeout, pip_args, fresh)
        pending[ref] = (fix_id, version, static, attempt)

    def every_cell(why: str = "") -> dict[str, list[Run]]:
        attempts = {(fix_id, version): attempt for fix_id, version, _, attempt in pending.values()}
        return {fix_id: [done.get((fix_id, c.version)) or
                         lost(c.version, c.status, attempts.get((fix_id, c.version), 0), why) for c in cells]
                for fix_id, cells in statics.items()}

    try:
        live = None
        for fix_id, cells in statics.items():
            fix = by_id[fix_id]
            for c in cells:
                earlier = None if fresh else results.load(results.key(fix, c.version, interpreters))
                if earlier is not None:
                    done[(fix_id, c.version)] = Run(**{**earlier, "static": c.status, "reused": True,
                                                       "finding": behaviour.finding(c.status, earlier["verdict"])})
                    continue
                live = nodes() if live is None else live
                if not offered(live, fix):
                    done[(fix_id, c.version)] = Run(c.version, c.status, CANNOT_RUN,
                                                    f"no node with {fix.repro_needs} in the cluster", "", 0.0)
                else:
                    submit(fix_id, c.version, c.status, 1)
        last_look = time.monotonic()
        while pending:
            ready, _ = bounded("ray.wait", within + CHECK_EVERY, ray.wait, list(pending), num_returns=1,
                               timeout=CHECK_EVERY)
            for ref in ready:
                fix_id, version, static, attempt = pending.pop(ref)
                try:
                    run = Run(**{**bounded("ray.get", within, ray.get, ref), "attempts": attempt})
                except ray.exceptions.RayTaskError:
                    raise  # our code failed on the node: a bug, not the cluster
                except ray.exceptions.RayError as err:  # the worker or its node died
                    why = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
                    if attempt <= retries and offered(nodes(), by_id[fix_id]):
                        progress(f"{fix_id} @ {version}: attempt {attempt} lost ({why}); running it again")
                        submit(fix_id, version, static, attempt + 1)
                    else:
                        done[(fix_id, version)] = lost(version, static, attempt, f"lost: node died ({why})")
                        step_done(progress, f"{fix_id} @ {version}", "lost: its node died",
                                  done[(fix_id, version)].seconds)
                    continue
                step_done(progress, f"{fix_id} @ {version}", f"{run.verdict} on {run.node.get('host', '?')}",
                          run.seconds)
                done[(fix_id, version)] = run
                if run.verdict in (behaviour.REPRODUCED, behaviour.NOT_REPRODUCED):
                    results.store(results.key(by_id[fix_id], version, interpreters), dataclasses.asdict(run))
            # asked every round, even with nothing ready: a dead head answers nothing, ray.wait still does
            if time.monotonic() - last_look >= CHECK_EVERY:  # the last node of a backend may have died
                last_look = time.monotonic()
                live = nodes()
                for ref, (fix_id, version, static, attempt) in list(pending.items()):
                    if not offered(live, by_id[fix_id]):
                        bounded("ray.cancel", within, ray.cancel, ref, force=True)
                        del pending[ref]
                        done[(fix_id, version)] = lost(version, static, attempt, f"lost: no node with "
                                                       f"{by_id[fix_id].repro_needs} left in the cluster")
    except Unanswered as err:
        _lost.set()
        raise ClusterLost(f"the Ray cluster was lost ({err}); {len(done)} cell(s) finished",
                          every_cell(f"lost: the cluster was lost ({err})")) from None
    except BaseException:
        cancel(ray, list(pending), within)
        raise
    return every_cell()


def cancel(ray, refs: list, within: float = TIMEOUT) -> None:
    """Ctrl-C: each task interrupted (its clean-up runs on its node), then forced after a grace time. Each
    call bounded: after a lost cluster there is nothing to ask (the nodes' own reapers end their work)."""
    try:
        for ref in refs:
            bounded("ray.cancel", within, ray.cancel, ref, force=False)
        deadline = time.monotonic() + CANCEL_GRACE
        remaining = refs
        while remaining and time.monotonic() < deadline:
            _, remaining = bounded("ray.wait", within, ray.wait, remaining, num_returns=len(remaining), timeout=0.5)
        for ref in remaining:
            bounded("ray.cancel", within, ray.cancel, ref, force=True)
    except Unanswered:
        _lost.set()
