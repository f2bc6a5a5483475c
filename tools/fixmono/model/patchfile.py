"""A patch file as input: a `git format-patch` mail or a plain `diff -u`,
parsed by unidiff, checked before anything uses it.

What it gives: per file, the path (repository-relative), what happens to it
(modified, added, deleted, renamed) and its hunks as (kind, text) lines; and
from a mail's header the author, date, subject and where it came from
(`(cherry picked from commit X)`, a pull-request URL). Refused with one
UserError line: not a diff, a binary change, a path that is absolute or
climbs out with '..', text that is not UTF-8, a hunk whose line counts do
not add up (unidiff's own check).
"""
from __future__ import annotations

import email.parser
import email.utils
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from fixmono.model.errors import UserError, one_line
from fixmono.model.limits import check_diff, check_diff_bytes

SUBJECT_TAG = re.compile(r"^\s*(\[[^\]]*\]\s*)+")
CHERRY = re.compile(r"\(cherry picked from commit ([0-9a-f]{7,40})\)")
PULL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(?:pull|commit)/\w+")


@dataclass(frozen=True)
class Hunk:
    """One hunk: its diff lines as (kind, text), kind ' ', '-' or '+', the text
    with its line end (none where the diff says `\\ No newline at end of file`)."""

    lines: tuple[tuple[str, str], ...]
    start: int  # the pre-image line it names (1-based; 0 for an empty file)
    header: str = ""  # git's section header
    new_start: int = 0  # the post-image line it names

    @property
    def old(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "+"]

    @property
    def new(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "-"]

    @property
    def label(self) -> str:
        removed = sum(k == "-" for k, _ in self.lines)
        added = sum(k == "+" for k, _ in self.lines)
        return f"hunk @@ -{self.start} @@{' ' + self.header if self.header else ''} (-{removed} +{added})"


@dataclass(frozen=True)
class FileDiff:
    path: str  # after the change (before it, for a deleted file)
    kind: str  # "modified" | "added" | "deleted" | "renamed"
    hunks: tuple[Hunk, ...]
    old_path: str | None = None  # a rename's source


@dataclass(frozen=True)
class PatchFile:
    name: str  # where it was read from (a file name, or "-")
    files: tuple[FileDiff, ...]
    author: str | None = None
    date: str | None = None  # YYYY-MM-DD
    subject: str | None = None
    body: str = ""
    origin: str | None = None  # a commit or URL it says it came from
    text: str = field(default="", repr=False)


def lines_of(text: str) -> list[str]:
    """Lines as git and diff split them: at "\\n" only (str.splitlines also splits at \\f, \\x1c, ...)."""
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def repo_path(raw: str, where: str) -> str:
    """A diff's path without its a/ or b/ prefix, checked to stay inside the tree."""
    path = raw[2:] if raw[:2] in ("a/", "b/") else raw
    parts = PurePosixPath(path).parts
    if path.startswith("/") or "\\" in path or not parts or ".." in parts or re.match(r"^[A-Za-z]:", path):
        raise UserError(f"{where}: path {raw!r} is absolute or climbs out with '..'; nothing was written")
    return path


def read_patch(source: str | Path, data: bytes | None = None) -> PatchFile:
    """The patch at `source` ('-': the bytes given as `data`)."""
    name = str(source)
    if data is None:
        try:
            data = Path(source).read_bytes()
        except OSError as err:
            raise UserError(f"{name}: {err.strerror or one_line(err)}") from None
    check_diff_bytes(name, len(data))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{name}: not UTF-8 text (byte {err.start}); nothing was written") from None
    return parse_patch(text, name)


def read_patches(names: list[str], stdin) -> list[PatchFile]:
    """--diff FILE...: each read and checked ('-': the bytes `stdin` holds, once)."""
    if names.count("-") > 1:
        raise UserError("--diff - (stdin) can be given once")
    return [read_patch(name, stdin.read() if name == "-" else None) for name in names]


def parse_patch(text: str, name: str = "<diff>") -> PatchFile:
    import unidiff  # a dependency of the diff fixes only

    check_diff(name, text)  # the caps (model/limits.py), before any work
    try:
        parsed = unidiff.PatchSet(lines_of(text))
    except unidiff.UnidiffParseError as err:
        raise UserError(f"{name}: not a well-formed diff ({one_line(err)}); nothing was written") from None
    files = []
    for patched in parsed:
        where = f"{name}: {patched.path}"
        if patched.is_binary_file:
            raise UserError(f"{where}: a binary change (a diff fix takes text); nothing was written")
        kind = "added" if patched.is_added_file else "deleted" if patched.is_removed_file else \
            "renamed" if patched.is_rename else "modified"
        path = repo_path(patched.source_file if kind == "deleted" else patched.target_file, name)
        old = repo_path(patched.source_file, name) if kind == "renamed" else None
        files.append(FileDiff(path, kind, tuple(hunk_of(h) for h in patched), old))
    if not files:
        raise UserError(f"{name}: no file changes in it (not a unified diff?); nothing was written")
    seen = [f.path for f in files]
    if dup := sorted({p for p in seen if seen.count(p) > 1}):
        raise UserError(f"{name}: changes {dup[0]} twice; nothing was written")
    return PatchFile(name, tuple(files), text=text, **mail_header(text))


def hunk_of(hunk) -> Hunk:
    lines: list[list[str]] = []
    for line in hunk:
        if line.line_type == "\\":  # `\ No newline at end of file`: the line before it has no line end
            if lines:
                lines[-1][1] = lines[-1][1].rstrip("\n").removesuffix("\r")
            continue
        lines.append([line.line_type, line.value])
    return Hunk(tuple((k, t) for k, t in lines), hunk.source_start, hunk.section_header.strip(), hunk.target_start)


DIFF_START = re.compile(r"(?m)^(?:diff |--- |Index: )")
HEADER_LINE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: ")


def mail_header(text: str) -> dict:
    """Author, date, subject, body and origin of a `git format-patch` mail, or of
    a patch that starts with mail or DEP-3 header lines (`From:`/`Author:`,
    `Subject:`/`Description:`, `Date:`/`Last-Update:`, `Origin:`); empty for a plain diff."""
    start = DIFF_START.search(text)
    head = text[:start.start()] if start else text
    if head.startswith("From "):
        head = head.split("\n", 1)[1] if "\n" in head else ""
    elif not HEADER_LINE.match(head):
        return {}
    message = email.parser.Parser().parsestr(head)
    described = (message.get("Description") or "").strip().split("\n", 1)
    subject = SUBJECT_TAG.sub("", " ".join((message.get("Subject") or described[0]).split())) or None
    date = None
    if message.get("Date"):
        try:
            date = email.utils.parsedate_to_datetime(message["Date"]).strftime("%Y-%m-%d")
        except (TypeError, ValueError):
            date = None
    elif re.fullmatch(r"\d{4}-\d{2}-\d{2}", (message.get("Last-Update") or "").strip()):
        date = message["Last-Update"].strip()
    body = message.get_payload() if isinstance(message.get_payload(), str) else ""
    body = re.split(r"(?m)^---$", body, maxsplit=1)[0].strip()  # the diffstat and the diff follow the '---'
    body = body or (described[1].strip() if len(described) > 1 else "")
    cherry, pull = CHERRY.search(body), PULL.search(body)
    origin = pull.group(0) if pull else f"commit {cherry.group(1)}" if cherry else \
        (message.get("Origin") or "").strip() or None
    return {"author": message.get("From") or message.get("Author"), "date": date, "subject": subject,
            "body": body, "origin": origin}
