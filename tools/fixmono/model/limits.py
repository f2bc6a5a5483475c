"""The hard caps on what a diff fix takes (issue 40, bounded on any input).
Over one, the input is refused with one line naming the cap and the figure,
before any work: the engine is near-linear below them
(tools/bench_port_scale.py measures it), and no input makes it run for
minutes or take gigabytes."""
from __future__ import annotations

from fixmono.model.errors import UserError

MAX_DIFF_BYTES = 32 << 20  # one patch file, as read
MAX_HUNKS = 100_000  # hunks in one patch file, all its files together
MAX_TARGET_BYTES = 16 << 20  # one file a diff edits, as read from the upstream


def over(what: str, figure: int, cap: int, name: str, unit: str = "") -> str | None:
    if figure <= cap:
        return None
    return f"{what} {figure:,}{unit}, over the cap of {cap:,}{unit} ({name})"


def size_of(text: str) -> int:
    """Its bytes in UTF-8 (without encoding it where it is ASCII)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def target_over_cap(text: str) -> str | None:
    """Why a file a diff edits is too big to port onto (None: it is not)."""
    return over("it is", size_of(text), MAX_TARGET_BYTES, "MAX_TARGET_BYTES", " bytes")


def check_diff_bytes(where: str, size: int) -> None:
    if problem := over("its size is", size, MAX_DIFF_BYTES, "MAX_DIFF_BYTES", " bytes"):
        raise UserError(f"{where}: {problem}; nothing was written")


def check_diff(where: str, text: str) -> None:
    """A diff's text within the caps: its bytes, its hunks (lines that start `@@ -`)."""
    check_diff_bytes(where, size_of(text))
    hunks = text.count("\n@@ -") + text.startswith("@@ -")
    if problem := over("it has", hunks, MAX_HUNKS, "MAX_HUNKS", " hunks"):
        raise UserError(f"{where}: {problem}; nothing was written")
