"""The first thing a tool runs: until its own signal handling is set up
(imports, the re-exec into the venv), SIGINT/SIGTERM/SIGHUP end it with one
line and 128+signal. Only built-in modules here (`_signal`, not `signal`,
which imports enum): the window before this runs stays as short as can be."""
import os

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
