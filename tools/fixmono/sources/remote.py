"""`--upstream URL@REF` / `github:OWNER/REPO@REF`: an upstream with no checkout.

REF is fetched into a cache repository owned by make_patch (never the
user's), shallow and treeless (`--depth=1 --filter=tree:0`): the commit
alone. Then the trees along the paths make_patch reads (every project's
marker files, every fix's targets) are fetched one directory level per request,
and the files at their ends in one more; the repository is then read like a
checkout at REF. A repository of any size costs a handful of small requests. Transport is allowed for these two
fetches only, in that repository only; nothing is checked out, so no hook,
filter or attribute of the remote's content ever runs.

The cache (FIXMONO_CACHE/remotes/<hash of URL>.git) is reused; runs on one URL
take turns (a flock), and a run killed mid-fetch leaves at most stale lock
files, which the next run (holding the flock) removes.
"""
from __future__ import annotations

import fcntl
import hashlib
import re
import sys
import tempfile
from pathlib import Path

from fixmono.model.errors import UserError, one_line
from fixmono.model.projects import PROJECTS
from fixmono.model.registry import discover
from fixmono.sources.git import Checkout, clean_env, run_git
from fixmono.sources.scratch import pause_point
from fixmono.sources.upstream import Upstream, cache_dir, detect_project

GITHUB = re.compile(r"^github:(?P<owner>[A-Za-z0-9][A-Za-z0-9-]*)/(?P<repo>[A-Za-z0-9._-]+)@(?P<ref>.+)$")
URL = re.compile(r"^(?P<url>(?:https?|ssh|git|file)://.+|[\w.-]+@[\w.-]+:.+)@(?P<ref>[^@:]+)$")
PROTOCOLS = "file:git:http:https:ssh"


def is_remote(spec: str) -> bool:
    return spec.startswith("github:") or bool(re.match(r"^(?:https?|ssh|git|file)://", spec)) or \
        bool(re.match(r"^[\w.-]+@[\w.-]+:", spec))


def parse(spec: str) -> tuple[str, str]:
    """(url, ref) of a remote spec, or one clear line."""
    if m := GITHUB.match(spec):
        return f"https://github.com/{m['owner']}/{m['repo']}.git", m["ref"]
    if m := URL.match(spec):
        ref = m["ref"]
        if ref.startswith("-") or ".." in ref or not ref.strip():
            raise UserError(f"--upstream {spec}: {ref!r} is not a ref")
        return m["url"], ref
    raise UserError(f"--upstream {spec}: expected URL@REF (https, ssh, git, file URL) or github:OWNER/REPO@REF")


def remote_env() -> dict[str, str]:
    """clean_env with the transports a fetch needs (and ssh as itself)."""
    return clean_env({"core.sshCommand": "ssh"}, GIT_ALLOW_PROTOCOL=PROTOCOLS)


def cache_repository(url: str) -> Path:
    root = cache_dir() / "remotes"
    root.mkdir(parents=True, exist_ok=True)
    path = root / (hashlib.sha256(url.encode()).hexdigest()[:24] + ".git")
    if not (path / "objects").is_dir():
        with tempfile.TemporaryDirectory(dir=root, prefix=".tmp-") as tmp:
            work = Path(tmp) / "repo.git"
            for args in (["init", "-q", "--bare", str(work)],
                         ["-C", str(work), "remote", "add", "origin", url],
                         ["-C", str(work), "config", "remote.origin.promisor", "true"],
                         ["-C", str(work), "config", "remote.origin.partialclonefilter", "tree:0"]):
                proc = run_git(None, *args, env=clean_env())
                if proc.returncode:
                    raise UserError(f"cannot make the cache repository: {one_line(proc.stderr)}")
            try:
                work.rename(path)
            except OSError:
                if not (path / "objects").is_dir():  # not a concurrent run that won
                    raise
    return path


def locked(path: Path):
    """An exclusive flock held while the returned file stays open."""
    handle = open(path.with_suffix(".lock-fixmono"), "a+")
    fcntl.flock(handle, fcntl.LOCK_EX)
    for stale in [*path.rglob("*.lock"), *path.glob("objects/pack/tmp_*")]:  # a git killed mid-fetch: we hold
        stale.unlink(missing_ok=True)                                          # the flock, nobody else is in there
    return handle


def pack_bytes(repo: Path) -> int:
    return sum(p.stat().st_size for p in (repo / "objects" / "pack").glob("*.pack"))


def fetch(repo: Path, spec: str, *args: str, stdin: str | None = None) -> None:
    proc = run_git(repo, "-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags",
                   "--no-write-fetch-head", "--recurse-submodules=no", "origin", *args, env=remote_env(), input=stdin)
    if proc.returncode:
        raise UserError(f"--upstream {spec}: fetch failed: {one_line(proc.stderr) or f'git exited {proc.returncode}'}")


def wanted_paths() -> list[str]:
    """What make_patch reads at REF: every project's markers, every fix's targets."""
    return sorted({m for p in PROJECTS.values() for m in p.markers} | {c.path for f in discover() for c in f.changes})


def missing(repo: Path, oids: set[str]) -> list[str]:
    """Those of `oids` the cache repository does not have (no lazy fetch)."""
    env = clean_env()  # GIT_NO_LAZY_FETCH: a missing object is reported, not fetched (--batch-check would die)
    return sorted(o for o in oids if run_git(repo, "cat-file", "-e", o, env=env).returncode)


def fetch_objects(repo: Path, spec: str, oids: set[str]) -> None:
    """One request for every missing object of `oids` (trees: without their subtrees)."""
    if wanted := missing(repo, oids):
        fetch(repo, spec, "--filter=tree:0", "--stdin", stdin="".join(f"{o}\n" for o in wanted))


def fetch_paths(repo: Path, spec: str, head: str, paths: list[str]) -> tuple[int, int]:
    """The trees along `paths` and the blobs at their ends, one request per
    directory level. Returns (files found, files fetched)."""
    tree = run_git(repo, "cat-file", "commit", head, env=clean_env()).stdout.split("\n", 1)[0].split()[1]
    walking = {path: (tree, path.split("/")) for path in paths}
    blobs: set[str] = set()
    while walking:
        fetch_objects(repo, spec, {t for t, _ in walking.values()})
        listings: dict[str, dict[str, tuple[str, str]]] = {}
        deeper = {}
        for path, (tree, parts) in walking.items():
            if tree not in listings:
                records = run_git(repo, "ls-tree", "-z", tree, env=clean_env()).stdout.split("\0")
                listings[tree] = {r.split("\t", 1)[1]: tuple(r.split("\t", 1)[0].split()[1:3]) for r in records if r}
            kind, oid = listings[tree].get(parts[0], (None, None))
            if len(parts) == 1 and kind == "blob":
                blobs.add(oid)
            elif len(parts) > 1 and kind == "tree":
                deeper[path] = (oid, parts[1:])
        walking = deeper
    absent = missing(repo, blobs)
    fetch_objects(repo, spec, blobs)
    return len(blobs), len(absent)


def open_remote(spec: str, extra: frozenset = frozenset(), any_project: bool = False) -> Upstream:
    """An Upstream reading REF of the remote, its markers and targets present
    (and the paths `extra`: a --diff's files; `any_project`: see open_upstream)."""
    url, ref = parse(spec)
    repo = cache_repository(url)
    with locked(repo):
        pause_point("remote-locked")
        before = pack_bytes(repo)
        print(f"make_patch: fetching {ref} from {url} (the commit only; then the trees and files it reads)",
              file=sys.stderr)
        local = f"refs/fixmono/{hashlib.sha256(ref.encode()).hexdigest()[:16]}"
        fetch(repo, spec, "--depth=1", "--filter=tree:0", f"+{ref}:{local}")
        head = run_git(repo, "rev-parse", "--verify", "-q", f"{local}^{{commit}}", env=clean_env()).stdout.strip()
        if not head:
            raise UserError(f"--upstream {spec}: {ref} is not a commit")
        found, fetched = fetch_paths(repo, spec, head, sorted(set(wanted_paths()) | set(extra)))
        received = pack_bytes(repo) - before
        print(f"make_patch: {ref} is {head[:12]}; received {received / 1024:.1f} KiB "
              f"({fetched} of the {found} file(s) read were not cached)", file=sys.stderr)
    upstream = Upstream(spec, repo, Checkout(repo), repo, head, "sha1", label=f"{url} @ {head[:12]} ({ref})")
    upstream.project = detect_project(upstream, spec, url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
                                      if any_project else None)
    return upstream
