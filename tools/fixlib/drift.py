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
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from tools.fixlib.apply import Status, Unreadable, apply_fix
from tools.fixlib.errors import UserError
from tools.fixlib.model import Fix
from tools.fixlib.projects import PROJECTS
from tools.fixlib.upstream import open_upstream

# The documented ranges: the major version the fixes are written for. torch
# wheels are ~110 MB each, so only BASE unless asked (--versions torch=...).
RANGES = {"transformer-engine": "2", "transformers": "5", "pytorch": "=2.13.0"}


@dataclass
class Cell:
    version: str
    status: str
    detail: str
    static: str  # "applies", "fails", "n/a" (no static patch at BASE)


def published_versions(dist: str, major: str) -> list[str]:
    """Final releases of `dist` whose major version is `major` (pip index: the user's index config)."""
    if major.startswith("="):
        return [major[1:]]
    proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", dist, "--disable-pip-version-check"],
                          capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": ""})
    match = re.search(r"Available versions: (.*)", proc.stdout)
    if not match:
        raise UserError(f"cannot list versions of {dist}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    versions = [Version(v.strip()) for v in match.group(1).split(",")]
    return [str(v) for v in sorted(versions) if not v.is_prerelease and str(v.major) == major]


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
        proc = subprocess.run(["git", "apply", "--check", str(patch)], cwd=upstream.path, capture_output=True)
        static = "applies" if proc.returncode == 0 else "fails"
    return Cell(version, status, detail, static)


def python_fixes(fixes: list[Fix]) -> list[Fix]:
    return [f for f in fixes if all(c.transform.engine == "python" for c in f.changes)
            and PROJECTS[f.upstream].dist]


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
