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
"""
from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
import time

from fixmono.analysis import behaviour, results
from fixmono.analysis.behaviour import LOST, Run
from fixmono.analysis.still_needed import CANNOT_RUN
from fixmono.model.errors import UserError
from fixmono.model.fix import Fix

CHECK_EVERY = 2.0  # seconds between looks at which nodes are alive, while cells wait
CANCEL_GRACE = 15.0  # seconds a cancelled task has to clean up before it is forced
CONNECT_TIMEOUT = 10.0  # seconds to reach the cluster's GCS port


def ray_module():
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs Ray in this environment: pip install 'fixmono[ray]'") from None
    return ray


def reachable(address: str) -> None:
    """A HOST:PORT with nothing listening is one line at once: ray.init would wait minutes for its GCS."""
    given = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address
    host, sep, port = given.rpartition(":")
    if not sep or "://" in given or not port.isdigit():
        return  # 'auto' without RAY_ADDRESS, ray:// clients: Ray's own check
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as err:
        raise UserError(f"--ray {address}: no Ray cluster at {given} ({err.strerror or err})") from None


def connect(address: str):
    """ray.init for `address` ('auto': RAY_ADDRESS or the local cluster); one line if there is none."""
    ray = ray_module()
    reachable(address)
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, include_dashboard=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise UserError(f"--ray {address}: no Ray cluster there ({str(err).splitlines()[0]})") from None
    return ray


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
    if fix.repro_needs == "cpu":
        return {"num_cpus": 1}
    return {"num_cpus": 1, "num_gpus": 1, "resources": {fix.repro_needs: 1}}


def offered(ray, fix: Fix) -> bool:
    """Whether a live node has what the fix's cells ask for."""
    wanted = {"CPU": 1, **({} if fix.repro_needs == "cpu" else {"GPU": 1, fix.repro_needs: 1})}
    return any(node["Alive"] and all(node["Resources"].get(k, 0) >= v for k, v in wanted.items())
               for node in ray.nodes())


def lost(version: str, static: str, attempts: int, why: str) -> Run:
    return Run(version, static, LOST, why, "", 0.0, attempts=attempts)


def run_matrix(ray, statics: dict, fixes: list[Fix], pythons: list[str], timeout: float, pip_args: list[str],
               retries: int, progress=lambda m: None, fresh: bool = False) -> dict[str, list[Run]]:
    by_id = {f.id: f for f in fixes}
    interpreters = ["ray", *pythons]
    remote = ray.remote(max_retries=0)(cell_task)  # retries are counted here, not by Ray
    done: dict[tuple[str, str], Run] = {}
    pending: dict = {}  # object ref -> (fix id, version, static, attempt)

    def submit(fix_id: str, version: str, static: str, attempt: int) -> None:
        ref = remote.options(**placement(by_id[fix_id])).remote(fix_id, version, static, pythons, timeout,
                                                                 pip_args, fresh)
        pending[ref] = (fix_id, version, static, attempt)

    for fix_id, cells in statics.items():
        fix = by_id[fix_id]
        for c in cells:
            earlier = None if fresh else results.load(results.key(fix, c.version, interpreters))
            if earlier is not None:
                done[(fix_id, c.version)] = Run(**{**earlier, "static": c.status, "reused": True,
                                                   "finding": behaviour.finding(c.status, earlier["verdict"])})
            elif not offered(ray, fix):
                done[(fix_id, c.version)] = Run(c.version, c.status, CANNOT_RUN,
                                                f"no node with {fix.repro_needs} in the cluster", "", 0.0)
            else:
                submit(fix_id, c.version, c.status, 1)
    try:
        last_look = time.monotonic()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=CHECK_EVERY)
            for ref in ready:
                fix_id, version, static, attempt = pending.pop(ref)
                try:
                    run = Run(**{**ray.get(ref), "attempts": attempt})
                except ray.exceptions.RayTaskError:
                    raise  # our code failed on the node: a bug, not the cluster
                except ray.exceptions.RayError as err:  # the worker or its node died
                    why = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
                    if attempt <= retries and offered(ray, by_id[fix_id]):
                        progress(f"{fix_id} @ {version}: attempt {attempt} lost ({why}); running it again")
                        submit(fix_id, version, static, attempt + 1)
                    else:
                        done[(fix_id, version)] = lost(version, static, attempt, f"lost: node died ({why})")
                    continue
                progress(f"{fix_id} @ {version}: {run.verdict} on {run.node.get('host', '?')}")
                done[(fix_id, version)] = run
                if run.verdict in (behaviour.REPRODUCED, behaviour.NOT_REPRODUCED):
                    results.store(results.key(by_id[fix_id], version, interpreters), dataclasses.asdict(run))
            if time.monotonic() - last_look >= CHECK_EVERY:  # the last node of a backend may have died
                last_look = time.monotonic()
                for ref, (fix_id, version, static, attempt) in list(pending.items()):
                    if not offered(ray, by_id[fix_id]):
                        ray.cancel(ref, force=True)
                        del pending[ref]
                        done[(fix_id, version)] = lost(version, static, attempt, f"lost: no node with "
                                                       f"{by_id[fix_id].repro_needs} left in the cluster")
    except BaseException:
        cancel(ray, list(pending))
        raise
    return {fix_id: [done[(fix_id, c.version)] for c in cells] for fix_id, cells in statics.items()}


def cancel(ray, refs: list) -> None:
    """Ctrl-C: each task interrupted (its clean-up runs on its node), then forced after a grace time."""
    for ref in refs:
        ray.cancel(ref, force=False)
    deadline = time.monotonic() + CANCEL_GRACE
    remaining = refs
    while remaining and time.monotonic() < deadline:
        _, remaining = ray.wait(remaining, num_returns=len(remaining), timeout=0.5)
    for ref in remaining:
        ray.cancel(ref, force=True)
