"""The journal `patch-env` keeps in an environment: <site>/.fixmono-patch-env/.

journal.json names every installed file fixmono changed (by its path under
site-packages): its distribution, the sha256 and RECORD line of the file as it
was installed, the fixes applied to it in order, and the sha256 of what
fixmono wrote. store/<sha256> holds the bytes of each state it names, so
`--undo` restores byte for byte after a reboot.

A change is written to the journal as `pending` (from, to) before any
installed file is touched; `finish` then writes each file atomically, syncs
the dist-info RECORD, drops stale bytecode and folds `pending` in. A run
killed at any point leaves each file at `from` or `to`, and the next run's
`finish` completes it (it rolls forward only from those two states: a file
something else replaced since is left alone and reported).
"""
from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import fixmono
from fixmono.model.errors import UserError, one_line
from fixmono.sources.scratch import pause_point
from fixmono.sources.verify import record_hash

JOURNAL_DIR = ".fixmono-patch-env"
FORMAT = 1
COMPILE_TIMEOUT = 120.0
PAUSE_POINTS = ("env-journal-written", "env-file-written", "env-record-written")  # tests kill a run at each


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """`path` holds its old bytes or `data`, never part of either (temporary
    file beside it, fsync, rename, fsync of the folder)."""
    tmp = path.with_name(f".{path.name}.fixmono-tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


@dataclass
class Journal:
    site: Path  # the folder holding the packages (and the dist-infos)
    data: dict

    @property
    def folder(self) -> Path:
        return self.site / JOURNAL_DIR

    @property
    def files(self) -> dict:
        return self.data["files"]

    @classmethod
    def read(cls, site: Path) -> "Journal":
        path = site / JOURNAL_DIR / "journal.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(site, {"format": FORMAT, "files": {}, "fixes": {}})
        except (OSError, ValueError) as err:
            raise UserError(f"{path}: unreadable journal ({one_line(err)}); nothing was changed") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UserError(f"{path}: a journal this fixmono does not read (format {data.get('format')!r}, "
                            f"expected {FORMAT}); nothing was changed")
        return cls(site, data)

    def save(self) -> None:
        write_atomic(self.folder / "journal.json", (json.dumps(self.data, indent=1, sort_keys=True) + "\n").encode())

    def keep(self, data: bytes) -> str:
        """Store `data` (once per content); its sha256."""
        digest = sha256(data)
        blob = self.folder / "store" / digest
        if not blob.is_file() or sha256(blob.read_bytes()) != digest:
            blob.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(blob, data)
        return digest

    def blob(self, digest: str) -> bytes:
        path = self.folder / "store" / digest
        try:
            data = path.read_bytes()
        except OSError as err:
            raise UserError(f"{path}: {one_line(err)} (the journal's copy is gone; reinstall the package)") from None
        if sha256(data) != digest:
            raise UserError(f"{path}: does not hold the bytes the journal names (reinstall the package)")
        return data

    def current(self, rel: str) -> str | None:
        try:
            return sha256((self.site / rel).read_bytes())
        except FileNotFoundError:
            return None

    def state(self, rel: str) -> str:
        """'patched' (the file is what fixmono wrote), 'pending' (a run was
        interrupted), 'reinstalled' (the original is back: pip reinstalled it)
        or 'replaced' (something else wrote it since)."""
        entry, now = self.files[rel], self.current(rel)
        if "pending" in entry:
            return "pending"
        if now == entry["patched"]:
            return "patched"
        return "reinstalled" if now == entry["original"] else "replaced"

    def forget_unused(self) -> None:
        used = {self.files[r][k] for r in self.files for k in ("original", "patched")}
        used |= {e["pending"][k] for e in self.files.values() if "pending" in e for k in ("from", "to")}
        for blob in (self.folder / "store").glob("*") if (self.folder / "store").is_dir() else ():
            if blob.name not in used:
                blob.unlink(missing_ok=True)
        live = {fix for e in self.files.values() for fix in (e["fixes"] + e.get("pending", {}).get("fixes", []))}
        self.data["fixes"] = {k: v for k, v in self.data["fixes"].items() if k in live}


@contextmanager
def locked(site: Path):
    """One patch-env at a time per environment (a lock file in the journal folder)."""
    folder = site / JOURNAL_DIR
    folder.mkdir(exist_ok=True)
    with open(folder / "lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another fixmono patch-env is working on {site}; nothing was changed") from None
        yield


def record_row(rel: str, data: bytes) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([rel, record_hash(data), str(len(data))])
    return buf.getvalue()


def record_lines(record: Path) -> list[str]:
    return record.read_bytes().decode("utf-8").splitlines(keepends=True)  # pip ends them with CRLF: kept


def record_index(lines: list[str]) -> dict[str, int]:
    index = {}
    for n, line in enumerate(lines):
        row = next(csv.reader([line]), [])
        if row:
            index[row[0]] = n
    return index


def record_entry(record: Path, rel: str) -> str | None:
    """The RECORD line of `rel` (without its line end), or None."""
    lines = record_lines(record)
    n = record_index(lines).get(rel)
    return None if n is None else lines[n].rstrip("\r\n")


def sync_record(record: Path, rows: dict[str, str]) -> None:
    """Set the RECORD lines of these paths; every other line stays as it is, byte for byte."""
    lines = record_lines(record)
    index = record_index(lines)
    changed = False
    for rel, row in rows.items():
        n = index.get(rel)
        if n is not None and lines[n].rstrip("\r\n") != row:
            lines[n] = row + lines[n][len(lines[n].rstrip("\r\n")):]
            changed = True
    if changed:
        write_atomic(record, "".join(lines).encode("utf-8"), record.stat().st_mode & 0o7777)


def drop_bytecode(path: Path) -> list[Path]:
    """Remove the compiled forms of `path` (they may hold the other version; an
    unchecked-hash .pyc would even be used). Returns what was removed."""
    cache = path.parent / "__pycache__"
    gone = [p for p in cache.glob(f"{path.stem}.*.pyc") if p.name.split(".")[0] == path.stem] if cache.is_dir() else []
    for pyc in gone:
        pyc.unlink(missing_ok=True)
    return gone


def compile_again(python: str, paths: list[Path]) -> None:
    """Compile the rewritten files with the environment's own interpreter, as
    pip does at install; best effort (Python compiles them at import anyway)."""
    code = "import py_compile, sys\nfor p in sys.argv[1:]:\n    py_compile.compile(p, quiet=2)\n"
    try:
        subprocess.run([python, "-I", "-c", code, *map(str, paths)], capture_output=True, timeout=COMPILE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        pass


def begin(journal: Journal, targets: dict[str, tuple[bytes, list[str]]], dists: dict[str, dict],
          fixes: list[str]) -> None:
    """Write the intent: for each file (path under site) the bytes it is to hold
    and its fixes afterwards; nothing installed is touched yet."""
    for rel, (data, fixes_after) in targets.items():
        entry = journal.files.get(rel)
        if entry is None:
            original = (journal.site / rel).read_bytes()
            entry = journal.files[rel] = {**dists[rel], "original": journal.keep(original),
                                          "patched": None, "fixes": []}
            entry["patched"] = entry["original"]
        entry["pending"] = {"from": entry["patched"], "to": journal.keep(data), "fixes": fixes_after}
    stamp = {"fixmono_version": fixmono.__version__, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    journal.data["fixes"].update({fix: stamp for fix in fixes})
    journal.save()
    pause_point("env-journal-written")


def finish(journal: Journal, python: str) -> list[str]:
    """Bring every pending file to its `to` state, RECORD and bytecode with it,
    and fold the journal. Returns one line per file it could not finish."""
    problems, written = [], []
    for rel, entry in list(journal.files.items()):
        pending = entry.get("pending")
        if pending is None:
            continue
        path, now = journal.site / rel, journal.current(rel)
        if now not in (pending["from"], pending["to"]):
            problems.append(f"{rel}: changed by something else during an interrupted patch-env; left as it is "
                            "and forgotten by the journal")
            journal.files.pop(rel)
            continue
        if now != pending["to"]:
            write_atomic(path, journal.blob(pending["to"]), path.stat().st_mode & 0o7777)
            pause_point("env-file-written")
        record = journal.site / entry["dist_info"] / "RECORD"
        if record.is_file():
            row = entry["record_line"] if pending["to"] == entry["original"] else record_row(rel, journal.blob(pending["to"]))
            if row is not None:
                sync_record(record, {rel: row})
                pause_point("env-record-written")
        drop_bytecode(path)
        written.append(path)
        entry.update(patched=pending["to"], fixes=pending["fixes"])
        del entry["pending"]
        if not entry["fixes"]:
            journal.files.pop(rel)
    if written:
        compile_again(python, written)
    journal.forget_unused()
    journal.save()
    return problems
