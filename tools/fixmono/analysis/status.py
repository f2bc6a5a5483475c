"""Status of an environment: which fixes matter for what is installed here
(the runtime hot-fixes are in runtime/hotfixes.py).

For each fix: its project, the installed version of the project's distribution,
the backend here, and whether the installed files already contain the fix (the
fix's presence check run on the installed files, read as text: nothing of the
upstream package is imported for it). `--run` also runs each reproducer
(still_needed.check).

A check's answer is remembered (remembered_status.py): a warm status reads and
hashes the installed files, and loads no fix. Those not remembered are checked
on every core (a process each, forked once the fixes are loaded), the fixes
with the most bytes to read first, and a result is not transformed a second
time (make-patch's fixed-point check: status writes nothing).
"""
from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
import time
from importlib import import_module
from pathlib import Path

from fixmono.analysis import remembered_status, schedule
from fixmono.analysis.remembered_status import Found, Recording
from fixmono.model.errors import UserError
from fixmono.model.fix import Fix
from fixmono.model.outcome import Status
from fixmono.model.projects import PROJECTS
from fixmono.model.registry import discover
from fixmono.output.journal import Journal, patch_env_command
from fixmono.output.progress import step_done
from fixmono.sources import gpus
from fixmono.sources.catalogue import listed
from fixmono.sources.installed import Environment, InstalledFiles

NOT_FIXED, FIXED, NOT_APPLICABLE, FAILED = "not fixed", "already fixed", "not applicable", "failed"  # installed files; still_needed.py says what reproducers find
NOT_INSTALLED = "not installed"
PATCHED_HERE = "patched by fixmono"
BUILT_IN = "not in the installed package (C++/tests: built into the binary)"


def backend(env: Environment) -> dict:
    """The accelerator torch would use here, without importing torch: its
    build read from torch/version.py, the GPUs counted from the driver's files
    (sources/gpus.py); a cuda or rocm build with no GPU here runs on the cpu."""
    build = env.torch_build()
    version = env.dist("torch")["version"]
    if build["name"] is None:
        return build
    if build["name"] == "cpu":
        return {"name": "cpu", "devices": 0, "detail": f"torch {version} built for cpu"}
    devices, how = gpus.count(build["name"])
    return {"name": build["name"] if devices else "cpu", "devices": devices,
            "detail": f"torch {version} built for {build['name']}; {devices} GPU(s) {how}"}


def check_installed(fix: Fix, site: Path | None = None, env: Environment | None = None,
                    compute: bool = True) -> dict | None:
    """The fix's presence check on the installed files (apply.run on them, or
    its answer remembered); `compute` False: None where it is not remembered.
    `fix` may be the catalogue's listing of it (sources/catalogue.Listed)."""
    env = env or Environment.current()
    source = InstalledFiles(PROJECTS[fix.upstream], site, env)
    row = {"fix": fix.id, "project": fix.upstream, "dist": source.dist, "version": source.version,
           "backends": list(fix.backends), "provenance": env.provenance(source.dist)}
    paths = {c.path: source.path(c.path) for c in fix.changes}
    if not any(paths.values()):
        return {**row, "installed_files": BUILT_IN, "applies": None,
                "detail": ", ".join(paths) + ": compiled or test files, not shipped in the wheel"}
    if source.version is None:
        return {**row, "installed_files": NOT_INSTALLED, "applies": None,
                "detail": f"{source.dist} is not installed in {env.prefix}"}
    # a C++/test file next to Python ones is never installed: judged on the Python ones
    outcome = presence(fix, source, tuple(c.path for c in fix.changes if paths[c.path]), compute)
    if outcome is None:
        return None
    state = {Status.APPLIED: NOT_FIXED, Status.ALREADY_APPLIED: FIXED,
             Status.NOT_APPLICABLE: NOT_APPLICABLE, Status.FAILED: FAILED}[outcome.status]
    if outcome.status is Status.APPLIED:
        detail = "the fix applies; lacking it: " + ", ".join(
            str(paths[path]) for path, status in outcome.files if status is Status.APPLIED)
    elif outcome.status is Status.ALREADY_APPLIED:
        detail = "contains the fix: " + ", ".join(str(paths[path]) for path, _ in outcome.files)
    else:
        detail = outcome.detail
    row = {**row, "installed_files": state, "applies": outcome.status in (Status.APPLIED, Status.ALREADY_APPLIED),
           "detail": detail}
    return with_journal(row, fix, source.site, env) if site is None else row


def presence(fix, source: InstalledFiles, shipped: tuple[str, ...], compute: bool = True) -> Found | None:
    """The fix's check on the files `shipped`: remembered, else run (`compute` False: None)."""
    digest = remembered_status.key(fix, json.dumps([str(source.site), source.label]), shipped)
    if digest is not None and (found := remembered_status.recall(digest, source)) is not None:
        return found
    if not compute:
        return None
    from fixmono.apply.run import run  # the engines: only where a check runs

    fix = fix.load() if hasattr(fix, "load") else fix
    recording = Recording(source)
    # a result is not transformed a second time (the fixed-point check): nothing is written here, and the
    # catalogue's tests check each transformation's fixed point; a quarter of a cold status went to it
    (outcome,) = run(recording, [dataclasses.replace(fix, changes=tuple(c for c in fix.changes if c.path in shipped))],
                     fixed_point=False)
    found = Found.of(outcome)
    if digest is not None:
        remembered_status.keep(digest, recording, found)
    return found


_pending: tuple = ()  # (fixes, site, env) for the forked processes of check_all


def check_all(fixes: list, site: Path | None, env: Environment) -> list[dict]:
    """check_installed of every fix: the remembered answers here, the others on
    every core where there are several (fork, once their fixes are loaded)."""
    global _pending
    rows = [check_installed(fix, site, env, compute=False) for fix in fixes]
    todo = [n for n, row in enumerate(rows) if row is None]
    jobs = min(len(todo), remembered_status.available_cores())
    if jobs < 2 or not sys.platform.startswith("linux") or threading.active_count() > 1:  # fork: Linux, no thread
        return [row if row is not None else check_installed(fix, site, env) for fix, row in zip(fixes, rows)]
    for n in todo:  # imported here, before the fork: each process has them
        if hasattr(fixes[n], "load"):
            fixes[n].load()
    import_module("fixmono.apply.run")  # the engines too: imported (compiled, with no bytecode) once, not by each
    todo.sort(key=lambda n: -target_bytes(fixes[n], site, env))  # the longest first
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    _pending = (fixes, site, env)
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"), initializer=as_worker)
    try:
        for future in as_completed([pool.submit(check_one, n) for n in todo]):
            n, row = future.result()
            rows[n] = row
    except BrokenProcessPool:  # a checker died (killed, out of memory): the rest checked here
        pass
    except BaseException:  # Ctrl-C, SIGTERM, an error: no checker outlives the run
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _pending = ()
    return [row if row is not None else check_installed(fix, site, env) for fix, row in zip(fixes, rows)]


def as_worker() -> None:
    """A forked checker: stopped by its parent (SIGTERM ends it, Ctrl-C is the parent's to handle)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def check_one(n: int) -> tuple[int, dict]:
    fixes, site, env = _pending
    return n, check_installed(fixes[n], site, env)


def target_bytes(fix, site: Path | None, env: Environment) -> int:
    source = InstalledFiles(PROJECTS[fix.upstream], site, env)
    total = 0
    for change in fix.changes:
        path = source.path(change.path)
        try:
            total += path.stat().st_size if path is not None else 0
        except OSError:
            pass
    return total


def with_journal(row: dict, fix: Fix, site: Path, env: Environment) -> dict:
    """What `patch-env` recorded for this fix in the environment's journal, and
    whether the files still are what it wrote."""
    try:
        journal = Journal.read(site)
        files = {rel: journal.state(rel) for rel, e in journal.files.items()
                 if fix.id in e["fixes"] + e.get("pending", {}).get("fixes", [])}
    except UserError as err:  # a journal or a path in it that patch-env would refuse
        return {**row, "patch_env": {"state": "unreadable"}, "detail": f"{row['detail']}; {err}"}
    if not files:
        return row
    stamp = journal.data["fixes"].get(fix.id, {})
    states = set(files.values())
    state = "patched" if states == {"patched"} else "pending" if "pending" in states else "stale"
    row = {**row, "patch_env": {"state": state, "files": files, "journal": str(journal.folder), **stamp}}
    if state == "patched" and row["installed_files"] == FIXED:
        return {**row, "installed_files": PATCHED_HERE,
                "detail": f"patch-env by fixmono {stamp.get('fixmono_version', '?')} at {stamp.get('at', '?')}: "
                          f"{', '.join(files)} (undo: {patch_env_command(env, '--undo', fix.id)})"}
    if state == "pending":
        return {**row, "detail": f"{row['detail']}; an interrupted patch-env: run `{patch_env_command(env, fix.id)}` "
                                 "again to complete it"}
    changed = ", ".join(f"{rel} ({s})" for rel, s in files.items() if s != "patched")
    if "changed" in states:
        return {**row, "detail": f"{row['detail']}; journal kept: {changed} since fixmono patched it, by something "
                                 f"else; `{patch_env_command(env, '--undo', '--force', fix.id)}` restores the original"}
    return {**row, "detail": f"{row['detail']}; journal stale: {changed} since fixmono patched it (pip install "
                             f"--force-reinstall or an upgrade?): patch-env again, or "
                             f"`{patch_env_command(env, '--undo', fix.id)}` to forget it"}


def collect(fixes: list[Fix] | None = None, run_reproducers: bool = False, timeout: float = 600.0,
            site: Path | None = None, env: Environment | None = None, progress=lambda msg: None,
            jobs: int = 1, per_gpu: int = 1) -> dict:
    """The status of `env` (default: this interpreter's environment); with
    `run_reproducers`, each fix's reproducer run, `jobs` at a time as
    schedule.py orders them (`per_gpu` at a time on each GPU here, those that need the
    machine to themselves alone)."""
    fixes = (discover() if run_reproducers else listed()) if fixes is None else fixes  # listed: none loaded
    env = env or Environment.current()
    here = backend(env) if env.here else env.torch_build()
    rows = check_all(fixes, site, env)
    for fix, row in zip(fixes, rows):
        row["affects_backend_here"] = here["name"] in fix.backends if here["name"] else None
    if run_reproducers:
        def one(task: schedule.Task, extra: dict[str, str]) -> dict:
            fix = fixes[task.key]
            progress(f"running the reproducer of {fix.id} (limit {timeout:.0f} s)")
            start = time.monotonic()
            found = check(fix, timeout, python=env.python, env=extra)
            step_done(progress, fix.id, found["status"], time.monotonic() - start)
            return found

        kind = gpu_kind(env)
        found = schedule.run([schedule.task(i, fix, kind) for i, fix in enumerate(fixes)], one, jobs,
                              schedule.shared(gpu_slots(env), per_gpu))
        for i, row in enumerate(rows):
            row["reproducer"] = {"status": found[i]["status"], "detail": found[i]["detail"]}
    return {"python": env.prefix, "python_executable": env.python, "python_version": env.version,
            "backend": here, "fixes": rows}


def check(fix: Fix, timeout: float, **kwargs) -> dict:
    """still_needed.check: the fix's reproducer run (imported only by --run)."""
    from fixmono.analysis.still_needed import check as reproduce

    return reproduce(fix, timeout, **kwargs)


def gpu_kind(env: Environment) -> str | None:
    """'cuda' or 'rocm' where there are GPUs of that kind here for `env`'s torch, else None."""
    kind = env.torch_build()["name"]
    return kind if kind in schedule.GPU_BACKENDS and gpus.count(kind)[0] > 0 else None


def gpu_slots(env: Environment) -> list[dict[str, str]]:
    """One environment per GPU the reproducers may use: the GPUs here of the
    kind `env`'s torch is built for (sources/gpus.py), also for another interpreter's."""
    kind = env.torch_build()["name"]
    return schedule.gpu_slots(kind, gpus.count(kind)[0]) if kind in schedule.GPU_BACKENDS else [{}]
