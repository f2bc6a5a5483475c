"""Running git as a subprocess: a clean environment, UTF-8 text whatever the
locale, and git's (often multi-line) errors as one line."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without GIT_* variables (e.g. GIT_DIR set by a hook)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(extra)
    return env


# A checkout is data, not code: no hook and no fsmonitor program it configures
# runs when make_patch reads it or adds a branch to it.
NO_PROGRAMS = ("-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false")


def run_git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """git in `cwd`; never raises for git's exit code (the caller decides)."""
    return subprocess.run(["git", *NO_PROGRAMS, *args], cwd=cwd, capture_output=True, encoding="utf-8",
                          errors="replace", env=env or clean_env())


def one_line(text: str) -> str:
    """Multi-line output (git's "error: ...\\nfatal: ...") joined into one line."""
    joined = "; ".join(line.strip() for line in str(text).splitlines() if line.strip())
    return joined.replace(":; ", ": ")  # "To add an exception, call:\n\tgit config ..."
