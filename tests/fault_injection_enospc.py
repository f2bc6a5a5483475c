"""FAULT INJECTION, for tests only: `python -m tests.fault_injection_enospc ARGS`
runs `fixmono ARGS` in this process on a simulated full disk.

Only writes under FAULT_ROOT (a folder: the test's environment) are touched.
A write is data written to a file opened for writing (open, os.fdopen,
Path.write_*; through a proxy of the file object), os.write, or os.mkdir (a
folder takes a block on most filesystems). Creating an empty file, renaming,
linking and removing are not writes: they take no data blocks.

- FAULT_ENOSPC_AT=K: the K-th write, and every later one, raises
  OSError(ENOSPC), as on a disk that something else keeps full (space this
  run frees never comes back); FAULT_ERRNO=EDQUOT: a quota instead.
- FAULT_FREE_BYTES=N: os.statvfs under FAULT_ROOT reports N bytes available
  (so the run's own free-space check sees that much, whatever is there).
- FAULT_LOG=FILE: one line per write ("KIND PATH"), also when nothing fails,
  so a test counts a normal run's writes.
"""
from __future__ import annotations

import builtins
import errno
import io
import os
import sys

ROOT = os.path.realpath(os.environ.get("FAULT_ROOT", "/nonexistent"))
FAIL_AT = int(os.environ.get("FAULT_ENOSPC_AT", "0"))
ERRNO = getattr(errno, os.environ.get("FAULT_ERRNO", "ENOSPC"))
FREE = os.environ.get("FAULT_FREE_BYTES")
LOG = os.environ.get("FAULT_LOG")
_writes = 0
_real_open, _real_write, _real_mkdir, _real_statvfs = io.open, os.write, os.mkdir, os.statvfs


def _path_of(file) -> str:
    """The real path of a path or an open descriptor."""
    if isinstance(file, int):
        return os.readlink(f"/proc/self/fd/{file}")
    return os.path.realpath(os.fsdecode(file))


def _under_root(path: str) -> bool:
    return path == ROOT or path.startswith(ROOT + os.sep)


def _write(kind: str, path: str) -> None:
    """Count a write to `path`; raise ENOSPC from the FAIL_AT-th on."""
    global _writes
    if not _under_root(path):
        return
    _writes += 1
    if LOG:
        with _real_open(LOG, "a") as log:
            log.write(f"{kind} {path}\n")
    if FAIL_AT and _writes >= FAIL_AT:  # as the system says it: mkdir names the path, a file's write does not
        raise OSError(ERRNO, os.strerror(ERRNO), *([path] if kind == "mkdir" else []))


class _Writer:
    """A file opened for writing whose write() goes through the count first."""

    def __init__(self, file, path: str):
        self._file, self._path = file, path

    def write(self, data):
        if len(data):
            _write("write", self._path)
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._file.__exit__(*exc)

    def __iter__(self):
        return iter(self._file)


def _open(file, mode="r", *args, **kwargs):
    opened = _real_open(file, mode, *args, **kwargs)
    if any(c in mode for c in "wax+"):
        return _Writer(opened, _path_of(file))
    return opened


def _os_write(fd, data):
    if len(data):
        _write("write", _path_of(fd))
    return _real_write(fd, data)


def _mkdir(path, *args, **kwargs):
    if not os.path.lexists(path):  # mkdir(exist_ok=True) of a folder that is there writes nothing
        _write("mkdir", os.path.join(os.path.realpath(os.path.dirname(os.fspath(path)) or "."),
                                     os.path.basename(os.fspath(path))))
    return _real_mkdir(path, *args, **kwargs)


def _statvfs(path):
    real = _real_statvfs(path)
    if FREE is None or not _under_root(_path_of(path)):
        return real
    blocks = int(FREE) // real.f_frsize
    return os.statvfs_result((real.f_bsize, real.f_frsize, real.f_blocks, blocks, blocks, real.f_files,
                              real.f_ffree, real.f_favail, real.f_flag, real.f_namemax))


def install() -> None:
    io.open = builtins.open = _open
    os.write, os.mkdir, os.statvfs = _os_write, _mkdir, _statvfs


if __name__ == "__main__":
    install()
    sys.argv = ["fixmono", *sys.argv[1:]]
    from fixmono.cli.main import entry

    entry()
