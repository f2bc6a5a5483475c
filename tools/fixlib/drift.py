"""The drift matrix: every published version in a range, for every fix whose
targets ship in wheels. Per version: what make_patch's syntax-tree
transformation reports, and whether the static patch generated at BASE
(patches/<project>/) still applies with `git apply`, the way quilt, Bazel
`patches=` and patch-package apply theirs.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from tools.fixlib.apply import Status, apply_fix
from tools.fixlib.errors import ArgumentParser, UserError, emit, guarded, os_error_as_user_error
from tools.fixlib.gitrun import run_git
from tools.fixlib.model import Fix, Unreadable
from tools.fixlib.projects import PROJECTS
from tools.fixlib.registry import REPO_ROOT, discover
from tools.fixlib.upstream import NEWER_PYTHONS, open_upstream

# The documented ranges: the major version the fixes are written for. torch
# wheels are ~110 MB each, so only BASE unless asked (--versions torch=...).
RANGES = {p.name: p.drift_range for p in PROJECTS.values() if p.drift_range}


@dataclass
class Cell:
    version: str
    status: str
    detail: str
    static: str  # "applies", "fails", "n/a" (no static patch at BASE)


def published_versions(dist: str, major: str) -> list[str]:
    """Final releases of `dist` whose major version is `major` (pip index: the user's index config)."""
    if major.startswith("=") and not major.startswith("=="):
        return [major[1:]]
    versions: set[Version] = set()
    # this interpreter's view, then a newer one's: releases that dropped this Python still ship the files
    for python in ([], ["--python-version", NEWER_PYTHONS[-1]]):
        proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", dist, "--disable-pip-version-check",
                               *python], capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": ""})
        match = re.search(r"Available versions: (.*)", proc.stdout)
        if not match and not python:
            raise UserError(f"cannot list versions of {dist}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        versions |= {Version(v.strip()) for v in match.group(1).split(",")} if match else set()
    wanted = SpecifierSet(major) if major[0] in "<>=!~" else SpecifierSet(f"=={major}.*")
    return [str(v) for v in sorted(versions) if not v.is_prerelease and v in wanted]


def static_patch(project: str, fix: Fix, patches: Path) -> Path | None:
    found = sorted((patches / project).glob(f"[0-9][0-9][0-9][0-9]-{fix.id}.patch"))
    return found[0] if found else None


def cell(fix: Fix, version: str, patches: Path) -> Cell:
    project = PROJECTS[fix.upstream]
    upstream = open_upstream(f"pip:{project.dist}=={version}")
    try:
        outcome = apply_fix(fix, upstream.read, upstream.missing_file_hint)
        status, detail = outcome.status.value, outcome.detail
    except Unreadable as err:
        status, detail = Status.FAILED.value, str(err)
    patch = static_patch(fix.upstream, fix, patches)
    if patch is None:
        static = "n/a"
    else:
        proc = run_git(upstream.path, "apply", "--check", str(patch.resolve()))
        static = "applies" if proc.returncode == 0 else "fails"
    return Cell(version, status, detail, static)


def python_fixes(fixes: list[Fix]) -> list[Fix]:
    return [f for f in fixes if all(c.transform.engine == "python" for c in f.changes)
            and PROJECTS[f.upstream].dist]


def chosen_fixes(ids: list[str] | None, fixes: list[Fix]) -> list[Fix]:
    """The --fix selection (all when none), restricted to fixes whose targets ship in wheels."""
    if unknown := sorted(set(ids or ()) - {f.id for f in fixes}):
        raise UserError(f"unknown fix id(s): {', '.join(unknown)} (known: {', '.join(f.id for f in fixes)})")
    selected = [f for f in fixes if not ids or f.id in ids]
    if not python_fixes(selected):
        raise UserError(f"--fix {', '.join(f.id for f in selected)}: its targets do not ship in wheels")
    return python_fixes(selected)


def parse_versions(specs: list[str], fixes: list[Fix]) -> dict[str, list[str]]:
    """--versions PROJECT=V1,V2 (repeatable), checked before anything is downloaded."""
    targeted = {f.upstream for f in fixes}
    out = {}
    for spec in specs:
        project, sep, listed = spec.partition("=")
        if not sep:
            raise UserError(f"--versions {spec!r}: expected PROJECT=V1,V2")
        if project not in PROJECTS:
            raise UserError(f"--versions {spec!r}: unknown project {project!r} (known: {', '.join(PROJECTS)})")
        if project not in RANGES:
            raise UserError(f"--versions {spec!r}: {project} fixes do not ship in wheels, there is nothing to check")
        if project not in targeted:
            raise UserError(f"--versions {spec!r}: none of the selected fixes targets {project}")
        if project in out:
            raise UserError(f"--versions {spec!r}: {project} given twice")
        versions = [v.strip() for v in listed.split(",")]
        if not all(versions):
            raise UserError(f"--versions {spec!r}: empty version in the list")
        for v in versions:
            try:
                Version(v)
            except InvalidVersion:
                raise UserError(f"--versions {spec!r}: {v!r} is not a version") from None
        out[project] = versions
    return out


def check_report_path(path: Path, flag: str = "--out") -> None:
    """An output path, checked before the (minutes-long) run: a file in a writable folder."""
    path = path.resolve()  # a symlink: its target is the report
    if path.is_dir():
        raise UserError(f"{flag} {path} is a directory")
    if path.exists() and not path.is_file():
        raise UserError(f"{flag} {path} is not a regular file")
    if not path.parent.is_dir():
        raise UserError(f"{flag} {path}: no folder {path.parent}")
    try:
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        raise UserError(f"{flag} {path}: cannot write in {path.parent}: {err.strerror}") from None


def write_report(path: Path, data: str | bytes) -> None:
    """Written beside it, then renamed: the file is whole or not there."""
    path = path.resolve()
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        partial.replace(path)
    except OSError as err:
        raise UserError(f"--out {path}: cannot write the report: {err.strerror}") from None
    finally:
        partial.unlink(missing_ok=True)


def matrix(fixes: list[Fix], versions: dict[str, list[str]], patches: Path, progress=lambda m: None) -> dict:
    rows = {}
    for fix in python_fixes(fixes):
        cells = []
        for v in versions.get(fix.upstream, []):
            progress(f"{fix.id} @ {v}")
            cells.append(cell(fix, v, patches))
        rows[fix.id] = cells
    return rows


def summary(rows: dict) -> str:
    cells = [c for cs in rows.values() for c in cs]
    correct = [c for c in cells if c.status != Status.FAILED.value]
    counts = {s.value: sum(c.status == s.value for c in cells) for s in Status}
    with_static = [c for c in cells if c.static != "n/a"]
    applies = sum(c.static == "applies" for c in with_static)
    return (f"make_patch: {len(correct)}/{len(cells)} fix-versions handled correctly "
            f"({counts['applied']} applied, {counts['already-applied']} already-applied, "
            f"{counts['not-applicable']} not-applicable with a reason, {counts['failed']} failed); "
            f"static patch from BASE applies to {applies}/{len(with_static)}")


def markdown(rows: dict) -> str:
    out = []
    for fix_id, cells in rows.items():
        out += [f"### {fix_id}", "", "| version | make_patch | static patch from BASE |", "|---|---|---|"]
        out += [f"| {c.version} | {c.status} | {c.static} |" for c in cells]
        out.append("")
    return "\n".join(out + [summary(rows)]) + "\n"


def main(argv: list[str] | None = None) -> int:
    """drift_matrix [--fix ID ...] [--versions PROJECT=V1,V2 ...] [--out REPORT.md]:
    a markdown table and a summary line; exit 0 unless make_patch failed
    somewhere, 2 on bad input (every argument checked before any download)."""
    p = ArgumentParser(prog="drift_matrix", description="make_patch and the static patch across published versions")
    p.add_argument("--fix", action="append", help="only this fix (repeatable)")
    p.add_argument("--versions", action="append", default=[], metavar="PROJECT=V1,V2",
                   help="versions to check instead of the documented range")
    p.add_argument("--patches", type=Path, default=REPO_ROOT / "patches",
                   help="the static series (default: patches/)")
    p.add_argument("--out", type=Path, help="also write the report here")
    history_args = p.add_argument_group("over git history instead of wheels")
    history_args.add_argument("--git", type=Path, metavar="CHECKOUT", help="a checkout or bare mirror (one --fix)")
    history_args.add_argument("--range", dest="rev_range", metavar="A..B", help="commits in A..B (default: all to BASE)")
    history_args.add_argument("--since", metavar="DATE", help="only commits after DATE (git log --since)")
    history_args.add_argument("--sample", type=int, metavar="N", help="at most N commits, evenly spread")
    history_args.add_argument("--tips", action="append", default=[], metavar="GLOB",
                              help="also these branches' tips (repeatable), e.g. 'rocm-jaxlib-v*'")
    history_args.add_argument("--base", default="HEAD", help="where the static patch is made (default: HEAD)")
    history_args.add_argument("--csv", type=Path, help="write the points as CSV here")
    history_args.add_argument("--png", type=Path, help="write a timeline PNG here")

    def work() -> int:
        args = p.parse_args(argv)
        if args.git is not None:
            return history_main(args)
        try:
            fixes = chosen_fixes(args.fix, discover())
            chosen = parse_versions(args.versions, fixes)
            if args.out:
                check_report_path(args.out)
            versions = {project: chosen.get(project) or published_versions(PROJECTS[project].dist, RANGES[project])
                        for project in sorted({f.upstream for f in fixes}) if project in RANGES}
            progress = (lambda m: print(f"  {m}", file=sys.stderr)) if sys.stderr.isatty() else (lambda m: None)
            rows = matrix(fixes, versions, args.patches, progress)
        except OSError as err:  # e.g. the wheel cache unwritable: not a bug here
            raise os_error_as_user_error(err) from None
        report = markdown(rows)
        try:
            emit(report)
        finally:  # the report of a minutes-long run is kept even if stdout went away
            if args.out:
                write_report(args.out, report)
        return 1 if any(c.status == "failed" for cells in rows.values() for c in cells) else 0

    code, error = guarded("drift_matrix", work, "interrupted; no report was written")
    return code if error is None else error


def history_main(args) -> int:
    """drift_matrix --git: every argument checked before the (long) walk."""
    from tools.fixlib import history
    from tools.fixlib.projects import runs_on
    from tools.fixlib.upstream import detect_project

    fixes = discover()
    if len(args.fix or []) != 1:
        raise UserError("--git takes exactly one --fix")
    (fix,) = [f for f in fixes if f.id == args.fix[0]] or [None]
    if fix is None:
        raise UserError(f"unknown fix id: {args.fix[0]} (known: {', '.join(f.id for f in fixes)})")
    if args.versions:
        raise UserError("--versions is for wheels; with --git use --range/--since/--tips")
    if args.sample is not None and args.sample < 1:
        raise UserError(f"--sample {args.sample}: must be 1 or more")
    for flag, path in (("--out", args.out), ("--csv", args.csv), ("--png", args.png)):
        if path:
            check_report_path(path, flag)
    try:
        upstream = history.open_history(args.git.expanduser().resolve(), args.base)
        project = detect_project(upstream, str(args.git))
        if not runs_on(fix.upstream, project):
            raise UserError(f"--fix {fix.id} targets {fix.upstream}; {args.git} is a {project.name} repository")
        progress = (lambda m: print(f"  {m}", file=sys.stderr)) if sys.stderr.isatty() else (lambda m: None)
        points = history.history(upstream, fix, args.rev_range, args.since, args.sample, args.tips, progress)
    except OSError as err:
        raise os_error_as_user_error(err) from None
    lines = [f"### {fix.id} over {args.git} (BASE {upstream.head[:12]})", "",
             "| commit | date | branch | make_patch | its patch | static patch from BASE |", "|---|---|---|---|---|---|"]
    lines += [f"| {p.commit[:12]} | {p.date[:10]} | {p.ref} | {p.status} | {p.patch} | {p.static} |" for p in points]
    report = "\n".join(lines + [""] + history.summary(points, upstream.head)) + "\n"
    emit(report)
    for path, data in ((args.out, report.encode()), (args.csv, history.to_csv(points).encode()),
                       (args.png, history.timeline_png(points))):
        if path:
            write_report(path, data)
    return 1 if any(p.status == "failed" for p in points) else 0
