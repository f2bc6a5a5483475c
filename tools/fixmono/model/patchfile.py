"""A patch file as input: a `git format-patch` mail or a plain `diff -u`,
parsed by unidiff, checked before anything uses it.

What it gives: per file, the path (repository-relative), what happens to it
(modified, added, deleted, renamed) and its hunks as (kind, text) lines; and
from a mail's header the author, date, subject and where it came from
(`(cherry picked from commit X)`, a pull-request URL). Refused with one
UserError line: not a diff, a binary change, a path that is absolute or
climbs out with '..', a path with a `.git` component or a control character,
text that is not UTF-8, a hunk whose line counts do not add up (unidiff's own
check).

Paths: each file keeps the diff's own names (`raw`), and its `path` is them
with the patch's strip level taken off (as `patch -pN`). The level is the
one the diff's form says (a/ b/, `pkg.orig/` and `pkg/`: 1) until
`resolve_strip` decides it against an upstream's files, as patch and git
apply do: the smallest level under which the files the patch changes are
there. A series (a quilt folder, an mbox, a folder of NNNN-*.patch) is read
by `read_patches` in order.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import difflib
import email.parser
import email.utils
import hashlib
import quopri
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
    def first(self) -> int:
        """The index of the pre-image line its first row stands for (an insertion without context: of the
        line after which it goes)."""
        return self.start - 1 if self.old else self.start

    @property
    def new(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "-"]

    def runs(self) -> list[tuple[int, int, int]]:
        """Each run of changed rows: (its first row, the row after it, the old lines above it in the hunk)."""
        out, i, before = [], 0, 0
        while i < len(self.lines):
            if self.lines[i][0] == " ":
                i, before = i + 1, before + 1
                continue
            j = i
            while j < len(self.lines) and self.lines[j][0] != " ":
                j += 1
            out.append((i, j, before))
            before += sum(kind == "-" for kind, _ in self.lines[i:j])
            i = j
        return out

    @property
    def label(self) -> str:
        removed = sum(k == "-" for k, _ in self.lines)
        added = sum(k == "+" for k, _ in self.lines)
        return f"hunk @@ -{self.start} @@{' ' + self.header if self.header else ''} (-{removed} +{added})"



def git_blob_id(data: bytes) -> str:
    """git's blob id of `data` (as `git hash-object` gives it, SHA-1): what a diff's `index` line names."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

@dataclass(frozen=True)
class FileDiff:
    path: str  # after the change (before it, for a deleted file)
    kind: str  # "modified" | "added" | "deleted" | "renamed"
    hunks: tuple[Hunk, ...]
    old_path: str | None = None  # a rename's source
    raw: tuple[str | None, str | None] = (None, None)  # the diff's names before and after (None: /dev/null)
    old_blob: str | None = None  # the pre-image's git blob id (abbreviated) from its `index` line


@dataclass(frozen=True)
class PatchFile:
    name: str  # where it was read from (a file name, or "-")
    files: tuple[FileDiff, ...]
    author: str | None = None
    date: str | None = None  # YYYY-MM-DD
    subject: str | None = None
    body: str = ""
    origin: str | None = None  # a commit or URL it says it came from
    dep3: tuple[tuple[str, str], ...] = ()  # DEP-3 fields it carries as written: Bug, Forwarded, Applied-Upstream
    text: str = field(default="", repr=False)
    convention: int | None = None  # the strip level its form says (a/ b/, pkg.orig/ pkg/: 1), None: none
    strip: int = 0  # the level `files` are at
    forced: bool = False  # the level was given (--strip N, a quilt series' -pN): resolve_strip keeps it


def lines_of(text: str) -> list[str]:
    """Lines as git and diff split them: at "\\n" only (str.splitlines also splits at \\f, \\x1c, ...)."""
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


# what git ignores in a name on the file systems it guards (HFS+ and NTFS): a `.git` by another spelling
IGNORED_IN_NAMES = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")


def is_git_dir(component: str) -> bool:
    """`.git` in any case, with trailing spaces or dots, or NTFS's short name: git's own directory."""
    name = IGNORED_IN_NAMES.sub("", component).rstrip(" .").lower()
    return name in (".git", "git~1")


def check_raw(raw: str, where: str) -> None:
    """A diff's own name: no control character (NUL, CR, ...), no `.git` component."""
    if bad := re.search(r"[\x00-\x1f\x7f]", raw):
        raise UserError(f"{where}: path {raw!r} holds a control character ({bad.group(0)!r}); nothing was written")
    if any(is_git_dir(part) for part in raw.split("/")):
        raise UserError(f"{where}: path {raw!r} is inside a .git directory (git's own files, never a project's); "
                        "nothing was written")


def strip_path(raw: str, level: int) -> str | None:
    """`raw` without its first `level` components (as patch -pN: runs of '/' count as one); None: too few."""
    parts = [p for p in raw.split("/") if p]
    return "/".join(parts[level:]) if len(parts) > level else None


def repo_path(raw: str, where: str, level: int = 0) -> str:
    """A diff's path at strip `level`, checked to stay inside the tree."""
    path = strip_path(raw, level)
    if path is None:
        raise UserError(f"{where}: path {raw!r} has no more than {level} component(s) to strip (--strip {level}); "
                        "nothing was written")
    parts = PurePosixPath(path).parts
    if raw.startswith("/") or "//" in raw or "\\" in path or not parts or ".." in parts or re.match(r"^[A-Za-z]:", path):
        raise UserError(f"{where}: path {raw!r} is absolute or climbs out with '..'; nothing was written")
    return path


def unquote(name: str) -> str:
    """A name as git writes one with unusual characters: "a/my\\tfile.py" (C escapes, octal UTF-8 bytes)."""
    if not (len(name) > 1 and name[0] == name[-1] == '"'):
        return name
    escapes = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
    out, i, body = bytearray(), 0, name[1:-1]
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            if body[i + 1] in escapes:
                out.append(escapes[body[i + 1]])
                i += 2
                continue
            if re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
        out += body[i].encode()
        i += 1
    return out.decode("utf-8", "replace")


def read_patch(source: str | Path, data: bytes | None = None) -> PatchFile:
    """The patch at `source` ('-': the bytes given as `data`)."""
    name = str(source)
    return parse_patch(decode(name, read_file(Path(source)) if data is None else data), name)


def read_patches(names: list[str], stdin, strip: int | None = None) -> list[PatchFile]:
    """--diff FILE...: each read and checked ('-': the bytes `stdin` holds, once);
    a series (a quilt folder, a folder of NNNN-*.patch, an mbox of several mails)
    gives its patches in order. `strip`: --strip N, the level every path is read at."""
    if names.count("-") > 1:
        raise UserError("--diff - (stdin) can be given once")
    patches = []
    for name, data, level in series_sources(names, stdin):
        patch = parse_patch(decode(name, data), name)
        level = strip if strip is not None else level
        patches.append(patch if level is None else at_strip(patch, level, forced=True))
    return patches


MAIL = re.compile(rb"^From [0-9a-f]{40} ", re.M)  # where `git format-patch --stdout` starts each mail


def read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise UserError(f"{path}: {err.strerror or one_line(err)}") from None


def decode(name: str, data: bytes) -> str:
    check_diff_bytes(name, len(data))  # the cap (model/limits.py), before it is decoded
    try:
        return mail_decoded(name, data).decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{name}: not UTF-8 text (byte {err.start}); nothing was written") from None


MAIL_HEAD_END = re.compile(rb"\r?\n\r?\n")
TRANSFER_ENCODING = re.compile(rb"(?im)^Content-Transfer-Encoding:[ \t]*(\S+)[ \t]*\r?$")


def mail_decoded(name: str, data: bytes) -> bytes:
    """A mail whose body is quoted-printable or base64 (as mail clients and list archives send format-patch
    mails: `torch=3D=3D2.1.0`), its body decoded as `git am` decodes it, the header saying 8bit; a MIME
    multipart mail (`format-patch --attach`) refused; anything else as it is."""
    end = MAIL_HEAD_END.search(data)
    diff = re.search(rb"(?m)^(?:diff |--- |Index: )", data)
    if not end or diff and diff.start() < end.start():
        return data  # no mail header before the diff
    head, body = data[:end.start()], data[end.end():]
    if re.search(rb"(?im)^Content-Type:[ \t]*multipart/", head):
        raise UserError(f"{name}: a MIME multipart mail (format-patch --attach or --inline): give its patch "
                        "attachment, or the mail as git format-patch writes it; nothing was written")
    found = TRANSFER_ENCODING.search(head)
    encoding = found.group(1).lower() if found else b"8bit"
    if encoding not in (b"quoted-printable", b"base64"):
        return data
    try:
        body = quopri.decodestring(body) if encoding == b"quoted-printable" else base64.b64decode(body, validate=False)
    except (ValueError, binascii.Error) as err:
        raise UserError(f"{name}: its {encoding.decode()} body does not decode ({one_line(err)}); nothing was "
                        "written") from None
    head = head[:found.start()] + b"Content-Transfer-Encoding: 8bit" + head[found.end():]
    return head + data[end.start():end.end()] + body


def series_sources(names: list[str], stdin) -> list[tuple[str, bytes, int | None]]:
    """(name, bytes, strip level a quilt series gives or None) of every patch
    `names` give, in order: a file, '-' (stdin), a folder (its `series` file,
    else its NNNN-*.patch files); an mbox split into its mails."""
    found = []
    for name in names:
        if name == "-":
            found.append((name, stdin.read(), None))
        elif Path(name).is_dir():
            found += series_folder(Path(name))
        else:
            found.append((name, read_file(Path(name)), None))
    out = []
    for name, data, level in found:
        mails = split_mails(data)
        out += [(f"{name}#{n}" if len(mails) > 1 else name, mail, level) for n, mail in enumerate(mails, 1)]
    return out


def split_mails(data: bytes) -> list[bytes]:
    """An mbox of `git format-patch --stdout` mails, one patch each; anything else is one patch."""
    starts = [m.start() for m in MAIL.finditer(data)]
    if len(starts) < 2:
        return [data]
    return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]


def series_folder(folder: Path) -> list[tuple[str, bytes, int | None]]:
    """A quilt folder's patches as its `series` file lists them (`name [-pN]` per
    line, # comments; quilt's default is -p1), else its NNNN-*.patch files (git
    format-patch -o) in order."""
    series = folder / "series"
    if not series.is_file():
        numbered = sorted(p for p in folder.iterdir() if re.match(r"\d{4}-.*\.patch$", p.name) and p.is_file())
        if not numbered:
            raise UserError(f"{folder}: a folder with neither a `series` file nor NNNN-*.patch files")
        return [(str(p), read_file(p), None) for p in numbered]
    out = []
    for line in read_file(series).decode("utf-8", "replace").splitlines():
        name, *options = line.split("#", 1)[0].split() or [None]
        if name is None:
            continue
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise UserError(f"{series}: {name!r} is outside the folder")
        level = re.fullmatch(r"-p\s*(\d+)", " ".join(options).strip())
        if options and not level:
            raise UserError(f"{series}: {line.strip()!r}: the options quilt takes here are -pN only")
        out.append((str(folder / name), read_file(folder / name), int(level.group(1)) if level else None))
    if not out:
        raise UserError(f"{series}: lists no patches")
    return out


FIRST_HEADER = re.compile(r"(?m)^--- [^\n]*")


COMBINED = re.compile(r"(?m)^diff --(?:cc|combined) .*$")  # `git show MERGE`: hunks `@@@ ... @@@`, a column per parent


def parse_patch(text: str, name: str = "<diff>") -> PatchFile:
    import unidiff  # a dependency of the diff fixes only
    from unidiff.constants import DEV_NULL

    check_diff(name, text)  # the caps (model/limits.py), before any work
    if combined := COMBINED.search(text):
        raise UserError(f"{name}: `{combined.group(0).strip()}` is a merge's combined diff, which git apply does not "
                        "take either: make the diff against one parent (`git diff MERGE^1 MERGE`, or `git log -m "
                        "--first-parent -p`); nothing was written")
    if (first := FIRST_HEADER.search(text)) and first.group(0).endswith("\r"):
        text = text.replace("\r\n", "\n")  # a diff whose every line end became CRLF: read as patch reads it
    try:
        parsed = unidiff.PatchSet(lines_of(text))
    except unidiff.UnidiffParseError as err:
        raise UserError(f"{name}: not a well-formed diff ({one_line(err)}); nothing was written") from None
    files = []
    for patched in parsed:
        old, new = (None if f in (None, DEV_NULL) else unquote(f)
                    for f in (patched.source_file, patched.target_file))
        for raw in (old, new):
            if raw is not None:
                check_raw(raw, name)
        where = f"{name}: {new or old}"
        if patched.is_binary_file:
            raise UserError(f"{where}: a binary change (a diff fix takes text); nothing was written")
        info = [str(line) for line in patched.patch_info or ()]
        if any(line.startswith("copy from ") for line in info):
            raise UserError(f"{where}: a copy (git diff -C) is not ported; make the diff without -C; nothing was "
                            "written")
        added, deleted = created_or_deleted(patched, info)
        kind = "added" if added else "deleted" if deleted else \
            "renamed" if any(line.startswith("rename from ") for line in info) else "modified"
        raw = (None if kind == "added" else old, None if kind == "deleted" else new)
        files.append(FileDiff("", kind, tuple(hunk_of(h) for h in patched), None, raw, old_blob(info)))
    if not files:
        raise UserError(f"{name}: no file changes in it (not a unified diff?); nothing was written")
    convention = strip_convention(files)
    patch = PatchFile(name, tuple(files), text=text, convention=convention, **mail_header(text))
    return at_strip(patch, convention or 0)


def created_or_deleted(patched, info: list[str]) -> tuple[bool, bool]:
    """Whether the diff creates, or deletes, the file. A git diff says it (`new file mode`, `deleted file
    mode`, /dev/null): one that empties a file or fills an empty one only edits it, as `git apply` reads
    it. A plain diff (`diff -uN`) says it by its one hunk's empty side only, as `patch` reads it."""
    from unidiff.constants import DEV_NULL

    if any(line.startswith("diff --git ") for line in info):
        return (patched.source_file == DEV_NULL or any(line.startswith("new file mode") for line in info),
                patched.target_file == DEV_NULL or any(line.startswith("deleted file mode") for line in info))
    return patched.is_added_file, patched.is_removed_file


def strip_convention(files: list[FileDiff]) -> int | None:
    """1 where the diff's names say it: every file named on both sides (a rename
    aside) differs only in its first component (git's a/ b/, quilt's pkg.orig/
    pkg/), and every other name starts with a/ or b/ or with one of those
    components; else None."""
    both = [f.raw for f in files if None not in f.raw and f.kind != "renamed"]
    firsts = {p.split("/", 1)[0] for pair in both for p in pair}
    for old, new in both:
        (a, _, rest_a), (b, _, rest_b) = old.partition("/"), new.partition("/")
        if not (rest_a and rest_a == rest_b and a != b):
            return None
    others = [r for f in files if None in f.raw or f.kind == "renamed" for r in f.raw if r]
    if any(not (r[:2] in ("a/", "b/") or r.split("/", 1)[0] in firsts) for r in others):
        return None
    return 1


def paths_at(diff: FileDiff, level: int) -> list[str]:
    """Where a file of the diff is at strip `level`: its names there, the one after first."""
    return [p for p in dict.fromkeys(strip_path(r, level) for r in (diff.raw[1], diff.raw[0]) if r) if p]


def at_strip(patch: PatchFile, level: int, forced: bool = False, exists=None) -> PatchFile:
    """`patch` with its paths read at strip `level` (checked: inside the tree, each
    file once). A file a plain diff names twice (`diff -u m.py.orig m.py`) is at
    the name after, unless only the name before `exists`."""
    if level < 0:
        raise UserError(f"--strip {level}: give a level of 0 or more")
    files = []
    for f in patch.files:
        old, new = (repo_path(r, patch.name, level) if r else None for r in f.raw)
        if f.kind == "renamed":
            files.append(dataclasses.replace(f, path=new, old_path=old))
        else:
            path = old if exists and old and new and not exists(new) and exists(old) else new or old
            files.append(dataclasses.replace(f, path=path, old_path=None))
    seen = [f.path for f in files]
    if dup := sorted({p for p in seen if seen.count(p) > 1}):
        raise UserError(f"{patch.name}: changes {dup[0]} twice; nothing was written")
    return dataclasses.replace(patch, files=tuple(files), strip=level, forced=forced)


def all_paths(patch: PatchFile) -> frozenset[str]:
    """Every path a file of the patch is at, at every strip level (what an upstream is asked for)."""
    deepest = max(r.count("/") for f in patch.files for r in f.raw if r)
    return frozenset(p for f in patch.files for n in range(deepest + 1) for p in paths_at(f, n))


def resolve_strip(patch: PatchFile, exists, strip: int | None = None) -> PatchFile:
    """`patch` at the strip level the upstream's files say, as patch and git apply
    decide it: the smallest level (1 at least for a/ b/ names) under which every
    file it changes, deletes or renames is there (`exists(path)`), one level for
    all its files. None is: the level its form says (a file that is not there is
    then not-applicable: the path was understood), else one line naming the
    paths tried. A patch that only adds files takes the level its form says.
    `strip` (--strip N) decides it instead."""
    if strip is not None:
        return at_strip(patch, strip, forced=True)
    if patch.forced:
        return patch
    judged = [f for f in patch.files if f.kind != "added"]
    deepest = max(r.count("/") for f in patch.files for r in f.raw if r)
    for level in range(patch.convention or 0, deepest + 1):
        if judged and all(any(exists(p) for p in paths_at(f, level)) for f in judged):
            return at_strip(patch, level, exists=exists)
    if patch.convention is not None:
        return at_strip(patch, patch.convention)
    if not judged:
        raise UserError(f"{patch.name}: it only adds files, and its names ({patch.files[0].raw[1]}) have no prefix "
                        "convention (a/ b/, pkg.orig/ pkg/) to strip by; give --strip N (as patch -pN)")
    raw = judged[0].raw[0] or judged[0].raw[1]
    tried = ", ".join(p for n in range(patch.convention or 0, deepest + 1) for p in paths_at(judged[0], n)[:1])
    raise UserError(f"{patch.name}: {raw} is not in the upstream at any strip level (tried {tried}); "
                    "give the right --upstream, or --strip N (as patch -pN)")


def old_blob(info) -> str | None:
    """The pre-image blob id a git diff's `index OLD..NEW` line names (None: no such line, or a new file)."""
    found = next((m[1] for line in info or () if (m := INDEX_LINE.match(str(line)))), None)
    return None if found is None or not found.strip("0") else found


INDEX_LINE = re.compile(r"index ([0-9a-f]{7,64})\.\.[0-9a-f]{7,64}")


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
    `Subject:`/`Description:`, `Date:`/`Last-Update:`, `Origin:`, and `Bug:`, `Forwarded:`,
    `Applied-Upstream:` as written); empty for a plain diff."""
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
    dep3 = tuple((name, " ".join(message[name].split())) for name in DEP3_KEPT if (message.get(name) or "").strip())
    return {"author": message.get("From") or message.get("Author"), "date": date, "subject": subject,
            "body": body, "origin": origin, "dep3": dep3}


DEP3_KEPT = ("Bug", "Forwarded", "Applied-Upstream")  # a patch's own DEP-3 fields that a fix made of it keeps


def unified_diff(before: list[str], after: list[str], path: str) -> str:
    """The unified diff of two texts' lines (a/PATH, b/PATH), with git's `\\ No newline at end of file`
    after a last line without a line end (difflib writes none: its diff would not parse)."""
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))


def new_line_numbers(old_text: str, new_text: str) -> set[int]:
    """The line numbers (from 1) of `new_text` that are not `old_text`'s."""
    old, new = old_text.splitlines(), new_text.splitlines()
    rows = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("insert", "replace"):
            rows.update(range(j1 + 1, j2 + 1))
    return rows


def ending(line: str) -> str:
    """A line's line break: "\r\n", "\n", or "" (the file's last line without one)."""
    return "\r\n" if line.endswith("\r\n") else "\n" if line.endswith("\n") else ""
