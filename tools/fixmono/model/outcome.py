"""What applying a fix gives: the statuses and the per-file and per-fix outcomes."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from fixmono.model.fix import Fix


class Status(str, enum.Enum):
    APPLIED = "applied"
    ALREADY_APPLIED = "already-applied"
    NOT_APPLICABLE = "not-applicable"
    FAILED = "failed"


@dataclass(frozen=True)
class FileOutcome:
    path: str
    status: Status
    detail: str
    new_text: str | None = None  # set when status is APPLIED
    optional: bool = False  # an optional file that is missing: reported, not counted
    absent: bool = False  # the file is not in the tree at all
    partly: str = ""  # for a file where some sites were already fixed: which, and what the patch adds
    evidence: str = ""  # Rewrite.evidence: what placed a diff's hunks
    unchecked: str = ""  # what its added lines use that the uses check could not resolve (C/C++ calls)


@dataclass(frozen=True)
class FixOutcome:
    fix: Fix
    status: Status
    detail: str
    files: tuple[FileOutcome, ...] = ()
    new_files: dict[str, str | None] = field(default_factory=dict)  # path -> patched text (None: deleted)
    message_note: str = ""  # a paragraph for the commit message, e.g. "This reverts commit ..."
    validation: str = ""  # with --validate, on an applied fix: "passed", "compile not run" (passed, its compile step could not run here), "failed" or "no check"
