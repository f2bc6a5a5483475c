"""Free space, checked before a write and named when a write finds none.

A run that would fill a filesystem is refused before its first write; one
that finds the disk full anyway (something else filled it meanwhile, or a
quota) is put back by its caller, and says so in the same one line.
"""
from __future__ import annotations

import errno
import os
from collections import defaultdict
from pathlib import Path

from fixmono.model.errors import UserError

MARGIN = 1 << 20  # room for the filesystem's own blocks (folders, inodes) and the bytecode compiled afterwards


def existing(path: Path) -> Path:
    """`path`, or its nearest folder that exists (a folder the run is to make)."""
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def mount_point(path: Path) -> str:
    """The folder the filesystem holding `path` is mounted on."""
    path = Path(os.path.realpath(existing(path)))
    device = os.stat(path).st_dev
    while path != path.parent and os.stat(path.parent).st_dev == device:
        path = path.parent
    return str(path)


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def require_space(writes: dict[Path, list[int]], needs: dict[int, int]) -> None:
    """Refuse, with one line, a run whose `writes` (folder -> sizes of the
    files it writes there) do not fit, with MARGIN, on each filesystem; each
    file rounded up to whole blocks. Records in `needs` (device -> bytes) what
    each filesystem is to take, for the line a full disk mid-run gives."""
    per_device: dict[int, list] = defaultdict(lambda: [0, None])
    for folder, sizes in writes.items():
        where = existing(folder)
        usage = os.statvfs(where)
        total = per_device[os.stat(where).st_dev]
        total[0] += sum(-(-size // usage.f_frsize) * usage.f_frsize for size in sizes)
        total[1] = (where, usage.f_bavail * usage.f_frsize)
    for device, (size, (where, free)) in per_device.items():
        needs[device] = size + MARGIN
        if needs[device] > free:
            raise UserError(f"no space left on {mount_point(where)} (needs {megabytes(needs[device])}, "
                            f"{megabytes(free)} free); the environment is unchanged")


def out_of_space(err: OSError, needs: dict[int, int]) -> UserError:
    """The one line for a write that found the disk (or the quota) full, after the run was put back."""
    what = "disk quota exceeded" if err.errno == errno.EDQUOT else "no space left"
    where = existing(Path(err.filename)) if err.filename else None
    need = needs.get(os.stat(where).st_dev) if where else None
    return UserError(f"{what} on {mount_point(where) if where else 'the disk'}"
                     f"{f' (needs {megabytes(need)})' if need else ''}; the environment is unchanged")
