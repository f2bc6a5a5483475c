"""Errors that mean bad input from the user: one line, exit code 2."""


class UserError(Exception):
    """Bad input. The message is printed as one line; make_patch exits 2."""


def guarded(prog: str, work, interrupted: str = "interrupted", cleanup=lambda: None):
    """Run a command-line tool's work. Returns (result, None), or (None, exit
    code) after one line on stderr: bad input 2, Ctrl-C 130, a bug 3
    (MAKE_PATCH_DEBUG=1 shows the traceback instead)."""
    import os
    import sys

    from tools.fixlib.gitrun import one_line
    from tools.fixlib.model import FixDeclarationError

    try:
        return work(), None
    except UserError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return None, 2
    except FixDeclarationError as err:
        print(f"{prog}: broken fix declaration: {one_line(err)}", file=sys.stderr)
        return None, 2
    except KeyboardInterrupt:
        cleanup()
        print(f"{prog}: {interrupted}", file=sys.stderr)
        return None, 130
    except Exception as err:  # a bug here: still one line
        if os.environ.get("MAKE_PATCH_DEBUG"):
            raise
        print(f"{prog}: internal error: {type(err).__name__}: {one_line(err)} "
              "(rerun with MAKE_PATCH_DEBUG=1 for the traceback)", file=sys.stderr)
        return None, 3
