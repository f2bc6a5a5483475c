"""Shared pieces of the cross-cutting tests of make_patch: a small PyTorch-shaped
checkout, with the batchnorm fix's fixture as the sample target."""
from __future__ import annotations

from pathlib import Path

from tools.fixlib.registry import REPO_ROOT
from tools.fixlib.testing import make_patch, make_repo  # noqa: F401 (make_patch: tests import it from here)

FIXTURE = REPO_ROOT / "fixes/pytorch/batchnorm_negative_running_var/fixtures/test_jit_fuser_te.py"
BN_FIX = "pytorch-batchnorm-negative-running-var"


def pytorch_files(test_file: str | bytes | None = None) -> dict:
    """The files of a tiny PyTorch-shaped checkout."""
    return {"torch/__init__.py": "__version__ = '0.0'\n",
            "test/test_jit_fuser_te.py": FIXTURE.read_text() if test_file is None else test_file}


def pytorch_repo(path: Path, **kw) -> Path:
    return make_repo(path, pytorch_files(**kw))
