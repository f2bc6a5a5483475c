"""Rewrites remembered across runs. A transformation's result on a text is a
function of the text and of the transformation's code, so it is kept on disk
under (sha256 of the text, fingerprint of the code: every source file of the
fix's folder, the engine's own, and the parser's version). make_patch,
drift_matrix over wheels and over git history, status and patch-env share it:
a file seen once (a wheel's, a blob at one commit) is never parsed again for
the same fix. Almost all of a warm run's time was libcst parsing, visiting
and printing whole modules (tools/bench_speed.py measures it).

An entry holds the sha256 of the text it gives; one that does not match, or
cannot be read, is computed again. FIXMONO_REWRITE_CACHE=off turns the cache
off (the benchmark's baseline and the equivalence test's)."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Callable

from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed
from fixmono.model.fix import Rewrite
from fixmono.sources.cache_files import save
from fixmono.sources.upstream import cache_dir

FORMAT = 1
ERRORS = {cls.__name__: cls for cls in (NotApplicable, TargetSyntaxError, TransformFailed)}


@functools.lru_cache(maxsize=None)
def fingerprint(module: str | None, engine_file: str, parser_version: str) -> str | None:
    """The code a transformation defined in `module` runs: every .py of its
    folder (a fix's helpers live beside its transform.py), the engine file and
    the parser's version; None (not remembered) where its module is not a file."""
    where = getattr(sys.modules.get(module or ""), "__file__", None)
    if not where:
        return None
    digest = hashlib.sha256(f"{FORMAT}\0{parser_version}\0{sys.version_info[:2]}\0".encode())
    folder = Path(where).parent
    for path in sorted(folder.glob("*.py")) + [Path(engine_file)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def diff_code(path: str, hunks: tuple) -> str:
    """The code a diff's port runs: its file path and hunks (a frozen dataclass's
    repr is its content), the port engine's source and what it reads with (every
    module of engines/ and model/: the alignment, the syntax step, the C/C++ scopes,
    the diff's line splitting; tree-sitter's grammar, Python's ast)."""
    return hashlib.sha256(f"{FORMAT}\0{path}\0{hunks!r}\0".encode("utf-8", "surrogatepass")
                          + port_engine()).hexdigest()


@functools.lru_cache(maxsize=1)
def port_engine() -> bytes:
    here = Path(__file__).parent  # every module the port may run (a syntax step's edit left out served stale results)
    sources = sorted(here.glob("*.py")) + sorted((here.parent / "model").glob("*.py"))
    return b"\0".join([path.read_bytes() for path in sources]
                       + [f"{package_version('tree-sitter')} {package_version('tree-sitter-cpp')} "
                          f"{sys.version_info[:2]}".encode()])


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def enabled() -> bool:
    return os.environ.get("FIXMONO_REWRITE_CACHE", "").lower() not in ("off", "0", "no")


def remembered(code: str | None, source: str, compute: Callable[[str], Rewrite]) -> Rewrite:
    """compute(source), or what it gave before for the same code and text
    (its exceptions too: a text that does not parse does not parse next time)."""
    if code is None or not enabled():
        return compute(source)
    key = hashlib.sha256(f"{code}\0".encode() + source.encode("utf-8", "surrogatepass")).hexdigest()
    entry = cache_dir() / "rewrites" / key[:2] / f"{key}.json"
    found = load(entry)
    if found is not None:
        return found
    try:
        result = compute(source)
    except tuple(ERRORS.values()) as err:
        save(entry, {"error": type(err).__name__, "message": str(err)})
        raise
    save(entry, {"source": result.source, "sha256": hashlib.sha256(result.source.encode("utf-8",
                                                                                        "surrogatepass")).hexdigest(),
                 "changed": result.changed, "present": result.present, "added": list(result.added),
                 "already": list(result.already), "evidence": result.evidence})
    return result


def load(entry: Path) -> Rewrite | None:
    try:
        data = json.loads(entry.read_text(encoding="utf-8"))
        if "error" in data:
            raise ERRORS[data["error"]](data["message"])
        if hashlib.sha256(data["source"].encode("utf-8", "surrogatepass")).hexdigest() != data["sha256"]:
            return None
        return Rewrite(data["source"], data["changed"], data["present"], tuple(data["added"]),
                       tuple(data["already"]), data.get("evidence", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None
