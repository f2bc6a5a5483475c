"""`--upstream pip:NAME==VERSION`: the Python files of a published wheel,
materialised into a cached scratch git repository at the paths they have in
the upstream repository."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from fixmono.model.errors import UserError, one_line
from fixmono.model.projects import PROJECTS, Project, by_dist
from fixmono.sources.git import clean_env, run_git
from fixmono.sources.upstream import Upstream, cache_dir, open_repository

PIP_SPEC = re.compile(r"^pip:([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
# Deterministic identity of the scratch commits, so patches against the same
# wheel are byte-identical on every machine.
SCRATCH_ENV = {
    "GIT_AUTHOR_NAME": "make_patch", "GIT_AUTHOR_EMAIL": "make_patch@localhost",
    "GIT_COMMITTER_NAME": "make_patch", "GIT_COMMITTER_EMAIL": "make_patch@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


def open_wheel(spec: str) -> Upstream:
    match = PIP_SPEC.match(spec)
    if not match:
        raise UserError(f"--upstream {spec}: expected pip:NAME==VERSION")
    dist, version = match.groups()
    project = by_dist(dist)
    if project is None:
        known = ", ".join(p.dist for p in PROJECTS.values() if p.dist)
        raise UserError(f"--upstream {spec}: {dist} is not an upstream of any fix ({known})")
    path = materialise_wheel(project, version)
    upstream = cached_wheel_repository(path, spec)
    if upstream is None:  # a damaged cache entry: built again
        shutil.rmtree(path, ignore_errors=True)
        upstream = cached_wheel_repository(materialise_wheel(project, version), spec)
        if upstream is None:
            raise UserError(f"--upstream {spec}: the scratch repository built from the wheel is unreadable")
    upstream.project, upstream.label = project, spec
    return upstream


def cached_wheel_repository(path: Path, spec: str) -> Upstream | None:
    """The materialised wheel at `path`, or None when the cache entry is damaged
    (git cannot open it, or any of its objects is missing or unreadable)."""
    try:
        upstream = open_repository(path, spec)
    except UserError:
        return None
    listing = upstream.scratch.run("ls-tree", "-r", "-l", "-z", upstream.head)
    records = [r.split("\t", 1)[0].split() for r in listing.stdout.split("\0") if r]
    if listing.returncode or not records or any(not size.isdigit() for *_, size in records):
        return None
    return upstream


def materialise_wheel(project: Project, version: str) -> Path:
    """A scratch git repository holding the Python files of the published wheel,
    at the paths they have in the upstream repository. Cached; built in a
    temporary directory and renamed into place, so an interrupted run leaves
    nothing half-made."""
    final = cache_dir() / "upstreams" / f"{project.dist}-{version}"
    if (final / ".git").is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=".tmp-") as tmp:
        wheel = download_wheel(project.dist, version, Path(tmp) / "dl")
        work = Path(tmp) / "repo"
        if not extract_python_files(wheel, work / project.wheel_root):
            raise UserError(f"pip:{project.dist}=={version}: the wheel {wheel.name} has no Python files")
        commit_tree(work, f"{project.dist} {version}\n\n"
                          "Python files of the published wheel, materialised by make_patch.")
        try:
            work.rename(final)
        except OSError:
            if not (final / ".git").is_dir():  # not just a concurrent run that won
                raise
    return final


def commit_tree(work: Path, message: str) -> None:
    """`work` as a one-commit repository. No user or system config, hooks,
    ignore rules or GIT_* variables: the same wheel gives the same commit."""
    env = clean_env(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, **SCRATCH_ENV)
    for args in (["init", "-q", "-b", "main"], ["add", "-A", "-f"],
                 ["commit", "-q", "--no-gpg-sign", "--no-verify", "-m", message]):
        proc = run_git(work, *args, env=env)
        if proc.returncode:
            raise UserError(f"cannot build the scratch repository: git {args[0]}: {one_line(proc.stderr)}")


NEWER_PYTHONS = ("3.12", "3.13")  # wheels of releases that dropped this interpreter


def download_wheel(dist: str, version: str, dest: Path) -> Path:
    """`pip download --no-deps` of one wheel, honouring the user's pip config
    (index mirrors). A macOS arm64 wheel is tried first: for packages with
    native code it is the smallest that carries the same Python files."""
    dest.mkdir(parents=True)
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--dest", str(dest), f"{dist}=={version}"]
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    small = ["--platform", "macosx_14_0_arm64", "--platform", "macosx_11_0_arm64",
             "--python-version", pyver]
    env = {**os.environ, "PIP_CONSTRAINT": ""}  # a site cap must not hide old versions
    # last, releases for a newer Python only (jaxlib 0.11+ wants 3.12): we read their files, never import them
    newer = [small[:4] + ["--python-version", v, "--ignore-requires-python"] for v in NEWER_PYTHONS]
    error = ""
    for extra in (small, [], *newer):
        proc = subprocess.run(base + extra, env=env, capture_output=True, encoding="utf-8", errors="replace")
        wheels = sorted(dest.glob("*.whl"))
        if proc.returncode == 0 and wheels:
            return wheels[0]
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        error = lines[-1] if lines else f"pip exited {proc.returncode}"
    raise UserError(f"pip:{dist}=={version}: could not download the wheel: {error}")


def extract_python_files(wheel: Path, dest: Path) -> int:
    """Write the wheel's .py/.pyi files under `dest`; returns how many."""
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            parts = PurePosixPath(name).parts
            if not name.endswith((".py", ".pyi")) or parts[0].endswith((".dist-info", ".data")):
                continue
            if ".." in parts or name.startswith("/"):
                continue  # never write outside dest
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
            count += 1
    return count
