"""How many GPUs a torch build would see here, read from the driver's files
instead of importing torch (importing it took most of a warm `status`).

NVIDIA: one folder per GPU in /proc/driver/nvidia/gpus (else the /dev/nvidiaN
nodes a container is given); AMD: the KFD topology nodes with SIMDs (CPU nodes
have none), as ROCm's runtime counts them. The *_VISIBLE_DEVICES variables
narrow the count as the runtimes read them: a list, cut at its first entry
that names no device.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path("/")  # tests point it at a fake machine
VISIBLE = {"cuda": ("CUDA_VISIBLE_DEVICES",),
           "rocm": ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")}


def physical(kind: str) -> tuple[int, str]:
    """(GPUs present, the files they were counted from)."""
    if kind == "cuda":
        gpus = ROOT / "proc/driver/nvidia/gpus"
        if gpus.is_dir():
            return len([p for p in gpus.iterdir() if p.is_dir()]), "/proc/driver/nvidia/gpus"
        nodes = [p for p in (ROOT / "dev").glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name)]
        return len(nodes), "/dev/nvidia*"
    nodes = ROOT / "sys/class/kfd/kfd/topology/nodes"
    count = 0
    for props in sorted(nodes.glob("*/properties")) if nodes.is_dir() else ():
        try:
            found = re.search(r"^simd_count\s+(\d+)", props.read_text(errors="replace"), re.M)
        except OSError:
            continue
        count += bool(found and int(found.group(1)))
    return count, "/sys/class/kfd/kfd/topology/nodes"


def visible(kind: str, present: int, environ=os.environ) -> int:
    """`present` narrowed by the visibility variables set for `kind`."""
    count = present
    for name in VISIBLE[kind]:
        if name not in environ:
            continue
        listed = 0
        for entry in environ[name].split(","):
            entry = entry.strip()
            if entry.isdigit() and int(entry) < present or entry.startswith(("GPU-", "MIG-")):
                listed += 1
            else:  # the runtime stops at the first entry naming no device
                break
        count = min(count, listed)
    return count


def count(kind: str) -> tuple[int, str]:
    """(GPUs a `kind` ('cuda' or 'rocm') build of torch would use here, how it was counted)."""
    present, where = physical(kind)
    seen = visible(kind, present)
    narrowed = [n for n in VISIBLE[kind] if n in os.environ]
    how = f"counted from {where}" + (f", narrowed by {'/'.join(narrowed)}" if narrowed else "")
    return seen, how
