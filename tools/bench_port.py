#!/usr/bin/env python3
"""The port engine against the catalogue itself (issue 34, benchmark a).

    .venv/bin/python tools/bench_port.py [--fix ID ...] [--versions PROJECT=V1,V2]

For every fix with a checked-in patch (patches/<project>/, generated at BASE
by the hand-written transformation), that patch is given to the port engine
as a diff (`make_patch --diff`'s path: patchfile.read_patch + port.diff_fix)
and run over every published release in the fix's drift range, beside the
hand-written fix and three text tools on the same file text: `git apply`,
`git apply -C1` and `patch --fuzz=3`. The port engine runs twice: as
`make_patch --diff` alone, and given the diff's pre-image (`port engine +
pre-image`): the series' BASE release (patches/<project>/BASE), opened as
`make_patch --base pip:DIST==BASE` opens it (apply/run.run's `base=`; its
file is taken where its blob id is the patch's index line). Per release and tool:

  same    the tool's result equals the hand-written fix's (status, and the text where it applies)
  wrong   it wrote text the hand-written fix does not (misplaced or broken: the worst outcome)
  no      it gave no text (failed, not-applicable, or the tool refused)

A tool's text is also `usable` where what its added lines import, read on
`self`/`cls` and pass as keywords is in the release (engines/uses.py on the
files the release's read gives; a wheel is read by its targets only, so a
module not among them is not judged). The port engine's own text already
had that check (make_patch's).

The hand-written fix is the reference: its statuses are the ones the README's
drift and behaviour tables check by running each bug. Where it says
`already-applied` (upstream has the fix in its own form) a diff can only
agree by finding its own post-image, so those rows are counted apart.
Wheels are read by HTTP range requests (cached), as drift does.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fixmono.analysis.drift import RANGES, parse_versions, published_versions  # noqa: E402
from fixmono.apply.run import run  # noqa: E402
from fixmono.engines.port import diff_fix  # noqa: E402
from fixmono.engines.uses import unresolved_uses  # noqa: E402
from fixmono.model.errors import NoPythonFiles  # noqa: E402
from fixmono.model.outcome import Status  # noqa: E402
from fixmono.model.patchfile import read_patch  # noqa: E402
from fixmono.model.projects import PROJECTS  # noqa: E402
from fixmono.model.registry import discover  # noqa: E402
from fixmono.sources.open import open_upstream  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"git apply": ["git", "apply"], "git apply -C1": ["git", "apply", "-C1"],
         "patch --fuzz=3": ["patch", "-p1", "--fuzz=3", "--no-backup-if-mismatch", "-s", "-f"]}


def patched_by(tool: list[str], patch: bytes, files: dict[str, str]) -> dict[str, str] | None:
    """The files after `tool` applied `patch` in a scratch folder holding `files`; None if it refused."""
    with tempfile.TemporaryDirectory() as tmp:
        for path, text in files.items():
            (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / path).write_text(text)
        proc = subprocess.run(tool, cwd=tmp, input=patch, capture_output=True)
        if proc.returncode:
            return None
        return {path: (Path(tmp) / path).read_text() for path in files}


def verdict(reference, status: Status, texts: dict | None) -> str:
    if status is Status.APPLIED:
        return "same" if reference.status is Status.APPLIED and texts == reference.new_files else "wrong"
    return "same" if status is reference.status else "no"


def usable(upstream, files: dict[str, str], texts: dict | None) -> bool:
    """A text whose added lines use only what the release has (None: no text)."""
    if texts is None:
        return False

    def read(path: str) -> bytes | None:
        return texts[path].encode() if texts.get(path) is not None else upstream.read(path)

    return not any(unresolved_uses(path, files.get(path, ""), text, read) for path, text in texts.items()
                   if text is not None and text != files.get(path))


def base_release(folder: Path, project, paths: frozenset):
    """The release the series in `folder` was made at (its BASE line: `pip:DIST==VERSION <commit>`),
    opened as make_patch --base opens it: the diffs' pre-images are its files. None where BASE names
    another kind of source."""
    spec = (folder / "BASE").read_text().split()[0]
    if not spec.startswith(f"pip:{project.dist}=="):
        return None
    try:
        return open_upstream(f"pip:{project.dist}=={spec.split('==', 1)[1]}", extra=paths)
    except NoPythonFiles:
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fix", action="append", help="only this fix (repeatable)")
    p.add_argument("--versions", action="append", default=[], metavar="PROJECT=V1,V2")
    args = p.parse_args(argv)
    known = {f.id: f for f in discover()}
    cases = []
    for series in sorted((ROOT / "patches").glob("*/series")):
        for name in series.read_text().split():
            patch_path = series.parent / name
            fix_id = next((line.split(": ", 1)[1] for line in patch_path.read_text().splitlines()
                           if line.startswith("Fix-Id: ")), None)
            fix = known.get(fix_id)
            if fix is None or PROJECTS[fix.upstream].name not in RANGES or (args.fix and fix.id not in args.fix):
                continue
            cases.append((fix, patch_path))
    chosen = parse_versions(args.versions, [f for f, _ in cases])
    versions = {}
    totals: dict[str, Counter] = {tool: Counter() for tool in ("port engine", "port engine + pre-image", *TOOLS)}
    rows = []
    for fix, patch_path in cases:
        project = PROJECTS[fix.upstream]
        if project.name not in versions:
            versions[project.name] = chosen.get(project.name) or published_versions(project.dist,
                                                                                    RANGES[project.name])
        data = patch_path.read_bytes()
        ported = diff_fix(read_patch(patch_path), fix.upstream, f"{fix.id}-as-diff")
        paths = frozenset(c.path for c in ported.changes)
        base = base_release(patch_path.parent, project, paths)
        for version in versions[project.name]:
            try:
                upstream = open_upstream(f"pip:{project.dist}=={version}", extra=paths)
            except NoPythonFiles:
                continue
            (reference,) = run(upstream, [fix])
            (port,) = run(upstream, [ported])
            (port_pre,) = run(upstream, [ported], base=base)
            row = {"fix": fix.id, "version": version, "reference": reference.status.value,
                   "port engine": verdict(reference, port.status, port.new_files or None),
                   "port engine + pre-image": verdict(reference, port_pre.status, port_pre.new_files or None)}
            files = {path: upstream.read(path).decode() for path in paths if upstream.read(path) is not None}
            usable_by = {"port engine": usable(upstream, files, port.new_files or None),
                         "port engine + pre-image": usable(upstream, files, port_pre.new_files or None)}
            for tool, command in TOOLS.items():
                texts = patched_by(command, data, files) if len(files) == len(paths) else None
                status = Status.APPLIED if texts is not None else Status.FAILED
                if texts is not None and texts == files:
                    status, texts = Status.ALREADY_APPLIED, None
                row[tool] = verdict(reference, status, texts)
                usable_by[tool] = usable(upstream, files, texts)
            key = "already-applied" if reference.status is Status.ALREADY_APPLIED else "other"
            for tool in totals:
                totals[tool][(key, row[tool])] += 1
                totals[tool]["usable"] += usable_by[tool]
            rows.append(row)
            print(f"{fix.id} @ {version}: reference {row['reference']}; "
                  + ", ".join(f"{t} {row[t]}" for t in totals), file=sys.stderr, flush=True)
    n = len(rows)
    print(f"### The catalogue's own patches as diffs: {n} fix-releases, {len(cases)} patches\n")
    print("| tool | same as the hand-written fix | wrong (misplaced/broken) | no text | "
          "of which the reference is already-applied (same / no) | usable text (its uses in the release) |")
    print("|---|---|---|---|---|---|")
    for tool, counts in totals.items():
        same = counts[("other", "same")] + counts[("already-applied", "same")]
        wrong = counts[("other", "wrong")] + counts[("already-applied", "wrong")]
        no = counts[("other", "no")] + counts[("already-applied", "no")]
        print(f"| {tool} | {same}/{n} ({100 * same / max(n, 1):.0f}%) | {wrong} | {no} | "
              f"{counts[('already-applied', 'same')]} / {counts[('already-applied', 'no')]} | {counts['usable']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
