"""drift_matrix --git: a fix over git history instead of published wheels.

The commits in a range that touched the fix's target files (`git log --
PATHS`, optionally sampled evenly), plus branch tips matched by a glob. For
each: make_patch's status there (the same code path as `make_patch --check`),
whether the patch make_patch writes there applies to that commit
(`git apply --check`), and whether the static patch made once at BASE still
applies. Everything runs in a scratch repository borrowing the checkout's
objects (bare mirrors work too); nothing is written to the checkout.
"""
from __future__ import annotations

import csv
import dataclasses
import fnmatch
import io
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from fixmono.apply.run import run
from fixmono.model.errors import UserError, one_line
from fixmono.model.fix import Fix
from fixmono.model.outcome import Status
from fixmono.output.series import Entry, build_commits, format_patch
from fixmono.sources.git import Checkout
from fixmono.sources.upstream import Upstream


@dataclass
class Point:
    commit: str
    date: str  # committer date, ISO 8601
    subject: str
    ref: str  # the branch tip this is, or "" for a commit of the range
    status: str  # make_patch's
    detail: str
    patch: str  # make_patch's own patch there: "applies" / "fails" / "n/a" (nothing to patch)
    static: str  # the patch made at BASE: "applies" / "fails" / "n/a" (none at BASE)


def open_history(path: Path, base: str) -> Upstream:
    """The repository at `path` (a checkout or a bare mirror), read at `base`."""
    if not path.is_dir():
        raise UserError(f"--git {path}: not a directory")
    checkout = Checkout(path)
    proc = checkout.git("rev-parse", "--path-format=absolute", "--git-common-dir", "--show-object-format")
    if proc.returncode:
        raise UserError(f"--git {path}: not a git repository ({one_line(proc.stderr)})")
    common_dir, object_format = proc.stdout.split("\n")[:2]
    head = resolve(checkout, base, f"--base {base}")
    return Upstream(f"{path}", path, checkout, Path(common_dir), head, object_format, label=f"{path} @ {base}")


def resolve(checkout: Checkout, rev: str, what: str) -> str:
    if rev.startswith("-"):
        raise UserError(f"{what}: not a revision")
    proc = checkout.git("rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
    if proc.returncode:
        raise UserError(f"{what}: no such commit in this repository")
    return proc.stdout.strip()


def at(upstream: Upstream, commit: str) -> Upstream:
    """The same repository read at `commit` (one scratch repository for all)."""
    scratch = upstream.scratch
    moved = dataclasses.replace(upstream, head=commit, label=f"{upstream.path} @ {commit[:12]}")
    moved._scratch = scratch
    return moved


def commits(upstream: Upstream, paths: list[str], rev_range: str | None, since: str | None,
            sample: int | None) -> list[tuple[str, str, str]]:
    """(sha, date, subject) of the commits touching `paths`, oldest first."""
    if rev_range:
        start, sep, end = rev_range.partition("..")
        if not sep or not end:
            raise UserError(f"--range {rev_range}: expected A..B")
        spec = [f"{resolve(upstream.checkout, start, '--range'):s}..{resolve(upstream.checkout, end, '--range')}"]
    else:
        spec = [upstream.head]
    args = ["log", "--reverse", "--format=%H%x00%cI%x00%s", *spec]
    if since:
        args.append(f"--since={since}")
    proc = upstream.scratch.run(*args, "--", *paths)
    if proc.returncode:
        raise UserError(f"git log failed: {one_line(proc.stderr)}")
    found = [tuple(line.split("\0", 2)) for line in proc.stdout.splitlines() if line]
    if sample and len(found) > sample:  # evenly, keeping the first and the last
        step = (len(found) - 1) / (sample - 1) if sample > 1 else 0
        found = [found[round(i * step)] for i in range(sample)] if sample > 1 else found[-1:]
    return found


def branch_tips(upstream: Upstream, globs: list[str]) -> list[tuple[str, str, str, str]]:
    """(sha, date, subject, branch) for local branches matching any glob."""
    proc = upstream.checkout.git("for-each-ref", "--format=%(objectname) %(refname:short)", "refs/heads/")
    tips = [line.split(" ", 1) for line in proc.stdout.splitlines() if line]
    picked = sorted((sha, name) for sha, name in tips if any(fnmatch.fnmatchcase(name, g) for g in globs))
    if globs and not picked:
        raise UserError(f"--tips {' '.join(globs)}: no branch matches")
    out = []
    for sha, name in picked:
        date, subject = upstream.scratch.git("log", "-1", "--format=%cI%x00%s", sha).rstrip("\n").split("\0", 1)
        out.append((sha, date, subject, name))
    return out


def applies(upstream: Upstream, commit: str, patch: bytes) -> bool:
    """`git apply --check` of `patch` against the tree of `commit`."""
    upstream.scratch.git("read-tree", commit)
    return upstream.scratch.run("apply", "--check", "--cached", "-", input=patch).returncode == 0


def make_patch_at(upstream: Upstream, fix: Fix) -> tuple[str, str, bytes | None]:
    """make_patch's status, detail and patch for `fix` at upstream.head."""
    (outcome,) = run(upstream, [fix])  # the same code path as make_patch
    if outcome.status is not Status.APPLIED:
        return outcome.status.value, outcome.detail, None
    (sha,) = build_commits(upstream, [Entry(fix, outcome.new_files, outcome.message_note)])
    return outcome.status.value, outcome.detail, format_patch(upstream.scratch, sha, 1, 1)


def history(upstream: Upstream, fix: Fix, rev_range: str | None = None, since: str | None = None,
            sample: int | None = None, tips: list[str] | None = None, progress=lambda m: None) -> list[Point]:
    paths = [c.path for c in fix.changes]
    _, _, static = make_patch_at(upstream, fix)
    targets = [(*c, "") for c in commits(upstream, paths, rev_range, since, sample)]
    targets += branch_tips(upstream, tips or [])
    points = []
    for n, (sha, date, subject, ref) in enumerate(targets, 1):
        progress(f"[{n}/{len(targets)}] {sha[:12]} {ref}")
        here = at(upstream, sha)
        status, detail, patch = make_patch_at(here, fix)
        points.append(Point(sha, date, subject, ref, status, detail,
                            "n/a" if patch is None else ("applies" if applies(here, sha, patch) else "fails"),
                            "n/a" if static is None else ("applies" if applies(here, sha, static) else "fails")))
    return points


def to_csv(points: list[Point]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([f.name for f in dataclasses.fields(Point)])
    writer.writerows(dataclasses.astuple(p) for p in points)
    return out.getvalue()


def summary(points: list[Point], base: str) -> list[str]:
    counts = {s.value: sum(p.status == s.value for p in points) for s in Status}
    lines = [f"{len(points)} commits: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)]
    patched = [p for p in points if p.patch != "n/a"]
    lines.append(f"make_patch's own patch applies at {sum(p.patch == 'applies' for p in patched)}/{len(patched)} "
                 f"of the commits it patched")
    history_points = [p for p in points if not p.ref and p.static != "n/a"]
    lines.append(f"the static patch from BASE {base[:12]} applies at "
                 f"{sum(p.static == 'applies' for p in history_points)}/{len(history_points)} commits of the range")
    applied_once = False
    for p in history_points:  # oldest first: the first commit after which it stopped applying
        if p.static == "applies":
            applied_once = True
        elif applied_once:
            lines.append(f"first commit where it stops applying: {p.commit[:12]} {p.date[:10]} {p.subject[:70]}")
            break
    lines += [f"failed at {p.commit[:12]} {p.ref or p.date[:10]}: {p.detail}" for p in points if p.status == "failed"]
    return lines


COLOURS = {"applied": (46, 160, 67), "already-applied": (31, 111, 235), "not-applicable": (160, 160, 160),
           "failed": (218, 54, 51), "applies": (46, 160, 67), "fails": (218, 54, 51), "n/a": (230, 230, 230)}


def timeline_png(points: list[Point], column: int = 4, band: int = 24, gap: int = 4) -> bytes:
    """A strip per commit, oldest left (branch tips last, after a gap): top
    band make_patch's status, middle its own patch, bottom the static patch;
    colours in COLOURS."""
    columns = []
    for i, p in enumerate(points):
        if p.ref and (i == 0 or not points[i - 1].ref):
            columns += [None] * 2  # the gap before the tips
        columns.append(p)
    width, height = max(1, len(columns) * column), 3 * band + 2 * gap
    rows = []
    for y in range(height):
        field = ("status" if y < band else "patch" if band + gap <= y < 2 * band + gap
                 else "static" if y >= 2 * band + 2 * gap else None)
        row = bytearray(b"\x00")
        for p in columns:
            rgb = (255, 255, 255) if p is None or field is None else COLOURS[getattr(p, field)]
            row += bytes(rgb) * column
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
            + chunk(b"IEND", b""))
