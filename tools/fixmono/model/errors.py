"""The errors every stage raises, and the one-line forms of errors. Imports
nothing of fixmono: the bottom of the package."""
from __future__ import annotations

import errno


class UserError(Exception):
    """Bad input. The command line prints the message as one line and exits 2."""


class NoPythonFiles(UserError):
    """A published wheel holds no Python files at all (a meta-package that
    pulls the code from others): a release that ships no target."""


class FixDeclarationError(ValueError):
    """A fix.py declares something inconsistent (a bug in this repository)."""


class FixtureUnavailable(Exception):
    """A fixture's text cannot be had here (e.g. its package is not installed)."""


class NotApplicable(Exception):
    """The transformation's anchor (function, class) is not in this source."""


class Unreadable(Exception):
    """The target exists but cannot be read as text (not UTF-8, a directory, a symlink)."""


class TargetSyntaxError(Exception):
    """The target file does not parse (message names the line)."""


class TransformFailed(Exception):
    """The anchor is there but its shape is not what the transformation can
    edit safely (message says what it expected)."""


def disk_full(err: BaseException) -> bool:
    """A write refused for want of space: the disk is full, or the user's quota is."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


def one_line(text) -> str:
    """Multi-line output (git's "error: ...\\nfatal: ...") joined into one line."""
    joined = "; ".join(line.strip() for line in str(text).splitlines() if line.strip())
    return joined.replace(":; ", ": ")  # "To add an exception, call:\n\tgit config ..."


def describe(err: Exception) -> str:
    """An OSError (or any error) as one line."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}: {err.filename}" if err.filename else err.strerror
    return one_line(str(err))


def caused_by_interrupt(err: BaseException) -> bool:
    """Whether a KeyboardInterrupt is behind `err` (its cause or context chain)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False
