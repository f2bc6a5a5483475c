"""An upstream: a git repository read at one commit (a checkout, a wheel
materialised into a scratch repository by wheel.py, a remote's cache
repository by remote.py), and the checkout form of `--upstream`.

Checkouts are only read (through git objects, never the working tree);
nothing here writes into them.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from fixmono.model.errors import UserError, Unreadable, one_line
from fixmono.model.projects import PROJECTS, Project, any_project
from fixmono.sources.git import Checkout
from fixmono.sources.scratch import ScratchRepo

SYMLINK_MODE = 0o120000


DEFAULT_MAX_TARGET_MIB = 4  # ten times the largest target in the catalogue (~400 KB)


class Source:
    """What apply.run reads a fix's target files from."""

    label = ""
    history = False  # git history is there (apply/revert.py reverts through it)
    whole_tree = False  # every file of the tree can be read: one read as None is not there

    def read(self, path: str) -> bytes | None:
        """The file's bytes, or None when the source has no such file."""
        raise NotImplementedError

    def missing_file_hint(self, path: str) -> str:
        """What to say about a target file this source does not have."""
        return "not in this source"

    def blob(self, object_id: str) -> bytes | None:
        """The blob of that (abbreviated) id among the source's objects, or None."""
        return None


@dataclass
class Upstream(Source):
    """A git repository read at `head`."""

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
    history = True

    def missing_file_hint(self, path: str) -> str:
        """What to say about a target file this upstream does not have: where
        it looked, and a checkout only where a wheel cannot carry the file."""
        if not self.spec.startswith("pip:"):
            return f"not at HEAD {self.head[:12]}"
        release = self.spec[4:]
        if not self.project.markers:  # a project of no fix: nothing known of what its wheel carries
            return f"not in {release} (its wheel has no such file)"
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

    def files(self, paths) -> set[str]:
        """Those of `paths` that are files at HEAD (a --diff's strip level is decided by them)."""
        return {path for path, (_, kind, _, _) in self.entries(*sorted(paths)).items() if kind == "blob"} \
            if paths else set()

    def blob(self, object_id: str) -> bytes | None:
        """A diff's pre-image, by the id its `index` line gives, where the repository has that blob
        (a fix made on another branch of the same upstream); None where it has not, or the id is ambiguous."""
        return blob_among(self.scratch, object_id, self.max_target_bytes)

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


def blob_among(scratch: ScratchRepo, object_id: str, max_bytes: int) -> bytes | None:
    """The blob of that (abbreviated) id among `scratch`'s objects; None where there is none, it is
    ambiguous or over `max_bytes`."""
    if not re.fullmatch(r"[0-9a-f]{7,64}", object_id):
        return None
    fields = scratch.git("cat-file", "--batch-check", input=f"{object_id}\n").split()
    if len(fields) != 3 or fields[1] != "blob" or int(fields[2]) > max_bytes:
        return None
    return scratch.git("cat-file", "blob", fields[0], binary=True)


class ObjectStore(Source):
    """--history: a repository (a clone with history, a bare mirror of upstream) only its objects are read
    from, for a diff's pre-image by the blob id its `index` line names."""

    def __init__(self, spec: str, max_target_bytes: int = DEFAULT_MAX_TARGET_MIB << 20):
        try:
            path = Path(spec).expanduser()
        except RuntimeError:
            raise UserError(f"--history {spec}: cannot expand '~': no such user") from None
        if not path.is_dir():
            raise UserError(f"--history {spec}: no such directory")
        proc = Checkout(path).git("rev-parse", "--path-format=absolute", "--git-common-dir", "--show-object-format")
        if proc.returncode:
            raise UserError(f"--history {spec}: not a git repository ({one_line(proc.stderr)})")
        common_dir, object_format = proc.stdout.split("\n")[:2]
        self.spec, self.label, self.max_target_bytes = spec, f"--history {spec}", max_target_bytes
        self.scratch = ScratchRepo(Path(common_dir) / "objects", object_format)

    def read(self, path: str) -> bytes | None:
        return None  # no tree is read from it: only blobs by id

    def blob(self, object_id: str) -> bytes | None:
        return blob_among(self.scratch, object_id, self.max_target_bytes)


def cache_dir() -> Path:
    return Path(os.environ.get("FIXMONO_CACHE") or Path.home() / ".cache" / "fixmono")


def open_checkout(spec: str, any_project: bool = False) -> Upstream:
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
    upstream.project = detect_project(upstream, spec, path.resolve().name if any_project else None)
    branch = upstream.checkout.git("symbolic-ref", "-q", "--short", "HEAD").stdout.strip()
    upstream.label = f"{spec} @ {upstream.head[:12]} ({branch or 'detached HEAD'})"
    upstream.whole_tree = True  # a checkout, unlike a wheel's or a remote's targets alone
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


def detect_project(upstream: Upstream, spec: str, any_name: str | None = None) -> Project:
    """The catalogue project whose marker files are at HEAD; else, where
    `any_name` is given (a --diff needs no catalogue), a project of that name."""
    markers = [m for p in PROJECTS.values() for m in p.markers]
    present = upstream.entries(*markers)
    for project in PROJECTS.values():
        if any(m in present for m in project.markers):
            return project
    if any_name:
        return any_project(any_name)
    known = ", ".join(PROJECTS)
    raise UserError(f"--upstream {spec}: not a known upstream ({known}); "
                    "none of their marker files is at HEAD")
