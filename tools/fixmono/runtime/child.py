"""A child Python that imports this package: `python -m fixmono...` from
wherever fixmono is (the repository's tools/, or site-packages)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import fixmono

# the folder holding the fixmono package
PACKAGE_PARENT = str(Path(fixmono.__file__).absolute().parent.parent)


def child_env(env: dict | None = None, before: tuple[str, ...] = ()) -> dict[str, str]:
    """`env` (default: this process's) with this package's folder first on
    PYTHONPATH, after the folders `before` (a release installed for one run,
    which must shadow what fixmono's own site-packages holds)."""
    env = dict(os.environ if env is None else env)
    first = [*before, PACKAGE_PARENT]
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in first]
    env["PYTHONPATH"] = os.pathsep.join([*first, *rest])
    return env


def module_command(module: str, *args: str, python: str | None = None) -> list[str]:
    """The command line running `module` with `python` (default: this interpreter)."""
    return [python or sys.executable, "-m", module, *args]
