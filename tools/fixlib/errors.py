"""How the command-line tools end: bad input is one line and exit code 2,
Ctrl-C/SIGTERM one line and 128+signal, a bug one line and 3; never a
traceback (MAKE_PATCH_DEBUG=1 shows it)."""
import argparse
import atexit
import os
import signal
import sys

from tools.fixlib.early import EARLY_SIGNALS


def caused_by_interrupt(err: BaseException) -> bool:
    """Whether a KeyboardInterrupt is behind `err` (its cause or context chain)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def exit_quietly(code: int) -> None:
    """End the process with `code`. Not through Python's normal shutdown: a
    Ctrl-C that hit a string exec (dataclasses, namedtuple) leaves a flag in
    CPython that makes `python -m` kill itself with SIGINT at exit even though
    the interrupt was handled. Clean-up (atexit) and output flushing still run."""
    for sig in EARLY_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)  # the work is over: nothing left to interrupt
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream
            pass
    os._exit(code)


class UserError(Exception):
    """Bad input. The message is printed as one line; the tool exits 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with its errors as UserError: one line and exit 2 (argparse
    itself prints the usage too). Every tool's parser."""

    def error(self, message: str):
        raise UserError(message)


def os_error_as_user_error(err: OSError) -> UserError:
    """A file the user named cannot be read or written: bad input, one line."""
    return UserError(f"{err.filename}: {err.strerror}" if err.filename else str(err))


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that the same clean-up runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def setup_streams() -> None:
    """Output as git writes it, whatever the locale: UTF-8, and the bytes of an
    argument that was not (LC_ALL=C) written back unchanged, never an error."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="surrogateescape")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, _raise_interrupted)
        except ValueError:  # not the main thread (a tool called from a test's thread)
            pass


def emit(text: str) -> None:
    """Print to stdout; a reader that went away (`| head`) ends the output quietly."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit must not fail again


def guarded(prog: str, work, interrupted: str = "interrupted", cleanup=lambda: None,
            on_error=lambda message, code: None):
    """Run a command-line tool's work. Returns (result, None), or (None, exit
    code) after one line on stderr (also handed to `on_error`, e.g. for JSON)."""
    from tools.fixlib.gitrun import one_line
    from tools.fixlib.model import FixDeclarationError

    setup_streams()
    try:
        return work(), None
    except UserError as err:
        message, code = f"error: {err}", 2
    except FixDeclarationError as err:
        message, code = f"broken fix declaration: {one_line(err)}", 2
    except BaseException as err:
        if not isinstance(err, KeyboardInterrupt) and not (isinstance(err, Exception) and caused_by_interrupt(err)):
            if not isinstance(err, Exception) or os.environ.get("MAKE_PATCH_DEBUG"):
                raise  # SystemExit and the like; or the traceback asked for
            message = (f"internal error: {type(err).__name__}: {one_line(err)} "
                       "(rerun with MAKE_PATCH_DEBUG=1 for the traceback)")
            code = 3
        else:  # Ctrl-C, SIGTERM/SIGHUP, or an error a Ctrl-C caused (e.g. wrapped by an import)
            cleanup()
            message = interrupted() if callable(interrupted) else interrupted
            code = 128 + getattr(err, "signum", signal.SIGINT)
    print(f"{prog}: {message}", file=sys.stderr)
    on_error(message, code)
    return None, code
