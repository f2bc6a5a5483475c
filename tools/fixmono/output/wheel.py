"""Carry a series into an already built wheel, for stacks that cannot rebuild.

Verify the wheel first (sources/verify.py: RECORD, names, sizes, and its
sha256 when one is expected), unpack it, `git apply` the series' patches (Python files only: a fix
that transforms compiled sources is refused by name) or port --diff files onto its files (the
port engine, as make_patch --diff does), give the distribution a
local version suffix (2.20.2 -> 2.20.2+fixmono), rewrite RECORD with the new
hashes and the provenance (fixmono.json in the dist-info: the input wheel's
sha256, each fix with its patch's sha256, the tool version), repack, then
verify: install the new wheel into a temporary venv and run each fix's
presence check on the installed files. `check_patched` reads an output wheel
back (--verify).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version

import fixmono
from fixmono.apply.contract import apply_change, apply_fix
from fixmono.engines.port import diff_fixes
from fixmono.model.errors import UserError
from fixmono.model.fix import Fix
from fixmono.model.outcome import Status
from fixmono.model.patchfile import PatchFile, all_paths, resolve_strip
from fixmono.model.projects import Project, by_dist, pip_project
from fixmono.model.registry import discover
from fixmono.model.shapes import parsed
from fixmono.sources.git import clean_env, run_git
from fixmono.sources.installed import WHEEL_PROVENANCE
from fixmono.sources.processes import bounded
from fixmono.sources.verify import VerifiedWheel, record_hash, verify_wheel

FIX_ID = re.compile(r"^Fix-Id: (\S+)$", re.M)
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-(?P<tags>.+)\.whl$")
LOCAL_LABEL = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")  # PEP 440 local version label
PROVENANCE = "fixmono.json"  # in the output wheel's dist-info
INSTALL_TIMEOUT = 600.0  # seconds for the check install of the output wheel


@dataclass(frozen=True)
class Result:
    wheel: Path
    fixes: list[str]
    verified: list[str]  # "<fix>: <path> fixed" lines from the installed files


def series_fixes(series: Path) -> list[tuple[Path, Fix]]:
    if not (series / "series").is_file():
        raise UserError(f"{series}: no `series` file (give the folder make_patch wrote)")
    names = (series / "series").read_text(encoding="utf-8", errors="replace").split()
    if not names:
        raise UserError(f"{series}/series names no patches")
    known = {f.id: f for f in discover()}
    out = []
    for name in names:
        patch = series / name
        if not patch.is_file():
            raise UserError(f"{series}/series names {name}, which is missing")
        match = FIX_ID.search(patch.read_text(encoding="utf-8", errors="replace"))
        if not match or match.group(1) not in known:
            raise UserError(f"{patch}: no Fix-Id trailer of a known fix")
        out.append((patch, known[match.group(1)]))
    compiled = [fix.id for _, fix in out if any(c.transform.engine != "python" for c in fix.changes)]
    if compiled:
        raise UserError(f"refusing fixes that change compiled code, a built wheel cannot take them: "
                        f"{', '.join(compiled)}")
    return out


def record_line(root: Path, path: Path) -> list[str]:
    data = path.read_bytes()
    return [path.relative_to(root).as_posix(), record_hash(data), str(len(data))]


def new_version(version: str, suffix: str) -> str:
    """2.20.2 -> 2.20.2+fixmono, normalised (a '-' would break the wheel's file name)."""
    if not LOCAL_LABEL.fullmatch(suffix):
        raise UserError(f"--suffix {suffix!r} is not a local version label "
                        "(letters and digits, separated by single '.', '-' or '_')")
    new = f"{version}.{suffix}" if "+" in version else f"{version}+{suffix}"
    try:
        return str(Version(new))
    except InvalidVersion:
        raise UserError(f"{new} is not a valid version (PEP 440)") from None


def make_out_dir(out_dir: Path) -> Path | None:
    """--out must be a writable directory, or one that can be created.
    Returns the topmost folder created here (to remove on failure), or None."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} exists and is not a directory")
    created = next((p for p in reversed([out_dir, *out_dir.parents]) if not p.exists()), None)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"--out {out_dir} cannot be created: {err.strerror}") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise UserError(f"--out {out_dir} is not writable")
    return created


def provenance(verified: VerifiedWheel, fixes: list[tuple[Path, Fix]], expected: str | None,
               texts: dict[str, bytes]) -> dict:
    """`texts`: each fix's patch (by fix id)."""
    return {"tool": "fixmono", "tool_version": fixmono.__version__,
            "input": {"wheel": verified.path.name, "sha256": verified.sha256, "expected_sha256": expected},
            "fixes": [{"id": fix.id, "patch": patch.name, "patch_sha256": hashlib.sha256(texts[fix.id]).hexdigest()}
                      for patch, fix in fixes]}


def diff_series(patches: list[PatchFile], project: Project, members) -> list[tuple[Path, Fix]]:
    """--diff FILE...: each patch a fix of its own for `project`, ported onto the
    wheel's files (`members`: its names; the strip level decided by them)."""
    def there(path: str) -> bool:
        return path.startswith(project.wheel_root) and path.removeprefix(project.wheel_root) in members

    fixes = diff_fixes([resolve_strip(patch, there) for patch in patches], project.name)
    return [(Path(patch.name), fix) for patch, fix in zip(patches, fixes)]


def port_into(root: Path, wheel_root: str, fix: Fix, patch: Path, wheel: str) -> None:
    """A diff fix ported onto the unpacked wheel's files by the port engine, as make_patch does."""
    def read(path: str) -> bytes | None:
        target = root / path.removeprefix(wheel_root)
        return target.read_bytes() if target.is_file() else None

    outcome = apply_fix(fix, read)
    if outcome.status is not Status.APPLIED:
        raise UserError(f"{patch.name} does not apply to {wheel}: {outcome.status.value}: {outcome.detail}")
    for path, text in outcome.new_files.items():
        target = root / path.removeprefix(wheel_root)
        if text is None:  # a file the diff deletes
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")


def patch_wheel(wheel: Path, series: Path | None, out_dir: Path, suffix: str = "fixmono",
                expect_sha256: str | None = None, diffs: list[PatchFile] = ()) -> Result:
    """`diffs`: patch files (read_patches) ported onto the wheel's files instead
    of a series; a wheel of any distribution takes them."""
    match = WHEEL_NAME.match(wheel.name)
    if not wheel.exists():
        raise UserError(f"{wheel}: no such file")
    if not wheel.is_file() or not match:
        raise UserError(f"{wheel}: not a wheel file (name-version-tags.whl)")
    checked = verify_wheel(wheel, expect_sha256)  # before any work: nothing of a bad wheel is used
    if diffs:
        project = pip_project(match["name"], frozenset().union(*(all_paths(patch) for patch in diffs)))
    elif (project := by_dist(match["name"].replace("_", "-"))) is None:
        raise UserError(f"{wheel.name}: {match['name']} is not an upstream of any fix")
    version = new_version(match["version"], suffix)
    fixes = diff_series(list(diffs), project, checked.members) if diffs else series_fixes(series)
    texts = {fix.id: patch.text.encode() for patch, (_, fix) in zip(diffs, fixes)} if diffs else \
        {fix.id: path.read_bytes() for path, fix in fixes}
    wrong = [fix.id for _, fix in fixes if fix.upstream != project.name]
    if wrong:
        raise UserError(f"series has fixes for another upstream than {project.name}: {', '.join(wrong)}")
    created = make_out_dir(out_dir)
    target = out_dir / f"{match['name']}-{version}-{match['tags']}.whl"
    try:
        # unpacked and patched in a temporary folder (not in --out, which may be in a
        # git checkout: `git apply` there would skip the paths); built and verified in
        # a hidden folder beside the target, then renamed: the target name only ever
        # holds a wheel that installed and has the fixes
        with (tempfile.TemporaryDirectory(prefix=".patch_wheel-") as tmp,
              tempfile.TemporaryDirectory(dir=out_dir, prefix=".patch_wheel-", ignore_cleanup_errors=True) as staging):
            root, built = Path(tmp) / "wheel", Path(staging) / target.name
            unpack(checked, root)
            strip = 1 + project.wheel_root.count("/")  # a/src/transformers/x.py -> transformers/x.py
            for patch, fix in fixes:
                if diffs:
                    port_into(root, project.wheel_root, fix, patch, wheel.name)
                    continue
                # outside any repository: git must not find one above the temporary folder
                proc = run_git(root, "apply", f"-p{strip}", "--whitespace=nowarn", str(patch.resolve()),
                               env=clean_env(GIT_CEILING_DIRECTORIES=str(root.parent)))
                if proc.returncode:
                    first = (proc.stderr.strip().splitlines() or ["?"])[0]
                    raise UserError(f"{patch.name} does not apply to {wheel.name}: {first}")
            rename_dist_info(root, checked.dist_info, f"{match['name']}-{version}.dist-info", version,
                             provenance(checked, fixes, expect_sha256, texts))
            repack(root, built)
            verified = verify(built, project.wheel_root, [fix for _, fix in fixes])
            built.replace(target)
    except BaseException:
        if created:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return Result(target, [fix.id for _, fix in fixes], verified)


def unpack(wheel: VerifiedWheel, root: Path) -> None:
    """The verified wheel's members under `root` (its names were checked: none
    leaves it); a .git folder is not unpacked: git would use it."""
    with zipfile.ZipFile(wheel.path) as zf:
        zf.extractall(root, [n for n in zf.namelist() if not n.endswith("/")
                             and ".git" not in PurePosixPath(n).parts])


def rename_dist_info(root: Path, old_name: str, new_name: str, version: str, origin: dict) -> None:
    """The dist-info under its new name and version, with the provenance and a new RECORD."""
    new_info = root / new_name
    (root / old_name).rename(new_info)
    metadata = new_info / "METADATA"
    metadata.write_text(re.sub(r"^Version: .*$", f"Version: {version}", metadata.read_text(encoding="utf-8"),
                               count=1, flags=re.M), encoding="utf-8")
    (new_info / PROVENANCE).write_text(json.dumps(origin, indent=2) + "\n", encoding="utf-8")
    for signature in ("RECORD.jws", "RECORD.p7s"):  # they sign the old RECORD
        (new_info / signature).unlink(missing_ok=True)
    record = new_info / "RECORD"
    rows = [record_line(root, p) for p in sorted(root.rglob("*")) if p.is_file() and p != record]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([*rows, [record.relative_to(root).as_posix(), "", ""]])
    record.write_text(buf.getvalue(), encoding="utf-8")


def repack(root: Path, target: Path) -> None:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            zf.write(path, path.relative_to(root).as_posix())


def verify(wheel: Path, wheel_root: str, fixes: list[Fix]) -> list[str]:
    """Install with pip into a temporary site folder (no deps, no index) and run
    every presence check on the installed files."""
    with tempfile.TemporaryDirectory(prefix=".patch_wheel-site-") as tmp:
        site = Path(tmp) / "site"
        try:  # pip and all it starts killed as a group if it hangs
            proc = bounded([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                            "--disable-pip-version-check", "--target", str(site), str(wheel)],
                           timeout=INSTALL_TIMEOUT, env={**os.environ, "PIP_CONSTRAINT": ""})
        except subprocess.TimeoutExpired:
            raise UserError(f"{wheel.name}: pip did not install it within {INSTALL_TIMEOUT:.0f} s") from None
        if proc.returncode:
            raise UserError(f"{wheel.name} does not install: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        lines = []
        for fix in fixes:
            for change in fix.changes:
                installed = site / change.path.removeprefix(wheel_root)
                if not installed.is_file() and getattr(change.transform, "kind", "") == "deleted":
                    lines.append(f"{fix.id}: {installed.relative_to(site)} is deleted")
                    continue
                if not installed.is_file():  # a file the series' patch did not carry into this wheel either
                    if change.optional:
                        lines.append(f"{fix.id}: {change.path} is not in this wheel (optional)")
                        continue
                    raise UserError(f"{fix.id}: {change.path} is not in the installed wheel")
                status = apply_change(change, installed.read_text(encoding="utf-8")).status
                if status is not Status.ALREADY_APPLIED:
                    raise UserError(f"{fix.id}: installed {installed.relative_to(site)} is {status.value}, not fixed")
                lines.append(f"{fix.id}: {installed.relative_to(site)} has the fix")
        return lines


def read_provenance(wheel: Path, checked: VerifiedWheel) -> dict:
    name = f"{checked.dist_info}/{PROVENANCE}"
    if name not in checked.members:
        raise UserError(f"{wheel.name}: no {name} (not a wheel patch_wheel wrote)")
    with zipfile.ZipFile(wheel) as zf:
        return parsed(zf.read(name), WHEEL_PROVENANCE, f"{wheel.name}: {name} is not the provenance patch_wheel "
                                                       "writes")


def check_patched(wheel: Path) -> tuple[dict, list[str]]:
    """An output wheel read back: verified like any wheel, its provenance, and
    every recorded fix's presence check on the wheel's own files."""
    checked = verify_wheel(wheel)
    origin = read_provenance(wheel, checked)
    known = {f.id: f for f in discover()}
    project = by_dist(checked.name)
    lines = []
    with zipfile.ZipFile(wheel) as zf:
        for entry in origin["fixes"]:
            fix = known.get(entry["id"])
            if fix is None:
                raise UserError(f"{wheel.name}: records fix {entry['id']!r}, which this catalogue does not know")
            for change in fix.changes:
                member = change.path.removeprefix(project.wheel_root if project else "")
                if member not in checked.members:
                    if change.optional:
                        continue
                    raise UserError(f"{wheel.name}: {member}: recorded fix {fix.id} targets it, but the wheel "
                                    "has no such file")
                status = apply_change(change, zf.read(member).decode("utf-8", "replace")).status
                if status is not Status.ALREADY_APPLIED:
                    raise UserError(f"{wheel.name}: {member}: {status.value}, not fixed, though {PROVENANCE} "
                                    f"records {fix.id}")
                lines.append(f"{fix.id}: {member} has the fix")
    return origin, lines
