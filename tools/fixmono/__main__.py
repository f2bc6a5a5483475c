"""`python -m fixmono COMMAND ...`: the console script, for an environment without it on PATH."""
from fixmono.cli.main import entry

entry()
