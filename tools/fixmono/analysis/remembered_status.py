"""What a fix's presence check found in an environment's installed files,
remembered across runs, so that a warm `status` parses nothing, runs no
transformation and loads no fix (the catalogue as listed: sources/catalogue.py).

The answer is a function of the fix's code (its folder's files), fixmono's
own code, the parsers' (libcst, tree-sitter) and Python's version, and the
files the check read. It is kept under the first ones with the sha256 of
every file read (None: not there), and used again only where each of those
files reads the same now: an installed file upgraded, patched or removed is
checked again. The rewrite cache does the same for one transformation on one
text (engines/remembered.py); this keeps the whole answer, the contract and
the uses check included. An entry that cannot be read, or is of the wrong
shape, or whose sha256 (of the rest) does not match, is computed again;
FIXMONO_REWRITE_CACHE=off turns it off with the rewrite cache."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from fixmono.model.errors import UserError
from fixmono.model.outcome import Status
from fixmono.model.shapes import SHA256, Maybe, OneOf, parsed
from fixmono.sources.catalogue import folder_fingerprint, stated
from fixmono.sources.cache_files import save
from fixmono.sources.upstream import Source, cache_dir

FORMAT = 1
PARSERS = ("libcst", "tree_sitter", "tree_sitter_cpp")
STATUS = OneOf(*(s.value for s in Status))
SHAPE = {"format": int, "reads": [{"path": str, "sha256": Maybe(SHA256)}], "status": STATUS, "detail": str,
         "files": [{"path": str, "status": STATUS}], "sha256": SHA256}


@dataclass(frozen=True)
class Found:
    """A presence check's answer: the fix's status, its detail, each file's status."""

    status: Status
    detail: str
    files: tuple[tuple[str, Status], ...]

    @classmethod
    def of(cls, outcome) -> "Found":
        return cls(outcome.status, outcome.detail, tuple((f.path, f.status) for f in outcome.files))


class Recording(Source):
    """`source`, with the sha256 of every file read through it kept."""

    def __init__(self, source: Source):
        self.source, self.reads, self.failed = source, {}, False
        self.label, self.history, self.whole_tree = source.label, source.history, source.whole_tree

    def read(self, path: str) -> bytes | None:
        try:
            data = self.source.read(path)
        except Exception:
            self.failed = True  # an unreadable file: an answer not to keep
            raise
        self.reads[path] = None if data is None else hashlib.sha256(data).hexdigest()
        return data

    def missing_file_hint(self, path: str) -> str:
        return self.source.missing_file_hint(path)

    def blob(self, object_id: str) -> bytes | None:
        return self.source.blob(object_id)


@functools.lru_cache(maxsize=1)
def code() -> str:
    """Of fixmono's own source files, the parsers' and Python's version."""
    package = Path(__file__).resolve().parents[1]
    files = sorted(package.rglob("*.py"))
    for name in PARSERS:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            folder = Path(spec.origin).parent
            files += sorted(folder.glob("*")) if folder.name == name else [Path(spec.origin)]
    return hashlib.sha256(f"{FORMAT}\0{sys.version}\0{stated(files)}".encode()).hexdigest()


def key(fix, where: str, shipped: tuple[str, ...]) -> str | None:
    """Of a catalogue fix's check on the files `shipped` of the installed tree `where` (None: not a catalogue fix)."""
    from fixmono.engines.remembered import enabled

    folder = folder_fingerprint(getattr(fix, "package", "") or "")
    if folder is None or not enabled():
        return None
    return hashlib.sha256(json.dumps([FORMAT, code(), fix.id, folder, where, list(shipped)]).encode()).hexdigest()


def entry(digest: str) -> Path:
    return cache_dir() / "status" / digest[:2] / f"{digest}.json"


def recall(digest: str, source: Source) -> Found | None:
    """The answer kept under `digest`, where every file it read reads the same through `source` now."""
    try:
        data = parsed(entry(digest).read_bytes(), SHAPE, str(entry(digest)))
    except (OSError, UserError):
        return None
    if data["format"] != FORMAT or sealed(data) != data["sha256"]:
        return None
    for each in data["reads"]:
        try:
            now = source.read(each["path"])
        except Exception:  # noqa: BLE001 -- unreadable now: checked again, which says so
            return None
        if (None if now is None else hashlib.sha256(now).hexdigest()) != each["sha256"]:
            return None
    return Found(Status(data["status"]), data["detail"], tuple((f["path"], Status(f["status"])) for f in data["files"]))


def keep(digest: str, recording: Recording, found: Found) -> None:
    if recording.failed:
        return
    data = {"format": FORMAT, "reads": [{"path": p, "sha256": s} for p, s in recording.reads.items()],
            "status": found.status.value, "detail": found.detail,
            "files": [{"path": p, "status": s.value} for p, s in found.files]}
    save(entry(digest), {**data, "sha256": sealed(data)})


def sealed(data: dict) -> str:
    """sha256 of an entry but for its own: a damaged entry does not match it."""
    rest = {k: v for k, v in data.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
