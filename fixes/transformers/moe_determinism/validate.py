"""--validate: the patched transformers files, put into a copy of the installed
transformers (the same release), imported in a child process, and the tiny
Mixtral trained one step through the new `pin_moe_routing` kwarg with routing
drift injected into the recompute (RecomputeRoutingDrift): the gradients must
be bitwise equal to those of a run without drift and without checkpoint
pinning."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping

from fixmono.runtime.child import child_env

PACKAGE_PREFIX = "src/transformers/"

CHILD = """
import json, sys, torch
import transformers
assert transformers.__file__.startswith(sys.argv[1]), transformers.__file__
from FIX_PACKAGE.inject import RecomputeRoutingDrift
from FIX_PACKAGE.models import batch, tiny_model

def grads(kwargs, drift):
    model = tiny_model("mixtral", "eager")
    model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    with RecomputeRoutingDrift() if drift else torch.enable_grad():
        model(**batch()).loss.backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}

base = grads({"use_reentrant": False}, drift=False)
pinned = grads({"pin_moe_routing": True}, drift=True)
print(json.dumps({"equal": all(torch.equal(base[n], pinned[n]) for n in base), "compared": len(base)}))
""".replace("FIX_PACKAGE", __package__)


def train_patched(package: Path, files: Mapping[str, str]) -> dict | str:
    """Copy `package`, write `files` into it, run CHILD: its result, or a problem."""
    with tempfile.TemporaryDirectory(prefix="validate-transformers-") as tmp:
        copy = Path(tmp) / "transformers"
        shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
        for path, text in files.items():
            (copy / path.removeprefix(PACKAGE_PREFIX)).write_text(text, encoding="utf-8")
        env = child_env()
        env["PYTHONPATH"] = f"{tmp}{os.pathsep}{env['PYTHONPATH']}"
        proc = subprocess.run([sys.executable, "-c", CHILD, str(copy)], env=env, capture_output=True, text=True)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return f"training the patched transformers failed: {last}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.origin:
        return "cannot validate: transformers is not installed here"
    package = Path(spec.origin).parent
    for path, text in before.items():
        installed = package / path.removeprefix(PACKAGE_PREFIX)
        if not installed.is_file() or installed.read_text(encoding="utf-8") != text:
            return (f"cannot validate: the installed transformers' {path} is not this upstream's; "
                    "install the same release to validate against it")
    result = train_patched(package, after)
    if isinstance(result, str):
        return result
    if not result["equal"]:
        return f"gradients differ with routing drift under pin_moe_routing ({result['compared']} tensors compared)"
    return None
