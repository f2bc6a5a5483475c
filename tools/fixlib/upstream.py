"""Upstream sources: a git checkout read at HEAD, or a published wheel
materialised into a scratch git repository (`pip:NAME==VERSION`).

Checkouts are only read (through git objects, never the working tree);
nothing here writes into them.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import git

from tools.fixlib.errors import UserError
from tools.fixlib.gitrun import clean_env, one_line, run_git
from tools.fixlib.projects import PROJECTS, Project, by_dist
from tools.fixlib.apply import Unreadable

SYMLINK_MODE = 0o120000
PIP_SPEC = re.compile(r"^pip:([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
# Deterministic identity of the scratch commits, so patches against the same
# wheel are byte-identical on every machine.
SCRATCH_ENV = {
    "GIT_AUTHOR_NAME": "make_patch", "GIT_AUTHOR_EMAIL": "make_patch@localhost",
    "GIT_COMMITTER_NAME": "make_patch", "GIT_COMMITTER_EMAIL": "make_patch@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


@dataclass
class Upstream:
    spec: str  # as the user gave it
    path: Path  # the git repository's top level
    repo: git.Repo
    head: str  # full commit sha that everything is read from
    project: Project
    label: str  # for people: "pip:torch==2.13.0" or "/src/pytorch @ 1a2b3c4d (main)"

    @property
    def missing_file_hint(self) -> str:
        """What to say about a target file this upstream does not have."""
        if self.spec.startswith("pip:"):
            return (f"not in the published wheel {self.spec[4:]} (wheels carry no tests or C++ "
                    f"sources); pass --upstream <{self.project.name} git checkout>")
        return f"not at HEAD {self.head[:12]}"

    def read(self, path: str) -> bytes | None:
        """The file's bytes at HEAD, or None when HEAD has no such file."""
        try:
            entry = self.repo.commit(self.head).tree[path]
        except KeyError:
            return None
        if entry.type != "blob":
            raise Unreadable(f"{path} is a directory at HEAD")
        if entry.mode == SYMLINK_MODE:
            raise Unreadable(f"{path} is a symlink at HEAD; patch the file it points to")
        return entry.data_stream.read()


def cache_dir() -> Path:
    return Path(os.environ.get("FIXMONO_CACHE") or Path.home() / ".cache" / "fixmono")


def open_upstream(spec: str) -> Upstream:
    if not spec.strip():
        raise UserError("--upstream is empty; give a git checkout, pip:NAME==VERSION or 'default'")
    try:
        return _open_wheel(spec) if spec.startswith("pip:") else _open_checkout(spec)
    except (OSError, git.GitCommandError) as err:  # unreadable directories, git failing
        raise UserError(f"--upstream {spec}: cannot open it: {describe(err)}") from None


def describe(err: Exception) -> str:
    """An OSError or GitCommandError as one line, without GitPython's framing."""
    if isinstance(err, git.GitCommandError):
        text = str(err.stderr or "").strip().removeprefix("stderr:").strip().strip("'")
        return one_line(text) or f"git exited with {err.status}"
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
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UserError(f"--upstream {spec}: not a git repository") from None
    if repo.bare:
        raise UserError(f"--upstream {spec}: is a bare repository; give a checkout")
    if repo.working_tree_dir and Path(repo.working_tree_dir).resolve() != path.resolve():
        raise UserError(f"--upstream {spec}: not the top level of its repository "
                        f"({repo.working_tree_dir})")
    head = head_commit(path, spec)
    check_clean(path, spec)
    project = detect_project(repo, head, spec)
    where = "detached HEAD" if repo.head.is_detached else repo.active_branch.name
    return Upstream(spec, path.resolve(), repo, head, project, f"{spec} @ {head[:12]} ({where})")


def head_commit(path: Path, spec: str) -> str:
    """HEAD's full sha. An unborn branch (no commits yet) is told apart from
    git refusing the repository (dubious ownership, corruption)."""
    proc = run_git(path, "rev-list", "--max-count=1", "HEAD", "--")  # errors say why ("bad object")
    if proc.returncode == 0:
        return proc.stdout.strip()
    branch = run_git(path, "symbolic-ref", "-q", "HEAD").stdout.strip()
    if branch and run_git(path, "show-ref", "--verify", "-q", branch).returncode == 1:
        raise UserError(f"--upstream {spec}: the repository has no commits "
                        f"(branch {branch.removeprefix('refs/heads/')} is unborn)")
    raise UserError(f"--upstream {spec}: git cannot read HEAD: {one_line(proc.stderr)}")


def check_clean(path: Path, spec: str) -> None:
    """Refuse uncommitted changes to tracked files. --no-optional-locks: git
    must not refresh (rewrite) the user's index while looking."""
    proc = run_git(path, "--no-optional-locks", "status", "--porcelain", "--untracked-files=no",
                   "--ignore-submodules=all")
    if proc.returncode:
        raise UserError(f"--upstream {spec}: git status failed: {one_line(proc.stderr)}")
    if proc.stdout.strip():
        raise UserError(f"--upstream {spec}: has uncommitted changes to tracked files; "
                        "commit or stash them (make_patch works from HEAD)")


def detect_project(repo: git.Repo, head: str, spec: str) -> Project:
    tree = repo.commit(head).tree
    for project in PROJECTS.values():
        for marker in project.markers:
            try:
                tree[marker]
                return project
            except KeyError:
                continue
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
    repo = git.Repo(path)
    return Upstream(spec, path, repo, repo.head.commit.hexsha, project, spec)


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
    error = ""
    for extra in (small, []):
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
