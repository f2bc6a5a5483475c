"""JSON files of the cache (FIXMONO_CACHE) that a run keeps for the next:
read back only when they have the shape expected (else None: computed
again), written whole or not at all (a cache that cannot be written is no
error). Imports nothing heavy: a warm run reads them before anything else."""
from __future__ import annotations

import json
import os
from pathlib import Path

from fixmono.model.errors import UserError
from fixmono.model.shapes import parsed


def load(path: Path, shape) -> dict | None:
    try:
        return parsed(path.read_bytes(), shape, str(path))
    except (OSError, UserError):
        return None


def save(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
