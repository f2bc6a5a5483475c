"""Shared pieces of the cross-cutting tests: run make_patch as a user would."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tools.fixlib.registry import REPO_ROOT
from tools.fixlib.testing import make_repo

FIXTURE = REPO_ROOT / "fixes/pytorch/batchnorm_negative_running_var/fixtures/test_jit_fuser_te.py"
BN_FIX = "pytorch-batchnorm-negative-running-var"


def pytorch_files(test_file: str | bytes | None = None) -> dict:
    """The files of a tiny PyTorch-shaped checkout."""
    return {"torch/__init__.py": "__version__ = '0.0'\n",
            "test/test_jit_fuser_te.py": FIXTURE.read_text() if test_file is None else test_file}


def pytorch_repo(path: Path, **kw) -> Path:
    return make_repo(path, pytorch_files(**kw))


def make_patch(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """tools/make_patch in a subprocess: exit code, stdout and stderr as a user sees them."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    full_env.pop("MAKE_PATCH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "tools.fixlib.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=full_env)
