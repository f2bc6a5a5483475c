"""`--upstream pip:NAME==VERSION`: the Python files of a published wheel,
materialised into a cached scratch git repository at the paths they have in
the upstream repository.

Which wheel is asked of the indexes pip is configured with (index.py: its
configuration and PIP_* variables, never a host written here), with the
sha256 the index publishes. From an HTTP(S) index only what the catalogue's fixes
target is read, by range requests (ranged.py: each member checked against the
zip's CRC-32 and size, "verified": "member-crc"); with --full-wheel, from a
local index, or from a server that does not honour Range, the wheel is
downloaded whole and checked (verify.py: its sha256 against the index's,
every member against RECORD: "verified": "sha256"). The cache entry keeps
each file's hash; a file read from it that does not match is a damaged or
tampered entry, which is built again, never trusted. Its record of how the
wheel was read is checked too (PROVENANCE_SHAPE, and "verified" must be what
that read can verify): a cache entry never reads as better verified than the
read that made it, and --full-wheel builds a range-read entry again. All of a
wheel's talk with the indexes is bounded by one deadline (index.Deadline).

A pinned release's files do not change once published: what the indexes
answered for it (resolved.py: the wheel's URL, its published sha256, the
central directory a range read was verified against) is kept, and an entry is
used when it was read from that answer, without asking the indexes again (a
warm call makes no request, and works offline). They are asked again with
--refresh (once a run for each release), where the pip sources differ from
those of the kept answer, or where none is kept or it is unreadable; an entry
not read from the answer they give is built again. So a range read is trusted
as far as the server that answered it until --refresh (or --full-wheel, which
checks the whole wheel's sha256)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from fixmono.model.errors import NoPythonFiles, UserError, one_line
from fixmono.model.projects import PROJECTS, Project, named, pip_project, runs_on
from fixmono.model.shapes import SHA256, Maybe, OneOf, parsed
from fixmono.sources import resolved
from fixmono.sources.git import clean_env, run_git
from fixmono.sources.index import (Deadline, Found, basic_auth, find_wheel, last_line, pip_stalled, pip_within,
                                   published_sha256, stalled, without_auth)
from fixmono.sources.ranged import RangedWheel, RangeNotHonoured
from fixmono.sources.catalogue import listed
from fixmono.sources.upstream import Upstream, cache_dir, open_repository
from fixmono.sources.verify import VerifiedWheel, record_hash, verify_wheel

PIP_SPEC = re.compile(r"^pip:([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
# Deterministic identity of the scratch commits, so patches against the same
# wheel are byte-identical on every machine.
SCRATCH_ENV = {
    "GIT_AUTHOR_NAME": "make_patch", "GIT_AUTHOR_EMAIL": "make_patch@localhost",
    "GIT_COMMITTER_NAME": "make_patch", "GIT_COMMITTER_EMAIL": "make_patch@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


PROVENANCE = "fixmono-wheel.json"  # in the cache entry's .git: the wheel it was built from, each file's hash


WHEEL_READ = {"name": str, "read": OneOf("range", "full", "local-file"),
              "verified": OneOf("member-crc", "sha256", "record"), "sha256": Maybe(SHA256),
              "published_sha256": Maybe(SHA256), "wheel_root": str}


def told_as_read(wheel: dict) -> bool:
    """What a read verifies: a range read each member's CRC-32 ("member-crc",
    no sha256 of the whole); a whole wheel its sha256 where the index
    publishes one ("sha256": the published one), else its RECORD ("record")."""
    if wheel["read"] == "range":
        return wheel["verified"] == "member-crc" and wheel["sha256"] is None
    if wheel["published_sha256"] is None:
        return wheel["verified"] == "record" and wheel["sha256"] is not None
    return wheel["verified"] == "sha256" and wheel["sha256"] == wheel["published_sha256"]


PROVENANCE_SHAPE = {"wheel": WHEEL_READ, "members": {str: str}, "names": Maybe([str])}


@dataclass
class WheelUpstream(Upstream):
    """A materialised wheel whose every file read is checked against the hash
    the wheel's RECORD gave it."""

    version: str = ""
    members: dict[str, str] = field(default_factory=dict, repr=False)  # repository path -> RECORD hash
    wheel: dict = field(default_factory=dict)  # name, sha256, published_sha256 of the wheel
    extra: frozenset = frozenset()  # repository paths read beside the catalogue's targets (a --diff's files)

    def read(self, path: str) -> bytes | None:
        data = super().read(path)
        if data is None or record_hash(data, self.members.get(path)) == self.members.get(path):
            return data
        # a damaged or tampered cache entry: never trusted; built again as it was read (whole or by ranges)
        fresh = open_wheel(self.spec, rebuild=True, full=self.wheel.get("read") != "range", extra=self.extra)
        for f in dataclasses.fields(self):
            if f.name != "max_target_bytes":  # the caller's limit stays
                setattr(self, f.name, getattr(fresh, f.name))
        data = super().read(path)
        if data is not None and record_hash(data, self.members.get(path)) != self.members.get(path):
            raise UserError(f"--upstream {self.spec}: {path} does not match the wheel's RECORD even after "
                            f"building the cache entry again ({self.path})")
        return data


def open_wheel(spec: str, rebuild: bool = False, full: bool = False, extra: frozenset = frozenset(),
               any_project: bool = False, refresh: bool = False) -> WheelUpstream:
    """The wheel of `spec` as a scratch repository of the catalogue's targets
    (and the repository paths `extra`: a --diff's files, kept in a cache entry
    of their own so the catalogue's tree and BASE stay the same). With
    `any_project`, a distribution no fix targets is a project of its own (its
    files under src/ in the repository where the paths `extra` are).
    `refresh`: the indexes asked again (once a run for each release), not the
    answer an earlier run kept."""
    match = PIP_SPEC.match(spec)
    if not match:
        raise UserError(f"--upstream {spec}: expected pip:NAME==VERSION")
    dist, version = match.groups()
    project = pip_project(dist, extra) if any_project else named(dist)
    if project is None or not project.dist:
        known = ", ".join(p.dist for p in PROJECTS.values() if p.dist)
        raise UserError(f"--upstream {spec}: {dist} is not an upstream of any fix ({known})")
    extra = frozenset(extra) - catalogue_paths(project)  # the catalogue's own targets: its entry as it is
    path = scratch_path(project, version, extra)
    upstream = None if rebuild else cached_wheel_repository(path, spec, wanted_members(project, extra))
    if upstream is not None and full and upstream.wheel["read"] == "range":
        upstream = None  # --full-wheel: a partial read does not do
    if upstream is not None and not read_from_answer(project, version, upstream, refresh):
        upstream = None  # the indexes' wheel is not the one this entry was read from (or cannot be asked): read again
    if upstream is None:  # missing, damaged, tampered, short of a target, or not read whole: built again
        path = materialise_wheel(project, version, full=full, rebuild=True, extra=extra)
        upstream = cached_wheel_repository(path, spec)
        if upstream is None:
            raise UserError(f"--upstream {spec}: the scratch repository built from the wheel is unreadable")
    else:
        upstream.wheel["cached"] = True  # read by an earlier run: verified as that read was
    upstream.project, upstream.label, upstream.version, upstream.extra = project, spec, version, extra
    return upstream


_refreshed: set[tuple[str, str]] = set()  # the releases whose indexes this run asked again (--refresh)


def read_from_answer(project: Project, version: str, upstream: WheelUpstream, refresh: bool = False) -> bool:
    """Whether the entry was read from the wheel the indexes answer for this
    release: the answer kept by an earlier run from the same pip sources, or
    theirs now (`refresh`, or none kept: a range read's central directory,
    one or two range requests)."""
    key = (project.dist, version)
    refresh = refresh and key not in _refreshed
    sources_id = resolved.identity(refresh)
    record = None if refresh else resolved.recorded(project.dist, version, sources_id)
    if record is not None and made_from(record, upstream.wheel):
        return True
    # none kept, --refresh, or a kept answer this entry was not read from: the indexes asked
    _refreshed.add(key)
    record = resolve(project, version, sources_id)
    return record is not None and made_from(record, upstream.wheel)


def made_from(record: dict, wheel: dict) -> bool:
    """Whether an entry's read (`wheel`, its provenance) is of the wheel `record` names."""
    if wheel["read"] == "range":  # verified only as far as that central directory: the same one
        return record["directory"] is not None and record["directory"] == wheel.get("directory")
    if wheel["read"] == "local-file":  # a folder's file may be replaced under the same name: its sha256
        return record["file_sha256"] is not None and record["file_sha256"] == wheel["sha256"]
    return record["filename"] == wheel["name"] and record["sha256"] == wheel["published_sha256"]


def resolve(project: Project, version: str, sources_id: str) -> dict | None:
    """The indexes' answer for the release now, kept for later runs (None: none
    lists it, or none could be asked): its wheel, the sha256 they publish, and
    for an HTTP(S) wheel the central directory it serves (RangedWheel.key)."""
    found, _ = find_wheel(project.dist, version)
    if found is None:
        return None
    directory = file_sha256 = None
    if found.url.startswith(("http://", "https://")):
        reader = RangedWheel(without_auth(found.url), found.sha256, None, basic_auth(found.url))
        try:
            reader.entries()
            directory = reader.key
        except RangeNotHonoured:
            pass
    elif found.url.startswith("file:"):
        file_sha256 = file_digest(Path(urllib.request.url2pathname(urlparse(found.url).path)))
    return resolved.keep(project.dist, version, sources_id, found.filename, without_auth(found.url), found.sha256,
                         directory, file_sha256)


def file_digest(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def scratch_path(project: Project, version: str, extra: frozenset = frozenset()) -> Path:
    name = f"{project.dist}-{version}"
    if extra:
        name += "+" + hashlib.sha256("\n".join(sorted(extra)).encode()).hexdigest()[:12]
    return cache_dir() / "upstreams" / name


def catalogue_paths(project: Project) -> set[str]:
    """The repository paths the catalogue's fixes for `project` target, and its markers."""
    return {c.path for f in listed() if runs_on(f.upstream, project) for c in f.changes} | set(project.markers)


def wanted_members(project: Project, extra: frozenset = frozenset()) -> set[str]:
    """The wheel members a partial read takes: every file the catalogue's fixes
    for `project` target, the project's markers, and the paths `extra`."""
    paths = catalogue_paths(project) | set(extra)
    return {p.removeprefix(project.wheel_root) for p in paths if p.startswith(project.wheel_root)}


def cached_wheel_repository(path: Path, spec: str, wanted: set[str] = frozenset()) -> WheelUpstream | None:
    """The materialised wheel at `path`, or None when the cache entry is damaged
    (git cannot open it, any of its objects is missing or unreadable, or it
    has no record of the verified wheel) or is a partial read that lacks a
    member in `wanted` the wheel has."""
    try:
        upstream = open_repository(path, spec)
        record = path / ".git" / PROVENANCE
        provenance = parsed(record.read_bytes(), PROVENANCE_SHAPE, str(record))
    except (UserError, OSError):
        return None
    members, wheel, names = provenance["members"], provenance["wheel"], set(provenance["names"] or ())
    if not told_as_read(wheel):  # an entry never reads as better verified than the read that made it
        return None
    if names and (wanted & names) - {m.removeprefix(upstream_root(wheel)) for m in members}:
        return None
    listing = upstream.scratch.run("ls-tree", "-r", "-l", "-z", upstream.head)
    records = [r.split("\t", 1)[0].split() for r in listing.stdout.split("\0") if r]
    if listing.returncode or (members and not records) or any(not size.isdigit() for *_, size in records):
        return None
    base = {f.name: getattr(upstream, f.name) for f in dataclasses.fields(Upstream)}
    return WheelUpstream(**base, members=members, wheel=wheel)


def upstream_root(wheel: dict) -> str:
    return wheel.get("wheel_root", "")


def materialise_wheel(project: Project, version: str, full: bool = True, rebuild: bool = False,
                      extra: frozenset = frozenset()) -> Path:
    """A scratch git repository holding the Python files of the published wheel
    that the catalogue's fixes target (`full`: from the whole wheel, its
    sha256 checked; else read by ranges where the index serves them), at the
    paths they have in the upstream repository. Cached; built in a temporary directory
    and renamed into place, so an interrupted run leaves nothing half-made."""
    final = scratch_path(project, version, extra)
    if (final / ".git").is_dir() and not rebuild:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    deadline = Deadline()  # for all of this wheel's talk with the indexes
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=".tmp-") as tmp:
        work = Path(tmp) / "repo"
        found, problems = (None, []) if full else find_wheel(project.dist, version, deadline)
        partial = None if found is None else read_members(project, found, work, deadline, extra)
        if partial is None:
            note = "--full-wheel" if full else found.note if found else "no index pip is configured with lists it: " \
                "downloaded through pip" + (f" ({'; '.join(problems)})" if problems else "")
            members, wheel = whole_wheel(project, version, work, found, note, deadline, extra)
        else:
            members, wheel = partial
        if not any(name.endswith((".py", ".pyi")) for name in wheel.get("names") or members):
            raise NoPythonFiles(f"pip:{project.dist}=={version}: the wheel {wheel['name']} has no Python files")
        # a release whose wheel lacks every target (a meta-package, a module not there yet) is an empty
        # tree: each fix then says which file this release does not have
        commit_tree(work, f"{project.dist} {version}\n\n"
                          "Python files of the published wheel, materialised by make_patch.")
        provenance = {"wheel": wheel, "members": members, "names": wheel.pop("names", None)}
        # what the indexes answered, kept: later runs use this entry without asking them (read_from_answer)
        resolved.keep(project.dist, version, resolved.identity(), wheel["name"],
                      without_auth(found.url) if found else None, wheel["published_sha256"], wheel.get("directory"),
                      wheel["sha256"] if wheel["read"] == "local-file" else None)
        (work / ".git" / PROVENANCE).write_text(json.dumps(provenance, indent=1, sort_keys=True), encoding="utf-8")
        if rebuild:
            shutil.rmtree(final, ignore_errors=True)
        try:
            work.rename(final)
        except OSError:
            if not (final / ".git").is_dir():  # not just a concurrent run that won
                raise
    return final


def whole_wheel(project: Project, version: str, work: Path, found: Found | None, note: str,
                deadline: Deadline, extra: frozenset = frozenset()) -> tuple[dict, dict]:
    """The whole wheel (a local index's file as it is, else downloaded by pip),
    verified (sha256, RECORD), and the wanted Python files written under `work`."""
    with tempfile.TemporaryDirectory(prefix="fixmono-wheel-") as tmp:
        if found is not None and found.url.startswith("file:"):
            wheel, published, how = Path(urllib.request.url2pathname(urlparse(found.url).path)), found.sha256, "local-file"
        else:
            (wheel, published), how = download_wheel(project.dist, version, Path(tmp) / "dl", deadline), "full"
        verified = verify_wheel(wheel, published)
        # the members a partial read takes: the same tree, the same BASE commit, however the wheel was read
        members = extract_python_files(verified, work, project.wheel_root, wanted_members(project, extra))
        return members, {"name": wheel.name, "sha256": verified.sha256, "published_sha256": published,
                         "read": how, "verified": "sha256" if published else "record", "bytes": wheel.stat().st_size,
                         "size": wheel.stat().st_size, "note": note, "wheel_root": project.wheel_root,
                         "names": sorted(verified.members)}


def read_members(project: Project, found: Found, work: Path, deadline: Deadline,
                 extra: frozenset = frozenset()) -> tuple[dict, dict] | None:
    """The wanted members by HTTP range requests, written under `work`; None
    where the wheel must be read whole (a local index, a server that does not
    honour Range: `found.note` says which)."""
    if not found.url.startswith(("http://", "https://")):
        found.note = "a local index: read whole"
        return None
    reader = RangedWheel(without_auth(found.url), found.sha256, cache_dir() / "wheel-members", basic_auth(found.url),
                         deadline)
    try:
        names = reader.entries()
        members = {}
        for name in sorted(wanted_members(project, extra) & set(names)):
            if not name.endswith((".py", ".pyi")):
                continue
            data = reader.read(name)
            target = work / project.wheel_root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            members[project.wheel_root + name] = record_hash(data)  # of the CRC-checked bytes: the cache's check
    except RangeNotHonoured as why:
        found.note = f"the server does not honour Range ({why}): downloaded whole"
        return None
    return members, {"name": reader.name, "sha256": None, "published_sha256": found.sha256, "read": "range",
                     "directory": reader.key,
                     "verified": "member-crc", "bytes": reader.bytes_read, "size": reader.length,
                     "requests": reader.requests, "cached_members": reader.from_cache,
                     "note": "the whole wheel's sha256 cannot be checked from a partial read; --full-wheel checks it"
                             + (f"; skipped: {found.note}" if found.note else ""),
                     "wheel_root": project.wheel_root, "names": sorted(names)}


def commit_tree(work: Path, message: str) -> None:
    """`work` as a one-commit repository. No user or system config, hooks,
    ignore rules or GIT_* variables: the same wheel gives the same commit."""
    env = clean_env(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, **SCRATCH_ENV)
    for args in (["init", "-q", "-b", "main"], ["add", "-A", "-f"],
                 ["commit", "-q", "--allow-empty", "--no-gpg-sign", "--no-verify", "-m", message]):
        proc = run_git(work, *args, env=env)
        if proc.returncode:
            raise UserError(f"cannot build the scratch repository: git {args[0]}: {one_line(proc.stderr)}")


NEWER_PYTHONS = ("3.12", "3.13")  # wheels of releases that dropped this interpreter


def pip_tries() -> list[list[str]]:
    """pip options to find a wheel with, in order: a macOS arm64 wheel first
    (for packages with native code, the smallest that carries the same Python
    files), then this platform, then releases for a newer Python only (jaxlib
    0.11+ wants 3.12: we read their files, never import them)."""
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    small = ["--platform", "macosx_14_0_arm64", "--platform", "macosx_11_0_arm64", "--python-version", pyver]
    return [small, [], *(small[:4] + ["--python-version", v, "--ignore-requires-python"] for v in NEWER_PYTHONS)]


def download_wheel(dist: str, version: str, dest: Path, deadline: Deadline | None = None) -> tuple[Path, str | None]:
    """`pip download --no-deps` of one wheel, honouring the user's pip config
    (index mirrors), and the sha256 the index publishes for it (None when it
    publishes none). A macOS arm64 wheel is tried first: for packages with
    native code it is the smallest that carries the same Python files. All
    tries together within `deadline` (index.pip_within)."""
    deadline = deadline or Deadline()
    dest.mkdir(parents=True)
    args = ["download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--dest", str(dest),
            f"{dist}=={version}"]
    env = {**os.environ, "PIP_CONSTRAINT": ""}  # a site cap must not hide old versions
    error = ""
    for extra in pip_tries():
        try:
            proc = pip_within(args + extra, deadline, env)
        except (subprocess.TimeoutExpired, TimeoutError) as err:
            said = getattr(err, "stderr", "")
            raise stalled(f"pip:{dist}=={version}", deadline, pip_stalled(said) or last_line(said)) from None
        wheels = sorted(dest.glob("*.whl"))
        if proc.returncode == 0 and wheels:  # pip checked it against the index's hash where one is published
            # the pages again (read already unless --full-wheel), in a time of their own: a slow download
            # must not leave the hash unread
            return wheels[0], published_sha256(dist, version, wheels[0].name)
        expected, got = (re.search(rf"{word}\s+(?:sha256\s+)?({form})", proc.stderr)
                         for word, form in (("Expected", r"\S+"), ("Got", "[0-9a-f]{64}")))
        if expected and got:  # pip checked the hash the index publishes: a tampered or damaged download
            raise UserError(f"pip:{dist}=={version}: the wheel's sha256 is {got[1]}, not the {expected[1]} the index "
                            "publishes (refused by pip)")
        if pip_stalled(proc.stderr):  # not "no such wheel": the index did not answer
            raise stalled(f"pip:{dist}=={version}", deadline, pip_stalled(proc.stderr))
        error = last_line(proc.stderr) or f"pip exited {proc.returncode}"
    raise UserError(f"pip:{dist}=={version}: could not download the wheel: {error}")


def extract_python_files(wheel: VerifiedWheel, work: Path, wheel_root: str,
                         only: set[str] | None = None) -> dict[str, str]:
    """Write the verified wheel's .py/.pyi files (`only` those members, when
    given) under `work` at their repository paths (`wheel_root` + name);
    returns repository path -> RECORD hash."""
    members = {}
    with zipfile.ZipFile(wheel.path) as zf:
        for name, digest in wheel.members.items():  # verified names: none leaves `work`
            if not name.endswith((".py", ".pyi")) or PurePosixPath(name).parts[0].endswith((".dist-info", ".data")):
                continue
            if only is not None and name not in only:
                continue
            target = work / wheel_root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
            members[wheel_root + name] = digest
    return members
