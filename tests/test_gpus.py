"""status counts GPUs from the driver's files instead of importing torch
(sources/gpus.py): NVIDIA's /proc/driver/nvidia/gpus or /dev/nvidiaN, AMD's KFD
topology nodes with SIMDs, narrowed by the *_VISIBLE_DEVICES variables as the
runtimes read them; checked on fake machine trees. On this machine the count
must be torch's own (test_status asks torch), and status must not import it."""
import json
import os
import subprocess
import sys

import pytest

from fixmono.analysis import status
from fixmono.sources import gpus
from tests.helpers import REPO_ROOT


@pytest.fixture
def machine(tmp_path, monkeypatch):
    monkeypatch.setattr(gpus, "ROOT", tmp_path)
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def nvidia(root, n, proc=True):
    for i in range(n):
        if proc:
            (root / "proc/driver/nvidia/gpus" / f"0000:{i:02x}:00.0").mkdir(parents=True)
        (root / "dev").mkdir(exist_ok=True)
        (root / "dev" / f"nvidia{i}").touch()
    (root / "dev").mkdir(exist_ok=True)
    (root / "dev/nvidiactl").touch()  # not a GPU
    (root / "dev/nvidia-uvm").touch()


def amd(root, simds):
    for i, simd in enumerate(simds):
        node = root / "sys/class/kfd/kfd/topology/nodes" / str(i)
        node.mkdir(parents=True)
        (node / "properties").write_text(f"cpu_cores_count 0\nsimd_count {simd}\nmem_banks_count 1\n")


def test_a_machine_without_gpus_counts_none(machine):
    assert gpus.count("cuda")[0] == 0 and gpus.count("rocm")[0] == 0


@pytest.mark.parametrize("proc", [True, False], ids=["proc", "dev nodes"])
def test_nvidia_gpus_are_counted(machine, proc):
    nvidia(machine, 3, proc)
    count, how = gpus.count("cuda")
    assert count == 3 and ("/proc/driver/nvidia/gpus" if proc else "/dev/nvidia*") in how


def test_amd_gpus_are_the_kfd_nodes_with_simds(machine):
    amd(machine, [0, 304, 304])  # node 0 is the CPU
    assert gpus.count("rocm")[0] == 2 and gpus.count("cuda")[0] == 0


@pytest.mark.parametrize("value, seen", [("", 0), ("0", 1), ("1,0", 2), ("0,1,2,3", 4), ("0,7,1", 1), ("-1", 0),
                                         ("5", 0), ("GPU-8c1f2e3a", 1), (" 1 , 2 ", 2), ("a", 0), ("0,0", 0),
                                         ("1abc,2", 2), ("\u00b2", 0), ("GPU-a,GPU-a", 0), ("GPU-a,1", 1),
                                         ("0,1,2,3,0", 0)])
def test_cuda_visible_devices_narrows_as_cuda_reads_it(machine, monkeypatch, value, seen):
    nvidia(machine, 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    count, how = gpus.count("cuda")
    assert count == seen and "CUDA_VISIBLE_DEVICES" in how


@pytest.mark.parametrize("name", ["HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"])
def test_rocm_honours_each_of_its_visibility_variables(machine, monkeypatch, name):
    amd(machine, [0, 304, 304, 304])
    monkeypatch.setenv(name, "2")
    assert gpus.count("rocm")[0] == 1


@pytest.mark.parametrize("variables, seen, said", [
    ({"HIP_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "0"}, 2, "HIP_VISIBLE_DEVICES"),  # HIP replaces CUDA
    ({"ROCR_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "0"}, 2, "ROCR_VISIBLE_DEVICES"),
    ({"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0,1"}, 0, "torch refuses it"),
    ({"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "4"}, 0, "ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES"),
    ({"ROCR_VISIBLE_DEVICES": "3,5", "HIP_VISIBLE_DEVICES": "1"}, 1, "ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES"),
])
def test_rocm_reads_rocr_first_then_hip_among_those(machine, monkeypatch, variables, seen, said):
    amd(machine, [0] + [304] * 8)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    count, how = gpus.count("rocm")
    assert count == seen and said in how


class FakeEnv:
    def __init__(self, name, version):
        self.name, self.version = name, version

    def torch_build(self):
        if self.name is None:
            return {"name": None, "devices": None, "detail": "torch not installed: backend unknown"}
        return {"name": self.name, "devices": None, "detail": "..."}

    def dist(self, dist):
        return {"version": self.version, "package_dir": None}


@pytest.mark.parametrize("build, present, name, devices", [
    ("cuda", 2, "cuda", 2), ("cuda", 0, "cpu", 0), ("rocm", 1, "rocm", 1), ("rocm", 0, "cpu", 0),
    ("cpu", 4, "cpu", 0), (None, 2, None, None)])
def test_the_backend_is_the_build_where_a_gpu_is_seen(machine, build, present, name, devices):
    (nvidia if build != "rocm" else lambda root, n: amd(root, [0] + [304] * n))(machine, present)
    found = status.backend(FakeEnv(build, "2.11.0"))
    assert (found["name"], found["devices"]) == (name, devices)
    if build in ("cuda", "rocm"):
        assert f"built for {build}; {present} GPU(s) counted from" in found["detail"]


def test_status_imports_no_torch():
    probe = ("import sys, io, contextlib\nfrom fixmono.cli import status\nout = io.StringIO()\n"
             "with contextlib.redirect_stdout(out):\n    code = status.main(['status', '--json'])\n"
             "print(code, 'torch' in sys.modules, len(out.getvalue()) > 0)\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")})
    assert run.stdout.split() == ["0", "False", "True"], run.stderr[-2000:]


def test_another_interpreters_backend_names_no_count():
    """status --python: the GPUs are counted only in fixmono's own interpreter; the header says no count
    rather than `None GPU(s)`."""
    from fixmono.cli.status import render
    report = {"python": "/x", "python_version": "3.12.0", "fixes": [],
              "backend": {"name": "cuda", "devices": None, "detail": "torch 2.11.0 built for cuda (read from ...)"}}
    assert "backend: cuda (torch 2.11.0 built for cuda" in render(report) and "None" not in render(report)
    report["backend"]["devices"] = 2
    assert "backend: cuda, 2 GPU(s) (torch" in render(report)
