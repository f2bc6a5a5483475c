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
something else changed since is left alone, reported, and kept in the journal).
A run that stops on an error (a full disk) puts back everything it changed
instead (`undo_on_error`): the environment is as it was before the run.

The journal is untrusted input (whoever can write the environment can write
it): it is read through one shape (model/shapes.py), every path in it is
confined to site-packages (confine.py), and a stored original is written back
only if it hashes to what the journal AND the RECORD line it saved name.
Only the process holding the lock changes or removes the journal folder.
"""
from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import os
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import fixmono
from fixmono.model.errors import UserError, describe, disk_full, one_line
from fixmono.model.shapes import Maybe, Test, checked, parsed
from fixmono.output.confine import check_rel, confined, within
from fixmono.sources.processes import bounded
from fixmono.sources.scratch import pause_point
from fixmono.sources.verify import record_hash

JOURNAL_DIR = ".fixmono-patch-env"
GONE = JOURNAL_DIR + ".gone-"  # a journal folder being removed (renamed away first, under the lock)
FORMAT = 1
COMPILE_TIMEOUT = 120.0
PAUSE_POINTS = ("env-locked", "env-journal-written", "env-file-written", "env-record-written")  # tests stop a run at each

DIGEST = Test(lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) is not None, "a sha256 (64 hex digits)")
DIST_INFO = Test(lambda v: re.fullmatch(r"[^/\\\x00]+\.dist-info", v) is not None and v != "..",
                 "a .dist-info folder name")
ENTRY = {"dist": str, "dist_version?": Maybe(str), "record_line": Maybe(str), "dist_info": Maybe(DIST_INFO),
         "original": DIGEST, "patched": DIGEST, "fixes": [str], "forced?": bool, "link?": Maybe(str),
         "pending?": {"from": DIGEST, "to": DIGEST, "fixes": [str]}}
SHAPE = {"format": Test(lambda v: v == FORMAT and not isinstance(v, bool), f"format {FORMAT}"),
         "files": {str: ENTRY}, "fixes": {str: {str: str}}}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def new_tmp(path: Path) -> tuple[Path, int]:
    """A fresh temporary file beside `path`, created by us (O_EXCL, O_NOFOLLOW):
    a planted file or link of that name is removed first, never written through."""
    tmp = path.with_name(f".{path.name}.fixmono-tmp")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)


def sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """`path` holds its old bytes or `data`, never part of either (temporary
    file beside it, fsync, rename, fsync of the folder). A link at `path` is
    replaced by the file, never written through. A failed write (a full disk)
    leaves no temporary file and names `path`."""
    tmp, fd = new_tmp(path)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644 if mode is None else mode)
        before_change(path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename is None:  # a file object's write does not say where
            err.filename = str(path)
        raise
    os.replace(tmp, path)
    sync_folder(path.parent)


def link_atomic(path: Path, target: str) -> None:
    """`path` becomes the symbolic link `target` in one rename."""
    tmp, fd = new_tmp(path)
    os.close(fd)
    os.unlink(tmp)
    os.symlink(target, tmp)
    before_change(path)
    os.replace(tmp, path)
    sync_folder(path.parent)


def remove(path: Path) -> None:
    """Remove a file (undoably, within `undo_on_error`)."""
    if os.path.lexists(path):
        before_change(path)
        path.unlink(missing_ok=True)


@dataclass
class Undo:
    """What a run changed on disk, to put it back if the run stops on an
    error. Before its first change, a path is kept as a hard link in its
    site's journal folder (old-N), or noted as new. Putting back only renames
    and removes: it needs no free space, so it works on the full disk that
    stopped the run."""

    folders: dict[Path, Path]  # site -> its journal folder (a hard link cannot leave the filesystem)
    steps: list = field(default_factory=list)  # (path, its kept link; None: new; "lost": could not be kept)

    def sweep(self) -> None:
        """Remove the links a killed run kept."""
        for folder in self.folders.values():
            for left in folder.glob("old-*"):
                left.unlink(missing_ok=True)

    def note(self, path: Path) -> None:
        if any(done == path for done, _ in self.steps):
            return  # kept at its first change: that is the state to put back
        self.steps.append((path, self.keep(path) if os.path.lexists(path) else None))

    def keep(self, path: Path) -> Path | str:
        """A hard link to `path` in its site's journal folder, or "lost"."""
        site = next((s for s in self.folders if within(str(path), str(s))), None)
        if site is None:
            return "lost"
        kept = self.folders[site] / f"old-{len(self.steps)}"
        try:
            os.link(path, kept, follow_symlinks=False)
        except OSError as err:  # no hard links here (EPERM, EXDEV): the write stays crash-safe, not undoable
            if disk_full(err):
                raise
            return "lost"
        return kept

    def put_back(self) -> None:
        """Newest first, so each step leaves a state a run killed there
        could have left (the journal's next run completes it)."""
        for path, kept in reversed(self.steps):
            if kept == "lost":
                raise UserError(f"{path}: no copy of its old state could be kept (no hard links there)")
            if kept is None and path.is_dir() and not path.is_symlink():
                path.rmdir()
            elif kept is None:
                path.unlink(missing_ok=True)
            else:
                os.replace(kept, path)
            sync_folder(path.parent)

    def drop(self) -> None:
        for _, kept in self.steps:
            if isinstance(kept, Path):
                kept.unlink(missing_ok=True)


_undo: Undo | None = None  # the Undo of the run now writing, if any


def before_change(path: Path) -> None:
    """Called before `path` is replaced, removed or made."""
    if _undo is not None:
        _undo.note(path)


@contextmanager
def undo_on_error(sites):
    """Within this, an error puts back every change to the sites (their
    files, RECORDs, journals), then goes on up: a full disk, or any failure
    mid-run, leaves the environment as it was. A Ctrl-C or kill does not put
    back: the journal completes that run next time. Hold the sites' locks."""
    global _undo
    undo = Undo({Path(site): journal_folder(Path(site)) for site in sites})
    undo.sweep()
    _undo = undo
    try:
        yield
    except Exception as err:
        _undo = None
        try:
            undo.put_back()
        except (OSError, UserError) as failed:
            raise UserError(f"{describe(err)}; putting back what this run changed failed too ({describe(failed)}): "
                            "the journal holds what was under way: the next patch-env (or --undo) completes it") \
                from err
        raise
    finally:
        _undo = None
    undo.drop()


def journal_folder(site: Path) -> Path:
    """<site>/.fixmono-patch-env, refused if it (or its store) is a link."""
    folder = site / JOURNAL_DIR
    for path in (folder, folder / "store", folder / "journal.json", folder / "lock"):
        if path.is_symlink():
            raise UserError(f"{path} is a link to {os.path.realpath(path)}: a journal fixmono did not write; "
                            "nothing was changed")
    return folder


def patch_env_command(env, *args: str) -> str:
    """The patch-env command line for the Environment `env` (another interpreter's: with its --python)."""
    return " ".join(["fixmono patch-env", *([] if env.here else ["--python", env.python]), *args])


def link_inside(site: Path, rel: str, link: str, where: str) -> str:
    """`link`, the target a journaled file was a symbolic link to, if it stays
    inside `site` (as patch-env only ever follows such a link)."""
    target = os.path.normpath(os.path.join(site, os.path.dirname(rel), link))
    if os.path.isabs(link) or not within(target, os.path.normpath(site)) \
            or not within(os.path.realpath(target), os.path.realpath(site)):
        raise UserError(f"{where}: files.{rel}.link leads to {target}, outside {site}")
    return link


def record_field(line: str | None) -> str | None:
    """The hash field of a saved RECORD line."""
    if line is None:
        return None
    row = next(csv.reader([line]), [])
    return row[1] if len(row) > 1 else None


@dataclass
class Journal:
    site: Path  # the folder holding the packages (and the dist-infos)
    data: dict

    @property
    def folder(self) -> Path:
        return journal_folder(self.site)

    @property
    def files(self) -> dict:
        return self.data["files"]

    @classmethod
    def read(cls, site: Path) -> "Journal":
        path = journal_folder(site) / "journal.json"
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            return cls(site, {"format": FORMAT, "files": {}, "fixes": {}})
        except OSError as err:
            raise UserError(f"{path}: unreadable journal ({one_line(err)}); nothing was changed") from None
        where = f"{path} (a journal this fixmono cannot use; nothing was changed)"
        data = parsed(text, SHAPE, where)
        for rel, entry in data["files"].items():
            check_rel(rel, f"{path}: files")
            line = entry["record_line"]
            if line is not None and (next(csv.reader([line]), [None])[0] != rel):
                raise UserError(f"{where}: files.{rel}.record_line names another file ({line!r:.80})")
            if line is None and not entry.get("forced"):  # patch-env without --force always saves it
                raise UserError(f"{where}: files.{rel} has no record_line but was not patched with --force")
            if entry.get("link") is not None:
                link_inside(site, rel, entry["link"], where)
        return cls(site, data)

    def save(self) -> None:
        checked(self.data, SHAPE, "the journal fixmono is about to write (a bug)")
        write_atomic(self.folder / "journal.json", (json_text(self.data)).encode())

    def keep(self, data: bytes) -> str:
        """Store `data` (once per content); its sha256."""
        digest = sha256(data)
        blob = self.folder / "store" / digest
        if blob.is_symlink() or not blob.is_file() or sha256(blob.read_bytes()) != digest:
            if not blob.parent.is_dir():
                before_change(blob.parent)
                blob.parent.mkdir()
            write_atomic(blob, data)
        return digest

    def blob(self, digest: str) -> bytes:
        checked(digest, DIGEST, "a journal digest")
        path = self.folder / "store" / digest
        try:
            if path.is_symlink():
                raise OSError("a link, not a stored copy")
            data = path.read_bytes()
        except OSError as err:
            raise UserError(f"{path}: {one_line(err)} (the journal's copy is gone; reinstall the package)") from None
        if sha256(data) != digest:
            raise UserError(f"{path}: does not hold the bytes the journal names (altered; reinstall the package); "
                            "nothing was changed")
        return data

    def original(self, rel: str) -> bytes:
        """The stored original of `rel`, checked against the journal's hash and
        the RECORD line it saved (a --force entry: the journal's hash only)."""
        entry = self.files[rel]
        data = self.blob(entry["original"])
        saved = record_field(entry["record_line"])
        if entry["fixes"] and entry["original"] == entry["patched"] and "pending" not in entry:
            raise UserError(f"{self.folder}: the journal names what fixmono wrote to {rel} as its original "
                            "(altered journal); nothing was changed")
        if saved and not entry.get("forced") and record_hash(data, saved) != saved:
            raise UserError(f"{self.folder / 'store' / entry['original']}: the stored original of {rel} does not "
                            f"match the RECORD line the journal saved ({saved}): an altered journal or store; "
                            "reinstall the package; nothing was changed")
        if entry.get("link") is not None:  # restored as the link it was: to a file that still holds the original
            target = self.path(rel).parent / link_inside(self.site, rel, entry["link"], str(self.folder))
            try:
                there = sha256(target.read_bytes())
            except OSError:
                there = None
            if there != entry["original"]:
                raise UserError(f"{self.site / rel} was a link to {target}, which does not hold the original fixmono "
                                "saved: reinstall the package; nothing was changed")
        return data

    def vouched(self, rel: str) -> bool:
        """Whether the RECORD line the journal saved vouches for the stored
        original (always, unless the file was patched with --force)."""
        saved = record_field(self.files[rel]["record_line"])
        return bool(saved) and record_hash(self.blob(self.files[rel]["original"]), saved) == saved

    def path(self, rel: str) -> Path:
        return confined(self.site, rel, str(self.folder / "journal.json"))

    def current(self, rel: str) -> str | None:
        try:
            return sha256(self.path(rel).read_bytes())
        except FileNotFoundError:
            return None

    def record_path(self, rel: str) -> Path | None:
        info = self.files[rel]["dist_info"]
        return None if info is None else confined(self.site, f"{info}/RECORD")

    def state(self, rel: str) -> str:
        """'patched' (the file is what fixmono wrote), 'pending' (a run was
        interrupted), 'reinstalled' (the original is back, or pip installed
        the file again: it matches its RECORD line, which fixmono did not
        write) or 'changed' (something else wrote it since: its original is kept)."""
        entry, now = self.files[rel], self.current(rel)
        if "pending" in entry:
            return "pending"
        if now == entry["patched"]:
            return "patched"
        if now == entry["original"] or now is None:
            return "reinstalled"
        return "reinstalled" if self.installed_by_pip(rel) else "changed"

    def installed_by_pip(self, rel: str) -> bool:
        """The file matches its dist-info's RECORD line, or that dist-info is gone (an upgrade removed it)."""
        record = self.record_path(rel)
        if record is None or not record.is_file():
            return record is not None
        line = record_entry(record, rel)
        field = record_field(line)
        if not field:
            return False
        return record_hash(self.path(rel).read_bytes(), field) == field

    def forget_unused(self) -> None:
        used = {self.files[r][k] for r in self.files for k in ("original", "patched")}
        used |= {e["pending"][k] for e in self.files.values() if "pending" in e for k in ("from", "to")}
        store = self.folder / "store"
        for blob in store.glob("*") if store.is_dir() else ():
            if blob.name not in used:
                remove(blob)
        live = {fix for e in self.files.values() for fix in (e["fixes"] + e.get("pending", {}).get("fixes", []))}
        self.data["fixes"] = {k: v for k, v in self.data["fixes"].items() if k in live}


def json_text(data: dict) -> str:
    import json

    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def holds_files(site: Path) -> bool:
    """Whether the journal on disk names any file (unreadable: yes, it is kept)."""
    try:
        return bool(Journal.read(site).files)
    except UserError:
        return True


def remove_folder(site: Path) -> None:
    """Remove the journal folder: renamed away first (one atomic step), so a
    run that starts meanwhile makes a fresh folder and never loses a file to
    this removal. Called only while holding the lock."""
    folder = site / JOURNAL_DIR
    gone = site / f"{GONE}{os.getpid()}-{time.monotonic_ns()}"
    try:
        os.rename(folder, gone)
    except FileNotFoundError:
        return
    shutil.rmtree(gone, ignore_errors=True)


@contextmanager
def locked(site: Path):
    """One patch-env at a time per environment: an flock on <journal>/lock.
    A run that cannot take it is refused and touches nothing. The holder, on
    leaving, removes the folder when the journal names no file (still holding
    the lock), and removes what a killed holder left half-removed."""
    while True:
        folder = journal_folder(site)
        folder.mkdir(exist_ok=True)
        fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UserError(f"another fixmono patch-env is working on {site}; nothing was changed") from None
        try:  # the lock file may have been renamed away by the holder we just followed: take the new one
            same = os.fstat(fd).st_ino == os.stat(folder / "lock", follow_symlinks=False).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        for left in site.glob(GONE + "*"):  # a removal a kill interrupted
            if left.is_dir() and not left.is_symlink():
                shutil.rmtree(left, ignore_errors=True)
        pause_point("env-locked")
        yield
    finally:
        try:
            if not holds_files(site):
                remove_folder(site)
        finally:
            os.close(fd)


def record_row(rel: str, data: bytes) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([rel, record_hash(data), str(len(data))])
    return buf.getvalue()


def record_lines(record: Path) -> list[str]:
    try:
        return record.read_bytes().decode("utf-8").splitlines(keepends=True)  # pip ends them with CRLF: kept
    except UnicodeDecodeError as err:
        raise UserError(f"{record}: not UTF-8 ({err.reason} at byte {err.start}): a RECORD fixmono cannot read; "
                        "nothing was changed") from None


def record_index(lines: list[str]) -> dict[str, int]:
    index = {}
    for n, line in enumerate(lines):
        try:
            row = next(csv.reader([line]), [])
        except csv.Error:
            continue
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


def drop_bytecode(site: Path, rel: str) -> list[Path]:
    """Remove the compiled forms of site/rel (they may hold the other version;
    an unchecked-hash .pyc would even be used). Returns what was removed."""
    cache = confined(site, rel).parent / "__pycache__"  # a link here is refused before any write (refusal)
    stem = Path(rel).name.removesuffix(".py")
    if cache.is_symlink() or not cache.is_dir():
        return []
    gone = [p for p in cache.glob(f"{stem}.*.pyc") if p.name.split(".")[0] == stem]
    for pyc in gone:
        remove(pyc)
    return gone


def compile_again(python: str, paths: list[Path]) -> None:
    """Compile the rewritten files with the environment's own interpreter, as
    pip does at install; best effort (Python compiles them at import anyway).
    A __pycache__ that is a link is left alone (drop_bytecode did too)."""
    paths = [p for p in paths if not (p.parent / "__pycache__").is_symlink()]
    code = "import py_compile, sys\nfor p in sys.argv[1:]:\n    py_compile.compile(p, quiet=2)\n"
    try:
        bounded([python, "-I", "-c", code, *map(str, paths)], timeout=COMPILE_TIMEOUT)
    except (OSError, Exception):  # noqa: BLE001 (a timeout or a missing interpreter: Python compiles at import)
        pass


def begin(journal: Journal, targets: dict[str, tuple[bytes, list[str]]], dists: dict[str, dict],
          fixes: list[str]) -> None:
    """Write the intent: for each file (path under site) the bytes it is to hold
    and its fixes afterwards; nothing installed is touched yet."""
    for rel, (data, fixes_after) in targets.items():
        entry = journal.files.get(rel)
        if entry is None:
            path = journal.path(rel)
            original = path.read_bytes()
            entry = journal.files[rel] = {**dists[rel], "original": journal.keep(original), "patched": None,
                                          "fixes": []}
            if path.is_symlink():
                entry["link"] = os.readlink(path)
            entry["patched"] = entry["original"]
        entry["pending"] = {"from": entry["patched"], "to": journal.keep(data), "fixes": fixes_after}
    stamp = {"fixmono_version": fixmono.__version__, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    journal.data["fixes"].update({fix: stamp for fix in fixes})
    journal.save()
    pause_point("env-journal-written")


def restore(journal: Journal, rel: str, to: str) -> None:
    """Bring the file to the stored state `to`: the original (checked; a link
    where it was a link) or what fixmono writes."""
    entry, path = journal.files[rel], journal.path(rel)
    if to == entry["original"]:
        data = journal.original(rel)
        if entry.get("link") is not None:  # the link again (original() checked where it leads)
            link_atomic(path, entry["link"])
            return
    else:
        data = journal.blob(to)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    write_atomic(path, data, mode)


def finish(journal: Journal, env, force: bool = False) -> tuple[list[str], list[Path]]:
    """Bring every pending file to its `to` state, RECORD with it, drop its
    bytecode, and fold the journal. Returns one line per file it could not
    finish (kept in the journal, with its originals), and the files written
    (for compile_again once the run is through). `force`: a file changed by
    something else is brought to `to` all the same (--undo --force)."""
    problems, written = [], []
    for rel, entry in list(journal.files.items()):
        pending = entry.get("pending")
        if pending is None:
            continue
        now = journal.current(rel)
        if now not in (pending["from"], pending["to"]) and not force:
            if journal.installed_by_pip(rel):  # pip installed it again meanwhile: nothing of ours is there
                journal.files.pop(rel)
                problems.append(f"{rel}: installed again by pip during an interrupted patch-env; its journal "
                                "entry is forgotten")
                continue
            undo = patch_env_command(env, "--undo", "--force")
            problems.append(f"{rel}: changed by something else during an interrupted patch-env; left as it is, its "
                            f"original kept in the journal (`{undo}` restores it)")
            continue
        if now != pending["to"]:
            restore(journal, rel, pending["to"])
            pause_point("env-file-written")
        record = journal.record_path(rel)
        if record is not None and record.is_file():
            row = entry["record_line"] if pending["to"] == entry["original"] else record_row(rel, journal.blob(pending["to"]))
            if row is not None:
                sync_record(record, {rel: row})
                pause_point("env-record-written")
        drop_bytecode(journal.site, rel)
        written.append(journal.path(rel))
        entry.update(patched=pending["to"], fixes=pending["fixes"])
        del entry["pending"]
        if not entry["fixes"]:
            journal.files.pop(rel)
    journal.forget_unused()
    journal.save()
    return problems, written
