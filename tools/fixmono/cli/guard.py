"""How the command-line tools end: bad input is one line and exit code 2,
Ctrl-C/SIGTERM one line and 128+signal, a bug one line and 3; never a
traceback (MAKE_PATCH_DEBUG=1 shows it)."""
import argparse
import os
import signal
import sys
import threading

from fixmono.cli.render import as_json, envelope
from fixmono.model.errors import FixDeclarationError, UserError, caused_by_interrupt, one_line


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


def tool_name(own: str) -> str:
    """The name a command speaks under: `fixmono drift` when run as a subcommand of
    `fixmono` (cli/main.py sets argv[0] so), else the tool's own (tools/drift_matrix)."""
    return sys.argv[0] if sys.argv[0].startswith("fixmono ") else own


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


def interrupt_not_lost(unraisable) -> None:
    """A Ctrl-C that lands in a finaliser (a Popen freed as the signal came) is
    'ignored' by Python, with a traceback: sent again instead, a moment later
    from another thread (raised here it would land in this hook), so that
    guarded ends the run as for any other Ctrl-C. Other cases: Python's own hook."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT)).start()
    else:
        sys.__unraisablehook__(unraisable)


def run_command(prog: str, argv: list[str] | None, parse, work, render, interrupted="interrupted",
                cleanup=lambda: None) -> int:
    """The whole of a command: `parse(argv)` gives its arguments, `work(args)`
    (payload, exit code), `render(payload, args)` the text for people; with
    --json the output is render.envelope's object, errors included."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on, Ctrl-C is handled by guarded
        sys.unraisablehook = interrupt_not_lost
    if "BUILD_WORKING_DIRECTORY" in os.environ:  # under `bazel run`
        os.chdir(os.environ["BUILD_WORKING_DIRECTORY"])
    argv = sys.argv[1:] if argv is None else argv
    json_out = "--json" in argv

    def body() -> int:
        args = parse(argv)
        payload, code = work(args)
        emit(as_json(envelope(prog, code, payload)) if getattr(args, "json", False) else render(payload, args))
        return code

    def json_error(message: str, code: int) -> None:
        if json_out:
            emit(as_json(envelope(prog, code, error=message.removeprefix("error: "))))

    # the line on stderr names the command as it was run (`fixmono drift`); --json's `command` stays `prog`
    result, code = guarded(tool_name(prog), body, interrupted, cleanup, on_error=json_error)
    return result if code is None else code
