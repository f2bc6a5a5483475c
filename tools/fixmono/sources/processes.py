"""Child processes that can always be stopped: each in its own session (a
process group with everything it starts), killed as a group on timeout, and
all of them by stop_all() when the run is interrupted (worker threads never
see Ctrl-C: the main thread calls it). No interpreter outlives the run."""
from __future__ import annotations

import os
import signal
import subprocess
import threading

from fixmono.model.errors import UserError

_live: set[subprocess.Popen] = set()
_lock = threading.Lock()
_stopping = threading.Event()


def env_seconds(name: str, default: float) -> float:
    """A time limit from the environment variable `name` (seconds), else `default`."""
    value = os.environ.get(name, "").strip()
    try:
        seconds = float(value) if value else default
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UserError(f"{name}={value}: expected a number of seconds above 0")
    return seconds


class Stopped(Exception):
    """A command asked for after stop_all(), or one that stop_all() killed: the run is ending."""


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process started with start_new_session=True and every process it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def bounded(command: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """subprocess.run(command, capture_output=True, text=True, timeout=timeout),
    killing the command's whole process group on timeout or on any exception;
    Stopped when stop_all() ended it (its exit status is no answer)."""
    with _lock:
        if _stopping.is_set():
            raise Stopped(command[0])
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, encoding="utf-8", errors="replace", env=env, start_new_session=True)
        _live.add(proc)
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException as stopped:
            kill_group(proc)
            out, err = proc.communicate()
            if isinstance(stopped, subprocess.TimeoutExpired):  # what it said before it was stopped
                stopped.output, stopped.stderr = out, err
            raise
        if proc.returncode < 0 and _stopping.is_set():  # killed by stop_all(): no answer of the command's
            raise Stopped(command[0])
        return subprocess.CompletedProcess(command, proc.returncode, out, err)
    finally:
        with _lock:
            _live.discard(proc)


def stop_all() -> int:
    """Kill every live command's group, and refuse new ones from here on
    (until resume()); returns how many were live."""
    with _lock:
        _stopping.set()
        live = list(_live)
    for proc in live:
        kill_group(proc)
    return len(live)


def resume() -> None:
    """Commands may start again (a caller that handled an interrupt and goes on: tests)."""
    _stopping.clear()
