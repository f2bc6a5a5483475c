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
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from fixmono.analysis.history import applies
from fixmono.apply.run import run
from fixmono.model.errors import NoPythonFiles, UserError
from fixmono.model.fix import Fix
from fixmono.model.outcome import Status
from fixmono.model.projects import PROJECTS, named, pip_project, range_specifier
from fixmono.sources.index import Deadline, last_line, pip_stalled, pip_within, stalled
from fixmono.sources.open import open_upstream
from fixmono.sources.upstream import Source
from fixmono.sources.wheel import NEWER_PYTHONS

# The documented ranges (model/projects.py); wheels are read by ranges, the targets only.
RANGES = {p.name: p.drift_range for p in PROJECTS.values() if p.drift_range}


@dataclass
class Cell:
    version: str
    status: str
    detail: str
    static: str  # "applies", "fails", "n/a" (no static patch at BASE)
    read: str = ""  # how the wheel was read: range, full, local-file


def published_versions(dist: str, major: str) -> list[str]:
    """Final releases of `dist` whose major version is `major` (pip index: the user's index config)."""
    if major.startswith("=") and not major.startswith("=="):
        return [major[1:]]
    versions: set[Version] = set()
    deadline = Deadline()  # both questions to the indexes together
    # this interpreter's view, then a newer one's: releases that dropped this Python still ship the files
    for python in ([], ["--python-version", NEWER_PYTHONS[-1]]):
        try:
            proc = pip_within(["index", "versions", dist, "--disable-pip-version-check", *python], deadline,
                              env={**os.environ, "PIP_CONSTRAINT": ""})
        except (subprocess.TimeoutExpired, TimeoutError) as err:
            said = getattr(err, "stderr", "")
            raise stalled(f"cannot list versions of {dist}", deadline, pip_stalled(said) or last_line(said)) from None
        if proc.returncode and pip_stalled(proc.stderr):  # not "no such project": the index did not answer
            raise stalled(f"cannot list versions of {dist}", deadline, pip_stalled(proc.stderr))
        match = re.search(r"Available versions: (.*)", proc.stdout)
        if not match and not python:
            raise UserError(f"cannot list versions of {dist}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        versions |= {Version(v.strip()) for v in match.group(1).split(",")} if match else set()
    wanted = range_specifier(major)
    return [str(v) for v in sorted(versions) if not v.is_prerelease and v.local is None and v in wanted]


def static_patch(project: str, fix: Fix, patches: Path | None) -> Path | None:
    if patches is None:
        return None
    found = sorted((patches / project).glob(f"[0-9][0-9][0-9][0-9]-{fix.id}.patch"))
    return found[0] if found else None


def cell(fix: Fix, version: str, patches: Path | None, full_wheel: bool = False,
         extra: frozenset | None = None, history: Source | None = None, refresh: bool = False) -> Cell:
    """`extra`: the repository paths its wheel's scratch repository holds (a
    --diff's paths at every strip level; default: the fix's files); `history`: a
    repository whose objects may hold a diff's pre-image (drift --history);
    `refresh`: the indexes asked again for the release (once a run)."""
    project = PROJECTS[fix.upstream]
    try:
        upstream = open_upstream(f"pip:{project.dist}=={version}", full_wheel=full_wheel,
                                 extra=extra or frozenset(c.path for c in fix.changes),  # a --diff's files too
                                 refresh=refresh)
    except NoPythonFiles as err:  # a meta-package release: it ships no target
        return Cell(version, Status.NOT_APPLICABLE.value, f"{err} (it ships no target)", "n/a")
    (outcome,) = run(upstream, [fix], history=history)
    status, detail = outcome.status.value, outcome.detail
    patch = static_patch(fix.upstream, fix, patches)
    if patch is None:
        static = "n/a"
    else:
        # against the commit's objects (the files run() read and checked), never the cache's working tree
        static = "applies" if applies(upstream, upstream.head, patch.read_bytes()) else "fails"
    return Cell(version, status, detail, static, upstream.wheel.get("read", ""))


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


def parse_versions(specs: list[str], fixes: list[Fix] | None, paths: frozenset = frozenset()) -> dict[str, list[str]]:
    """--versions PROJECT=V1,V2 (repeatable; PROJECT by its name here or its PyPI
    name), checked before anything is downloaded. `fixes` None: a --diff's,
    made for the project named (any PyPI distribution; `paths`: the diff's)."""
    targeted = {f.upstream for f in fixes or ()}
    out = {}
    for spec in specs:
        given, sep, listed = spec.partition("=")
        if not sep or not given.strip():
            raise UserError(f"--versions {spec!r}: expected PROJECT=V1,V2")
        known = named(given)
        if known is None and fixes is not None:
            raise UserError(f"--versions {spec!r}: unknown project {given!r} (known: "
                            f"{', '.join(p.name for p in PROJECTS.values() if p.markers)}, or their PyPI names)")
        if known is not None and not known.dist:
            raise UserError(f"--versions {spec!r}: {known.name} fixes do not ship in wheels, there is nothing to "
                            "check")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", given):
            raise UserError(f"--versions {spec!r}: {given!r} is not a PyPI name")
        project = (known or pip_project(given, paths)).name
        if fixes is not None and project not in targeted:
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


def matrix(fixes: list[Fix], versions: dict[str, list[str]], patches: Path | None, progress=lambda m: None,
           full_wheel: bool = False, extra: frozenset | None = None, history: Source | None = None,
           refresh: bool = False) -> dict:
    rows = {}
    for fix in python_fixes(fixes):
        cells = []
        for v in versions.get(fix.upstream, []):
            progress(f"{fix.id} @ {v}")
            cells.append(cell(fix, v, patches, full_wheel, extra, history, refresh))
        rows[fix.id] = cells
    return rows


def summary(rows: dict) -> str:
    """The counts. A refusal (`failed`) is an answer too: the release's code is not what the fix can
    change safely, and the table says why; it is counted apart, not as a mistake."""
    cells = [c for cs in rows.values() for c in cs]
    counts = {s.value: sum(c.status == s.value for c in cells) for s in Status}
    with_static = [c for c in cells if c.static != "n/a"]
    applies = sum(c.static == "applies" for c in with_static)
    return (f"make_patch: {len(cells)} fix-versions: {counts['applied']} applied, "
            f"{counts['already-applied']} already-applied, {counts['not-applicable']} not-applicable with a "
            f"reason, {counts['failed']} refused with a reason (failed); "
            f"static patch from BASE applies to {applies}/{len(with_static)}")


REASON_CHARS = 200  # a table cell; --json has the whole detail


def reason(cell: Cell) -> str:
    """Why a release got no patch, one table cell long: the detail of a failed or not-applicable."""
    if cell.status not in (Status.FAILED.value, Status.NOT_APPLICABLE.value):
        return ""
    text = " ".join(cell.detail.split()).replace("|", "\\|")
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1] + "…"


def markdown(rows: dict) -> str:
    out = []
    for fix_id, cells in rows.items():
        out += [f"### {fix_id}", "", "| version | make_patch | static patch from BASE | why not applied |",
                "|---|---|---|---|"]
        out += [f"| {c.version} | {c.status} | {c.static} | {reason(c)} |" for c in cells]
        out.append("")
    return "\n".join(out + [summary(rows)]) + "\n"
