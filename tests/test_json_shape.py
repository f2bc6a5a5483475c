"""Every command's --json is one object of one shape, {"command", "exit_code",
"error", ...}: on success with its own fields and "error": null, on bad input
with the one line that went to stderr and nothing else on stdout."""
import json
import subprocess
import sys

import pytest

from fixmono.runtime.child import child_env
from tests.helpers import pytorch_repo

COMMANDS = {"make_patch": "make_patch", "fixes": "status", "drift_matrix": "drift", "patch_wheel": "patch_wheel",
            "compare_weights": "compare_weights", "patch-env": "patch_env"}
BAD = {  # arguments each command refuses before doing any work
    "make_patch": ["--all", "--upstream", "/no/such/checkout", "--check"],
    "fixes": ["status", "--timeout", "0"],
    "drift_matrix": ["--fix", "no-such-fix"],
    "patch_wheel": ["/no/such.whl", "/no/such/series"],
    "compare_weights": ["/no/such/a", "/no/such/b"],
    "patch-env": ["no-such-fix"],
}


def command(prog: str, *args: str) -> subprocess.CompletedProcess:
    env = child_env()
    env.pop("MAKE_PATCH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", f"fixmono.cli.{COMMANDS[prog]}", *args, "--json"],
                          capture_output=True, text=True, env=env, timeout=300)


def shape(proc: subprocess.CompletedProcess, prog: str) -> dict:
    data = json.loads(proc.stdout)
    assert isinstance(data, dict) and list(data)[:3] == ["command", "exit_code", "error"], data
    assert data["command"] == prog and data["exit_code"] == proc.returncode, data
    return data


@pytest.mark.parametrize("prog", sorted(COMMANDS))
def test_an_error_is_the_same_object_with_the_stderr_line(prog):
    proc = command(prog, *BAD[prog])
    assert proc.returncode == 2, proc.stderr
    data = shape(proc, prog)
    assert set(data) == {"command", "exit_code", "error"}
    assert proc.stderr == f"{prog}: error: {data['error']}\n"


def test_make_patch_report(tmp_path):
    data = shape(command("make_patch", "--all", "--upstream", str(pytorch_repo(tmp_path / "pytorch")), "--check"),
                 "make_patch")
    assert data["error"] is None and data["exit_code"] == 0
    assert {r["status"] for r in data["runs"][0]["results"]} >= {"applied"}


def test_status_report():
    data = shape(command("fixes", "status"), "fixes")
    assert data["error"] is None and data["exit_code"] == 0 and data["fixes"]


def test_compare_weights_report(tmp_path):
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(3)}, str(tmp_path / "a.safetensors"))
    save_file({"w": torch.tensor([0.0, 1.0, 0.0])}, str(tmp_path / "b.safetensors"))
    data = shape(command("compare_weights", str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")),
                 "compare_weights")
    assert data["exit_code"] == 1 and data["error"] is None
    assert data["tensors"] == [{"name": "w", "equal": False, "max_abs_delta": 1.0, "differing": 1, "note": ""}]
