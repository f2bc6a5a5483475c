"""Carry a series into an already built wheel, for stacks that cannot rebuild.

Unpack the wheel, `git apply` the series' patches (Python files only: a fix
that transforms compiled sources is refused by name), give the distribution a
local version suffix (2.20.2 -> 2.20.2+fixmono), rewrite RECORD with the new
hashes, repack, then verify: install the new wheel into a temporary venv and
run each fix's presence check on the installed files.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tools.fixlib.apply import Status, apply_change
from tools.fixlib.errors import UserError
from tools.fixlib.model import Fix
from tools.fixlib.projects import by_dist
from tools.fixlib.registry import discover

FIX_ID = re.compile(r"^Fix-Id: (\S+)$", re.M)
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-(?P<tags>.+)\.whl$")


@dataclass(frozen=True)
class Result:
    wheel: Path
    fixes: list[str]
    verified: list[str]  # "<fix>: <path> fixed" lines from the installed files


def series_fixes(series: Path) -> list[tuple[Path, Fix]]:
    if not (series / "series").is_file():
        raise UserError(f"{series}: no `series` file (give the folder make_patch wrote)")
    known = {f.id: f for f in discover()}
    out = []
    for name in (series / "series").read_text(encoding="utf-8").split():
        patch = series / name
        if not patch.is_file():
            raise UserError(f"{series}/series names {name}, which is missing")
        match = FIX_ID.search(patch.read_text(encoding="utf-8"))
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
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [path.relative_to(root).as_posix(), f"sha256={digest}", str(len(data))]


def new_version(version: str, suffix: str) -> str:
    return f"{version}.{suffix}" if "+" in version else f"{version}+{suffix}"


def patch_wheel(wheel: Path, series: Path, out_dir: Path, suffix: str = "fixmono") -> Result:
    match = WHEEL_NAME.match(wheel.name)
    if not wheel.is_file() or not match:
        raise UserError(f"{wheel}: not a wheel file (name-version-tags.whl)")
    project = by_dist(match["name"].replace("_", "-"))
    if project is None:
        raise UserError(f"{wheel.name}: {match['name']} is not an upstream of any fix")
    fixes = series_fixes(series)
    wrong = [fix.id for _, fix in fixes if fix.upstream != project.name]
    if wrong:
        raise UserError(f"series has fixes for another upstream than {project.name}: {', '.join(wrong)}")
    version = new_version(match["version"], suffix)
    with tempfile.TemporaryDirectory(prefix=".patch_wheel-") as tmp:
        root = Path(tmp) / "wheel"
        try:
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(root)
        except zipfile.BadZipFile:
            raise UserError(f"{wheel}: not a valid wheel (zip) file") from None
        strip = 1 + project.wheel_root.count("/")  # a/src/transformers/x.py -> transformers/x.py
        for patch, fix in fixes:
            proc = subprocess.run(["git", "apply", f"-p{strip}", "--whitespace=nowarn", str(patch.resolve())],
                                  cwd=root, capture_output=True, text=True, encoding="utf-8")
            if proc.returncode:
                first = (proc.stderr.strip().splitlines() or ["?"])[0]
                raise UserError(f"{patch.name} does not apply to {wheel.name}: {first}")
        rename_dist_info(root, match["name"], match["version"], version)
        target = out_dir / f"{match['name']}-{version}-{match['tags']}.whl"
        out_dir.mkdir(parents=True, exist_ok=True)
        repack(root, target)
    verified = verify(target, project.wheel_root, [fix for _, fix in fixes])
    return Result(target, [fix.id for _, fix in fixes], verified)


def rename_dist_info(root: Path, name: str, old: str, new: str) -> None:
    old_info, new_info = root / f"{name}-{old}.dist-info", root / f"{name}-{new}.dist-info"
    if not old_info.is_dir():
        raise UserError(f"wheel has no {old_info.name}")
    old_info.rename(new_info)
    metadata = new_info / "METADATA"
    metadata.write_text(re.sub(r"^Version: .*$", f"Version: {new}", metadata.read_text(encoding="utf-8"),
                               count=1, flags=re.M), encoding="utf-8")
    record = new_info / "RECORD"
    rows = [record_line(root, p) for p in sorted(root.rglob("*")) if p.is_file() and p != record]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([*rows, [record.relative_to(root).as_posix(), "", ""]])
    record.write_text(buf.getvalue(), encoding="utf-8")


def repack(root: Path, target: Path) -> None:
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            zf.write(path, path.relative_to(root).as_posix())
    partial.replace(target)  # a reader never sees half a wheel


def verify(wheel: Path, wheel_root: str, fixes: list[Fix]) -> list[str]:
    """Install with pip into a temporary site folder (no deps, no index) and run
    every presence check on the installed files."""
    with tempfile.TemporaryDirectory(prefix=".patch_wheel-site-") as tmp:
        site = Path(tmp) / "site"
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                               "--disable-pip-version-check", "--target", str(site), str(wheel)],
                              capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": ""})
        if proc.returncode:
            raise UserError(f"{wheel.name} does not install: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        lines = []
        for fix in fixes:
            for change in fix.changes:
                installed = site / change.path.removeprefix(wheel_root)
                status = apply_change(change, installed.read_text(encoding="utf-8")).status
                if status is not Status.ALREADY_APPLIED:
                    raise UserError(f"{fix.id}: installed {installed.relative_to(site)} is {status.value}, not fixed")
                lines.append(f"{fix.id}: {installed.relative_to(site)} has the fix")
        return lines
