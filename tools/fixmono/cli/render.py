"""What the commands print: the one table renderer and the one JSON shape.

Every command's --json output is one object, {"command", "exit_code",
"error", ...its payload}; an error is the same object with "error" set and
no payload."""
from __future__ import annotations

import json
import os
from typing import Callable, Sequence


def table(head: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "",
          min_widths: Sequence[int] = (), paint: Callable[[int, str], str] | None = None) -> list[str]:
    """Lines of a table: every column but the last padded to its widest cell
    (at least `min_widths`); `paint(column, padded_text)` colours a cell."""
    widths = [max([len(head[i]), *(len(r[i]) for r in rows), *min_widths[i:i + 1]]) for i in range(len(head) - 1)]

    def line(cells: Sequence[str], painted: bool) -> str:
        out = [f"{c:<{w}}" for c, w in zip(cells, widths)] + [cells[-1]]
        if painted and paint:
            out = [paint(i, c) for i, c in enumerate(out)]
        return indent + "  ".join(out)

    return [line(head, False)] + [line(r, True) for r in rows]


def envelope(command: str, exit_code: int, payload: dict | None = None, error: str | None = None) -> dict:
    return {"command": command, "exit_code": exit_code, "error": error, **(payload or {})}


def as_json(value) -> str:
    return json.dumps(readable(value), indent=2) + "\n"


def readable(value):
    """Strings as text for JSON: an argument's undecodable bytes (LC_ALL=C)
    read as UTF-8, as git reads them, instead of lone surrogates."""
    if isinstance(value, str):
        return os.fsencode(value).decode("utf-8", "replace")
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [readable(v) for v in value]
    return value
