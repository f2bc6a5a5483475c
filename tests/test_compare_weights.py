"""tools/compare_weights: per-tensor equality, max |delta|, differing elements, exit codes."""
import subprocess
import sys

import torch
from safetensors.torch import save_file

from fixmono.testing import REPO_ROOT


def run(*args):
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "compare_weights"), *map(str, args)],
                          capture_output=True, text=True)


def test_equal_files_exit_0(tmp_path):
    t = {"w": torch.randn(4, 4), "b": torch.zeros(3, dtype=torch.bfloat16)}
    save_file(t, tmp_path / "a.safetensors")
    save_file(t, tmp_path / "b.safetensors")
    proc = run(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    assert proc.returncode == 0
    assert proc.stdout.strip().splitlines()[-1] == "0 of 2 tensors differ; max |delta| = 0; 0 differing elements"


def test_differences_are_counted_and_exit_1(tmp_path):
    a = {"w": torch.zeros(4, 4), "only_a": torch.ones(1)}
    b = {"w": torch.zeros(4, 4), "only_b": torch.ones(1)}
    b["w"][0, :2] = torch.tensor([0.5, -2.0])
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    save_file(a, tmp_path / "A" / "model.safetensors")
    save_file(b, tmp_path / "B" / "model.safetensors")
    proc = run(tmp_path / "A", tmp_path / "B")
    assert proc.returncode == 1
    lines = proc.stdout.strip().splitlines()
    assert "DIFFER  w  max |delta| 2, 2 differing elements" in lines
    assert any("only_a" in l and "only in first" in l for l in lines)
    assert lines[-1] == "3 of 3 tensors differ; max |delta| = 2; 2 differing elements"


def test_bad_input_exit_2(tmp_path):
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    for args in ((tmp_path / "nope", tmp_path / "nope2"), (tmp_path / "junk.safetensors",) * 2, (tmp_path, tmp_path)):
        proc = run(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("compare_weights: error: ")
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
