"""The repository paths the catalogue's fixes target, without loading the
catalogue where an earlier run listed them. A wheel's cache entry is named
and filled by them (wheel.py), but loading the catalogue imports every fix's
transformation, libcst among them: a quarter of a second that a --diff run,
which runs none of them, need not spend. Kept in the cache under the fix
folders' files (each one's name, size and mtime) and the code that reads
them: a fix added, removed or edited lists them again."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from fixmono.model.registry import catalogue_dirs, discover, fix_files
from fixmono.model.shapes import SHA256
from fixmono.sources.resolved import load, save
from fixmono.sources.upstream import cache_dir

FORMAT = 1
SHAPE = {"format": int, "key": SHA256, "fixes": [[str]]}  # each fix: its upstream, then its target paths
READERS = ("model/fix.py", "model/registry.py", "engines/imported.py")  # what turns a folder into paths


def declared() -> list[tuple[str, tuple[str, ...]]]:
    """(upstream, target paths) of every fix of the catalogue."""
    key = fingerprint()
    path = cache_dir() / "catalogue" / f"{key}.json"
    kept = load(path, SHAPE)
    if kept is not None and kept["format"] == FORMAT and kept["key"] == key and all(kept["fixes"]):
        return [(upstream, tuple(paths)) for upstream, *paths in kept["fixes"]]
    fixes = [(f.upstream, tuple(c.path for c in f.changes)) for f in discover()]
    save(path, {"format": FORMAT, "key": key, "fixes": [[upstream, *paths] for upstream, paths in fixes]})
    return fixes


def fingerprint() -> str:
    digest = hashlib.sha256(f"{FORMAT}".encode())
    package = Path(__file__).resolve().parents[1]
    files = [package / reader for reader in READERS]
    for root in catalogue_dirs():
        for fix in fix_files(root):
            files += sorted(p for p in fix.parent.iterdir() if p.is_file())
    for path in files:
        try:
            st = os.stat(path)
            digest.update(json.dumps([str(path), st.st_size, st.st_mtime_ns, st.st_ino]).encode())
        except OSError:
            digest.update(json.dumps([str(path), None]).encode())
    return digest.hexdigest()
