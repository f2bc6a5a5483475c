"""Upstream sources: a git checkout read at HEAD, or a published wheel
materialised into a scratch git repository (`pip:NAME==VERSION`).

Checkouts are only read (through git objects, never the working tree);
nothing here writes into them.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tools.fixlib.errors import UserError
from tools.fixlib.gitrun import Checkout, GitError, clean_env, one_line, run_git
from tools.fixlib.scratch import ScratchRepo
from tools.fixlib.model import Unreadable
from tools.fixlib.projects import PROJECTS, Project, by_dist

SYMLINK_MODE = 0o120000
PIP_SPEC = re.compile(r"^pip:([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
# Deterministic identity of the scratch commits, so patches against the same
# wheel are byte-identical on every machine.
SCRATCH_ENV = {
    "GIT_AUTHOR_NAME": "make_patch", "GIT_AUTHOR_EMAIL": "make_patch@localhost",
    "GIT_COMMITTER_NAME": "make_patch", "GIT_COMMITTER_EMAIL": "make_patch@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


DEFAULT_MAX_TARGET_MIB = 4  # ten times the largest target in the catalogue (~400 KB)


@dataclass
class Upstream:
    spec: str  # as the user gave it
    path: Path  # the repository's top level
    checkout: Checkout  # git runs in it only through here
    common_dir: Path  # where its objects and refs live
    head: str  # full commit id that everything is read from
    object_format: str  # sha1 or sha256
    project: Project | None = None
    label: str = ""  # for people: "pip:torch==2.13.0" or "/src/pytorch @ 1a2b3c4d (main)"
    max_target_bytes: int = DEFAULT_MAX_TARGET_MIB << 20
    _scratch: ScratchRepo | None = field(default=None, repr=False)

    def missing_file_hint(self, path: str) -> str:
        """What to say about a target file this upstream does not have: where
        it looked, and a checkout only where a wheel cannot carry the file."""
        if not self.spec.startswith("pip:"):
            return f"not at HEAD {self.head[:12]}"
        release = self.spec[4:]
        for part in PROJECTS.values():  # a file of a wheel built from the same repository (jaxlib for jax)
            if part.part_of == self.project.name and any(path.startswith(m.split("/")[0] + "/") for m in part.markers):
                return f"not in {release}: it ships in the {part.dist} wheel (--upstream pip:{part.dist}==VERSION)"
        packages = [marker.rsplit("/", 1)[0] + "/" for marker in self.project.markers]  # torch/, src/transformers/
        if path.endswith((".py", ".pyi")) and any(path.startswith(p) for p in packages):  # a Python file of the package: the release has no such file
            return f"not in {release} (its wheel, which carries the package's Python files, has no such file)"
        what = "files outside its package" if path.endswith((".py", ".pyi")) else "tests or C++ sources"
        return (f"not in the published wheel {release} (it carries no {what}); "
                f"pass --upstream <{self.project.part_of or self.project.name} git checkout>")

    @property
    def scratch(self) -> ScratchRepo:
        """A scratch repository over this upstream's objects (made once per run)."""
        if self._scratch is None:
            self._scratch = ScratchRepo(self.common_dir / "objects", self.object_format,
                                        self.common_dir / "shallow")
        return self._scratch

    def entries(self, *paths: str) -> dict[str, tuple[str, str, str, str]]:
        """path -> (mode, type, object id, size) at HEAD, for those that exist."""
        out = self.scratch.git("ls-tree", "-l", "-z", self.head, "--", *paths)
        found = {}
        for record in filter(None, out.split("\0")):
            info, path = record.split("\t", 1)
            found[path] = tuple(info.split())
        return found

    def read(self, path: str) -> bytes | None:
        """The file's bytes at HEAD, or None when HEAD has no such file."""
        entry = self.entries(path).get(path)
        if entry is None:
            return None
        mode, kind, oid, size = entry
        if kind != "blob":
            raise Unreadable(f"{path} is a directory at HEAD")
        if int(mode, 8) == SYMLINK_MODE:
            raise Unreadable(f"{path} is a symlink at HEAD; patch the file it points to")
        if not size.isdigit():  # "BAD": git has the tree entry but not the blob
            raise UserError(f"--upstream {self.spec}: {path} at HEAD is not in this clone (a partial or "
                            f"damaged clone); fetch it with `git -C {self.path} cat-file -e HEAD:{path}`, "
                            "then rerun")
        if int(size) > self.max_target_bytes:
            raise UserError(f"--upstream {self.spec}: {path} is {int(size) / (1 << 20):.1f} MiB at HEAD, "
                            f"above the {self.max_target_bytes / (1 << 20):g} MiB limit for a target; "
                            "raise it with --max-target-size MIB")
        return self.scratch.git("cat-file", "blob", oid, binary=True)


def cache_dir() -> Path:
    return Path(os.environ.get("FIXMONO_CACHE") or Path.home() / ".cache" / "fixmono")


def open_upstream(spec: str) -> Upstream:
    if not spec.strip():
        raise UserError("--upstream is empty; give a git checkout, pip:NAME==VERSION or 'default'")
    from tools.fixlib import remote

    try:
        if remote.is_remote(spec):
            return remote.open_remote(spec)
        return _open_wheel(spec) if spec.startswith("pip:") else _open_checkout(spec)
    except GitError as err:
        raise UserError(f"--upstream {spec}: {err}") from None
    except OSError as err:  # unreadable directories
        raise UserError(f"--upstream {spec}: cannot open it: {describe(err)}") from None


def describe(err: Exception) -> str:
    """An OSError as one line."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}: {err.filename}" if err.filename else err.strerror
    return one_line(str(err))


def _open_checkout(spec: str) -> Upstream:
    try:
        path = Path(spec).expanduser()
    except RuntimeError:  # ~user of no such user
        raise UserError(f"--upstream {spec}: cannot expand '~': no such user") from None
    if not path.exists():
        raise UserError(f"--upstream {spec}: no such file or directory")
    if not path.is_dir():
        raise UserError(f"--upstream {spec}: not a directory")
    upstream = open_repository(path.resolve(), spec)
    check_clean(upstream.checkout, spec)
    upstream.project = detect_project(upstream, spec)
    branch = upstream.checkout.git("symbolic-ref", "-q", "--short", "HEAD").stdout.strip()
    upstream.label = f"{spec} @ {upstream.head[:12]} ({branch or 'detached HEAD'})"
    return upstream


def open_repository(path: Path, spec: str) -> Upstream:
    """The git checkout whose top level is `path`, read at HEAD."""
    checkout = Checkout(path)
    proc = checkout.git("rev-parse", "--path-format=absolute", "--is-bare-repository", "--is-inside-git-dir",
                        "--git-common-dir", "--show-object-format")
    if proc.returncode:
        error = one_line(proc.stderr)
        if "not a git repository" in error:
            raise UserError(f"--upstream {spec}: not a git repository")
        raise UserError(f"--upstream {spec}: git cannot open it: {error}")
    bare, in_git_dir, common_dir, object_format = proc.stdout.split("\n")[:4]
    if bare == "true":
        raise UserError(f"--upstream {spec}: is a bare repository; give a checkout")
    if in_git_dir == "true":
        raise UserError(f"--upstream {spec}: is a .git directory; give the checkout it belongs to")
    top = checkout.git("rev-parse", "--path-format=absolute", "--show-toplevel")
    if top.returncode:
        raise UserError(f"--upstream {spec}: git cannot open it: {one_line(top.stderr)}")
    top_level = Path(top.stdout.strip())
    if top_level.resolve() != path:
        raise UserError(f"--upstream {spec}: not the top level of its repository ({top_level})")
    head = head_commit(checkout, spec)
    return Upstream(spec, path, checkout, Path(common_dir), head, object_format)


def head_commit(checkout: Checkout, spec: str) -> str:
    """HEAD's full id. An unborn branch (no commits yet) is told apart from
    git refusing the repository (dubious ownership, corruption)."""
    proc = checkout.git("rev-parse", "--verify", "-q", "HEAD^{commit}")
    if proc.returncode == 0:
        return proc.stdout.strip()
    branch = checkout.git("symbolic-ref", "-q", "HEAD").stdout.strip()
    if branch and checkout.git("show-ref", "--verify", "-q", branch).returncode == 1:
        raise UserError(f"--upstream {spec}: the repository has no commits "
                        f"(branch {branch.removeprefix('refs/heads/')} is unborn)")
    named = checkout.git("rev-parse", "-q", "--verify", "HEAD").stdout.strip()
    why = f"fatal: bad object HEAD ({named})" if named else one_line(
        checkout.git("rev-parse", "--verify", "HEAD^{commit}").stderr)
    raise UserError(f"--upstream {spec}: git cannot read HEAD: {why}")


def check_clean(checkout: Checkout, spec: str) -> None:
    """Refuse uncommitted changes to tracked files (git status, with every
    filter program switched off and optional locks off: the index is not rewritten)."""
    proc = checkout.git("status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all")
    if proc.returncode:
        raise UserError(f"--upstream {spec}: git status failed: {one_line(proc.stderr)}")
    if proc.stdout.strip():
        raise UserError(f"--upstream {spec}: has uncommitted changes to tracked files; "
                        "commit or stash them (make_patch works from HEAD)")


def detect_project(upstream: Upstream, spec: str) -> Project:
    markers = [m for p in PROJECTS.values() for m in p.markers]
    present = upstream.entries(*markers)
    for project in PROJECTS.values():
        if any(m in present for m in project.markers):
            return project
    known = ", ".join(PROJECTS)
    raise UserError(f"--upstream {spec}: not a known upstream ({known}); "
                    "none of their marker files is at HEAD")


def _open_wheel(spec: str) -> Upstream:
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
