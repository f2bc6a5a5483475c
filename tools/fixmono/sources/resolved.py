"""What the indexes answered for a pinned release, kept for later runs.

A published NAME==VERSION's files and their hashes do not change, so the
answer an index gave for it (the wheel's URL, its published sha256, the
central directory a range read was verified against) is kept in the cache
under the sources pip is configured with, and a later run with the same
sources uses it without asking anyone: a warm `--upstream pip:` call makes no
request and works offline. `--refresh` asks again; so does a run whose pip
sources differ (another index is another answer) or whose record is missing,
unreadable or of the wrong shape.

The sources are what `pip config list` says (index.pip_settings): reading
them takes a pip process, so what it said is kept too, under the files pip
read them from (`pip config debug`: each one's size, mtime and inode) and the
PIP_* and config-locating variables; any change there asks pip again. What is
kept of them is a sha256 (the `identity`): an index URL's credentials are
never written to the cache. `no-index` is not part of it: PIP_NO_INDEX=1
changes whether indexes may be asked, not what they answered."""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

from fixmono.model.shapes import SHA256, Maybe
from fixmono.sources.cache_files import load, save
from fixmono.sources.index import PYPI, pip_settings
from fixmono.sources.processes import bounded
from fixmono.sources.upstream import cache_dir

FORMAT = 1
# variables that decide which files pip reads its configuration from (besides PIP_*)
LOCATING = ("HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "VIRTUAL_ENV", "APPDATA", "USERPROFILE")
CONFIG = {"format": int, "files": [{"path": str, "stat": Maybe([int])}], "identity": SHA256}
RECORD = {"format": int, "identity": SHA256, "dist": str, "version": str, "filename": str, "url": Maybe(str),
          "sha256": Maybe(SHA256), "directory": Maybe(SHA256), "file_sha256": Maybe(SHA256)}


def sources(settings: dict[str, list[str]]) -> list[str]:
    """The indexes and find-links pip is configured with, in its order (no-index aside)."""
    return (settings["index-url"] or [PYPI]) + settings["extra-index-url"] + settings["find-links"]


def identity(refresh: bool = False) -> str:
    """sha256 of the sources pip is configured with; from the cache where the
    files and variables pip reads them from are as they were (`refresh`: pip asked)."""
    memo = cache_dir() / "pip-config" / f"{environment_key()}.json"
    kept = None if refresh else load(memo, CONFIG)
    if kept is not None and kept["format"] == FORMAT and all(stat(f["path"]) == f["stat"] for f in kept["files"]):
        return kept["identity"]
    from concurrent.futures import ThreadPoolExecutor  # only when pip must be asked

    with ThreadPoolExecutor(1) as pool:  # the files pip reads, asked beside its settings
        debug = pool.submit(bounded, [sys.executable, "-m", "pip", "config", "debug"], 60,
                            {**os.environ, "PIP_CONSTRAINT": ""})
        if refresh:
            pip_settings.cache_clear()
        settings = pip_settings()
        try:
            listing = debug.result()
            files = [] if listing.returncode else re.findall(r"^\s+(.+), exists: (?:True|False)$", listing.stdout,
                                                             re.M)
        except OSError:
            files = []
    digest = hashlib.sha256(json.dumps(sources(settings)).encode()).hexdigest()
    if files:  # stated before the settings were read: a file changed since is noticed next time
        save(memo, {"format": FORMAT, "files": [{"path": path, "stat": stat(path)} for path in files],
                    "identity": digest})
    return digest


def environment_key() -> str:
    chosen = sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_") or k in LOCATING)
    return hashlib.sha256(json.dumps([sys.executable, sys.prefix, chosen]).encode()).hexdigest()


def stat(path: str) -> list[int] | None:
    """What tells a configuration file changed: size, mtime, inode (None: absent; [] not a regular file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino] if os.path.isfile(path) else []


def record_path(dist: str, version: str, sources_id: str) -> Path:
    return cache_dir() / "resolved" / f"{dist}-{version}" / f"{sources_id}.json"


def recorded(dist: str, version: str, sources_id: str) -> dict | None:
    """The answer kept for dist==version from these sources, or None (none kept,
    unreadable, of the wrong shape, or not for this release and these sources)."""
    record = load(record_path(dist, version, sources_id), RECORD)
    if record is None or (record["format"], record["identity"], record["dist"], record["version"]) != \
            (FORMAT, sources_id, dist, version):
        return None
    return record


def keep(dist: str, version: str, sources_id: str, filename: str, url: str | None, sha256: str | None,
         directory: str | None = None, file_sha256: str | None = None) -> dict:
    record = {"format": FORMAT, "identity": sources_id, "dist": dist, "version": version, "filename": filename,
              "url": url, "sha256": sha256, "directory": directory, "file_sha256": file_sha256}
    save(record_path(dist, version, sources_id), record)
    return record
