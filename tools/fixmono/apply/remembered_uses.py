"""The uses check of a diff's result (engines/uses.py) remembered across runs,
as rewrites are (engines/remembered.py). Its answer is a function of the
file's text before and after, of the other files of the tree it read and of
its code: so it is kept under (sha256 of the texts, the path, the code) with
the sha256 of every file it read (None: not there), and used again only
where each of those files reads the same now. It parses whole files and
diffs them line by line (a large file takes a tenth of a second or more):
without this a warm `status` spent most of its time here.

An entry that cannot be read, or is of the wrong shape, is computed again;
FIXMONO_REWRITE_CACHE=off turns it off with the rewrite cache."""
from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path
from typing import Callable

from fixmono.engines import uses
from fixmono.engines.remembered import enabled
from fixmono.model.errors import UserError
from fixmono.model.shapes import SHA256, Maybe, parsed
from fixmono.sources.cache_files import save
from fixmono.sources.upstream import cache_dir

FORMAT = 1
SHAPE = {"format": int, "problems": [str], "reads": [{"path": str, "sha256": Maybe(SHA256)}]}


@functools.lru_cache(maxsize=1)
def code() -> bytes:
    """The check's code: engines/uses.py and what it takes from engines/port.py, and Python's ast."""
    here = Path(uses.__file__).parent
    return b"\0".join([(here / name).read_bytes() for name in ("uses.py", "port.py")]
                      + [f"{FORMAT} {sys.version_info[:2]}".encode()])


def digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def unresolved_uses(path: str, old_text: str, new_text: str, read: Callable[[str], bytes | None],
                    whole_tree: bool = False) -> list[str]:
    """engines.uses.unresolved_uses of a Python file, or what it gave before for the same texts,
    path and code where every file it read then reads the same now."""
    if not enabled() or not path.endswith(".py"):
        return uses.unresolved_uses(path, old_text, new_text, read, whole_tree)
    key = hashlib.sha256(b"\0".join([code(), path.encode(), b"1" if whole_tree else b"0",
                                     old_text.encode("utf-8", "surrogatepass"), b"",
                                     new_text.encode("utf-8", "surrogatepass")])).hexdigest()
    entry = cache_dir() / "uses" / key[:2] / f"{key}.json"
    found = load(entry, read)
    if found is not None:
        return found
    seen: dict[str, str | None] = {}
    failed = []

    def recording(other: str) -> bytes | None:
        try:
            data = read(other)
        except Exception:
            failed.append(other)  # taken as unknown by the check: an answer not to keep
            raise
        seen[other] = digest(data)
        return data

    problems = uses.unresolved_uses(path, old_text, new_text, recording, whole_tree)
    if not failed:
        save(entry, {"format": FORMAT, "problems": problems,
                     "reads": [{"path": p, "sha256": s} for p, s in seen.items()]})
    return problems


def load(entry: Path, read: Callable[[str], bytes | None]) -> list[str] | None:
    try:
        data = parsed(entry.read_bytes(), SHAPE, str(entry))
    except (OSError, UserError):
        return None
    if data["format"] != FORMAT:
        return None
    for each in data["reads"]:
        try:
            now = digest(read(each["path"]))
        except Exception:  # noqa: BLE001 -- unreadable now: the check decides again, as it would
            return None
        if now != each["sha256"]:
            return None
    return data["problems"]
