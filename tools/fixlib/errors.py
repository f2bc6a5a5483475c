"""Errors that mean bad input from the user: one line, exit code 2."""


class UserError(Exception):
    """Bad input. The message is printed as one line; make_patch exits 2."""
