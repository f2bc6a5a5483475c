"""The first thing a tool runs: `launch` is the whole of every script in
tools/ (the venv re-exec, then the command module's main()). Until the tool's own
signal handling is set up (imports, the re-exec), SIGINT/SIGTERM/SIGHUP end it
with one line and 128+signal. Only built-in modules here (`_signal`, not
`signal`, which imports enum): the window before this runs stays as short as
can be."""
import importlib
import os
import sys

import _signal

EARLY_SIGNALS = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)


def interrupt_before_start(prog: str) -> None:
    """Install the handlers, then deliver what was held across an exec."""
    def stop(signum, frame):
        os.write(2, f"{prog}: interrupted before it started; nothing was changed\n".encode())
        os._exit(128 + signum)

    for sig in EARLY_SIGNALS:
        _signal.signal(sig, stop)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, EARLY_SIGNALS)


def hold_across_exec() -> None:
    """Block the signals: the exec'd process starts with them pending, and its
    interrupt_before_start delivers them."""
    _signal.pthread_sigmask(_signal.SIG_BLOCK, EARLY_SIGNALS)


def launch(prog: str, module: str, script: str) -> None:
    """Run `module`.main() for the tool `prog` (its script is `script`): in the
    project virtualenv (.venv, made by tools/setup) when there is one."""
    interrupt_before_start(prog)
    root = os.path.dirname(os.path.dirname(os.path.realpath(script)))  # the repository
    venv = os.path.join(root, ".venv")
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
        hold_across_exec()
        os.execv(python, [python, script, *sys.argv[1:]])
    exit_quietly(importlib.import_module(module).main())


def exit_quietly(code: int) -> None:
    """End the process with `code`. Not through Python's normal shutdown: a
    Ctrl-C that hit a string exec (dataclasses, namedtuple) leaves a flag in
    CPython that makes `python -m` kill itself with SIGINT at exit even though
    the interrupt was handled. Clean-up (atexit) and output flushing still run."""
    import atexit

    for sig in EARLY_SIGNALS:
        _signal.signal(sig, _signal.SIG_IGN)  # the work is over: nothing left to interrupt
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream
            pass
    os._exit(code)
