"""The catalogue's fixes as an earlier run listed them, without loading it:
each fix's id, upstream, backends, target paths and package. Loading the
catalogue imports every fix's transformation, libcst among them (a quarter
of a second with bytecode, a second without), which a --diff run (it runs
none of them) or a status whose answers are all remembered (analysis/
remembered_status.py) need not spend. Kept in the cache under the fix
folders' files (each one's name, size, mtime and inode) and the code that
reads them: a fix added, removed or edited lists them again. `Listed.load()`
is the fix itself, when it must run."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from fixmono.model.fix import Fix
from fixmono.model.registry import CATALOGUE, catalogue_dirs, discover, fix_files, load as load_fix
from fixmono.model.shapes import SHA256
from fixmono.sources.cache_files import load, save
from fixmono.sources.upstream import cache_dir

FORMAT = 1
ENTRY = {"id": str, "upstream": str, "backends": [str], "paths": [str], "package": str}
SHAPE = {"format": int, "key": SHA256, "fixes": [ENTRY]}
READERS = ("model/fix.py", "model/registry.py", "engines/imported.py")  # what turns a folder into a fix


@dataclass(frozen=True)
class Target:
    path: str


@dataclass(frozen=True)
class Listed:
    """A fix of the catalogue as listed, not loaded: what status and a wheel's
    cache entry need of it; load() for the rest."""

    id: str
    upstream: str
    backends: tuple[str, ...]
    changes: tuple[Target, ...]
    package: str

    def load(self) -> Fix:
        return load_fix(self.package)


def listed() -> list[Listed]:
    """Every fix of the catalogue, in series order (upstream, then id), as discover() gives them."""
    key = fingerprint()
    path = cache_dir() / "catalogue" / f"{key}.json"
    kept = load(path, SHAPE)
    if kept is None or kept["format"] != FORMAT or kept["key"] != key:
        kept = {"format": FORMAT, "key": key, "fixes": [
            {"id": f.id, "upstream": f.upstream, "backends": list(f.backends), "paths": [c.path for c in f.changes],
             "package": f.package} for f in discover()]}
        save(path, kept)
    return [Listed(f["id"], f["upstream"], tuple(f["backends"]), tuple(Target(p) for p in f["paths"]), f["package"])
            for f in kept["fixes"]]


def fingerprint() -> str:
    """Of every fix folder's files, and of the code that reads them."""
    package = Path(__file__).resolve().parents[1]
    files = [package / reader for reader in READERS]
    for root in catalogue_dirs():
        for fix in fix_files(root):
            files += folder_files(fix.parent)
    return stated(files)


def folder_fingerprint(fix_package: str) -> str | None:
    """Of the files of one fix's folder (fixmono.fixes.<upstream>.<name>); None where it is not one."""
    parts = fix_package.split(".")
    if fix_package.rsplit(".", 2)[0] != CATALOGUE or len(parts) != 4:
        return None
    for root in catalogue_dirs():
        folder = root.joinpath(*parts[2:])
        if (folder / "fix.py").is_file():
            return stated(folder_files(folder))
    return None


def folder_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file())


def stated(files: list[Path]) -> str:
    digest = hashlib.sha256(f"{FORMAT}".encode())
    for path in files:
        try:
            st = os.stat(path)
            digest.update(json.dumps([str(path), st.st_size, st.st_mtime_ns, st.st_ino]).encode())
        except OSError:
            digest.update(json.dumps([str(path), None]).encode())
    return digest.hexdigest()
