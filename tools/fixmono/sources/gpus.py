"""How many GPUs a torch build would see here, read from the driver's files
instead of importing torch (importing it took most of a warm `status`).

NVIDIA: one folder per GPU in /proc/driver/nvidia/gpus (else the /dev/nvidiaN
nodes a container is given); AMD: the KFD topology nodes with SIMDs (CPU nodes
have none), as ROCm's runtime counts them. The *_VISIBLE_DEVICES variables
narrow the count as torch reads them (torch.cuda._parse_visible_devices: a
list cut at its first entry that names no device, empty where one repeats;
on ROCm, ROCR first, then HIP among those).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path("/")  # tests point it at a fake machine


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


def ordinal(entry: str) -> int:
    """An entry's device ordinal as the runtimes read it: its leading digits (C's strtoul), -1 if none."""
    found = re.match(r"[+-]?[0-9]+", entry)
    return int(found.group(0)) if found else -1


def listed(value: str, present: int) -> int:
    """The GPUs a *_VISIBLE_DEVICES value leaves of `present`: the list is cut at its first entry that
    names no device (no digits, negative, past the GPUs present), and is empty where an entry repeats.
    UUIDs (GPU-..., MIG-...) are each taken as a device: they cannot be checked without the driver."""
    entries = [e.strip() for e in value.split(",")]
    prefix = next((p for p in ("GPU-", "MIG-") if entries[0].startswith(p)), None)
    seen: list = []
    for entry in entries:
        key = entry if prefix else ordinal(entry)
        if key in seen:
            return 0
        if (prefix and not entry.startswith(prefix)) or (not prefix and key < 0):
            break
        seen.append(key)
    if prefix:
        return min(len(seen), present)
    return next((n for n, index in enumerate(seen) if index >= present), len(seen))


def visible(kind: str, present: int, environ=os.environ) -> tuple[int, str]:
    """(`present` narrowed by the visibility variables for `kind`, as torch reads them; what narrowed it)."""
    value, used = environ.get("CUDA_VISIBLE_DEVICES"), ["CUDA_VISIBLE_DEVICES"]
    if kind == "rocm":  # ROCR selects first; HIP then picks among those, in place of CUDA_VISIBLE_DEVICES
        rocr, hip = environ.get("ROCR_VISIBLE_DEVICES"), environ.get("HIP_VISIBLE_DEVICES")
        if rocr is not None:
            present = min(present, len(rocr.split(",")))
            if hip is None:
                return present, "ROCR_VISIBLE_DEVICES"
            if len(hip.split(",")) > len(rocr.split(",")):
                return 0, "HIP_VISIBLE_DEVICES lists more devices than ROCR_VISIBLE_DEVICES (torch refuses it)"
            value, used = hip, ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]
        elif hip is not None:
            value, used = hip, ["HIP_VISIBLE_DEVICES"]
    if value is None:
        return present, ""
    return listed(value, present), "/".join(used)


def count(kind: str) -> tuple[int, str]:
    """(GPUs a `kind` ('cuda' or 'rocm') build of torch would use here, how it was counted)."""
    present, where = physical(kind)
    seen, narrowed = visible(kind, present)
    return seen, f"counted from {where}" + (f", narrowed by {narrowed}" if narrowed else "")
