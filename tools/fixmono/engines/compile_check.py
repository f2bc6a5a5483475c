"""--validate's compile check for C++ fixes: the written translation unit
compiled with `-fsyntax-only` against the headers of an installed wheel
(torch/include for PyTorch), the unpatched text first, the same way.

The unpatched compile is what makes the check mean something: when it fails
here (the wheel's headers are another release than the file's, a toolkit's
headers are missing), nothing can be said about the fix, and the check says
so in a ValidationNote instead of failing the fix. Only a patched text that
does not compile where the unpatched one does is a problem.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fixmono.sources.processes import bounded
from fixmono.model.errors import UserError
from fixmono.model.fix import NotChecked, ValidationNote
from fixmono.model.shapes import Maybe, parsed
from fixmono.sources.upstream import cache_dir

COMPILER = "g++"
STANDARD = "c++20"  # torch 2.13's headers need it (default member initializers of bit-fields)
TIMEOUT = 600.0
HEADERS_VAR = "FIXMONO_TORCH_HEADERS"


@dataclass(frozen=True)
class Headers:
    """The include folders a translation unit is compiled against."""

    label: str  # for people: "torch 2.13.0 headers (torch/include)"
    dirs: tuple[Path, ...]
    defines: tuple[str, ...] = ()


def torch_headers(cuda: bool = False) -> Headers | None:
    """The installed torch's headers (found without importing torch), or None;
    FIXMONO_TORCH_HEADERS names another torch folder (the release a checkout is at).
    `cuda`: with the CUDA toolkit's headers too (the pip CUDA wheels' nvidia/*/include
    beside torch, and /usr/local/cuda/include), for the files of aten/src/ATen/native/cuda."""
    if chosen := os.environ.get(HEADERS_VAR):  # another release's torch folder (an unpacked wheel's torch/)
        root = Path(chosen).expanduser()
        if not (root / "include" / "ATen" / "ATen.h").is_file():
            raise UserError(f"{HEADERS_VAR}={chosen}: no include/ATen/ATen.h there; give a torch package folder "
                            "(site-packages/torch, or torch/ of an unpacked wheel)")
    else:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.origin:
            return None
        root = Path(spec.origin).parent
    include = root / "include"
    if not (include / "ATen" / "ATen.h").is_file():
        return None
    stamp = root / "version.py"
    version = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", stamp.read_text(errors="replace") if stamp.is_file() else "")
    label = f"torch {version.group(1) if version else '?'} headers ({include})"
    dirs = [include, include / "torch" / "csrc" / "api" / "include"]
    if cuda:
        toolkit = [d for d in sorted(root.parent.glob("nvidia/**/include")) if d.is_dir()]
        toolkit += [d for d in (Path("/usr/local/cuda/include"),) if d.is_dir()]
        toolkit += [d / "cccl" for d in toolkit if (d / "cccl").is_dir()]  # CUDA 13 moved nv/, cuda/std there
        dirs += toolkit
        label += f" and {len(toolkit)} CUDA include folder(s)"
    # the wheels ship the per-operator headers (ATen/ops/*.h), as the build that made them used
    return Headers(label, tuple(dirs), ("AT_PER_OPERATOR_HEADERS",))


def first_error(stderr: str, path: Path) -> str:
    lines = [line.replace(str(path.parent) + "/", "") for line in stderr.splitlines()]
    return next((line.strip() for line in lines if ": error:" in line or ": fatal error:" in line),
                (lines[-1].strip() if lines else "no message"))[:400]


def syntax_error(text: str, filename: str, headers: Headers, compiler: str = COMPILER) -> str | None:
    """None when `text` compiles (-fsyntax-only), else the first error. A
    result is kept under the cache, keyed by everything the compile reads
    but the headers' contents (their release is in the label and path)."""
    command = [compiler, "-fsyntax-only", f"-std={STANDARD}", "-w", *(f"-D{d}" for d in headers.defines),
               *(f"-I{d}" for d in headers.dirs)]
    key = hashlib.sha256(json.dumps([command, compiler_version(compiler), headers.label, filename, text]).encode())
    remembered = cache_dir() / "compiles" / f"{key.hexdigest()}.json"
    try:  # a kept result of another shape (or unreadable) is a miss, not a crash
        return parsed(remembered.read_bytes(), {"error": Maybe(str)}, str(remembered))["error"]
    except (OSError, UserError):
        pass
    with tempfile.TemporaryDirectory(prefix="fixmono-compile-") as folder:
        path = Path(folder) / PurePosixPath(filename).name
        path.write_text(text, encoding="utf-8")
        run = bounded([*command, str(path)], TIMEOUT)
        error = None if run.returncode == 0 else first_error(run.stderr, path)
    remembered.parent.mkdir(parents=True, exist_ok=True)
    partial = remembered.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"error": error}))
    partial.replace(remembered)  # whole or absent, for a reader in another process
    return error


@functools.lru_cache(maxsize=None)
def compiler_version(compiler: str) -> str:
    return bounded([compiler, "--version"], 60).stdout


def compile_check(before: str, after: str, filename: str, headers: Headers | None,
                  compiler: str = COMPILER) -> str | ValidationNote:
    """A problem (the patched file does not compile where the unpatched one
    does), or a note saying what was checked or why nothing could be."""
    name = PurePosixPath(filename).name
    if headers is None:
        return NotChecked(f"compile check not run: no headers for {name} here (install the matching wheel, "
                              f"or set {HEADERS_VAR} to its torch folder)")
    if shutil.which(compiler) is None:
        return NotChecked(f"compile check not run: no {compiler} here")
    try:
        error = syntax_error(before, filename, headers, compiler)
        if error is not None:
            missing = re.search(r"fatal error: (\S+): No such file", error)
            why = (f"a header it includes, {missing.group(1)}, is not there (a toolkit's headers missing, or "
                   "another release's)" if missing else "they are not its release's headers")
            return NotChecked(f"compile check not run: the unpatched {name} does not compile with "
                                  f"{headers.label} either: {why} ({error})")
        error = syntax_error(after, filename, headers, compiler)
    except subprocess.TimeoutExpired:
        return NotChecked(f"compile check not run: {compiler} took longer than {TIMEOUT:.0f} s on {name}")
    if error is not None:
        return f"the patched {name} does not compile with {headers.label}, the unpatched one does: {error}"
    return ValidationNote(f"the patched {name} compiles with {headers.label} ({compiler} -fsyntax-only, "
                          "the unpatched file first)")
