"""Per-version environments for the behavioural matrix (drift --run): one
published release of a project, installed beside a base interpreter's own
packages, so that a fix's reproducer can run against exactly that release.

An environment is a `pip install --target` folder put first on the
reproducer's PYTHONPATH. It holds the release (no dependencies) and only
those of its requirements the base interpreter does not satisfy, found by
reading the installed METADATA round by round (e.g. jax 0.6.0 brings the
jaxlib it needs; a transformers release whose requirements the base
satisfies brings nothing else, and shares the base's torch). What the base
has is asked of it by a probe of the standard library alone (-I), and the
environment is cached under a key of that interpreter and everything it
has installed: a different or upgraded base gets other environments.

Built in a `.building-*` folder and renamed into place with its record
(env.json) last, under a per-environment flock: a build killed at any
point, even by SIGKILL, leaves no folder that looks built, and the next
build of that environment removes what it left. pip runs through
processes.bounded, so Ctrl-C or a timeout stops it with all its children.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from fixmono.sources.processes import bounded
from fixmono.model.errors import UserError, one_line
from fixmono.model.shapes import parsed
from fixmono.sources.installed import probe_timeout
from fixmono.sources.upstream import cache_dir

FORMAT = 1
# what a reproducer imports of fixmono's own dependencies (the Python engine:
# fixes apply their transformation to the installed file); pyproject.toml's
RUNNER = ("libcst>=1.1", "packaging>=23")
MAX_ROUNDS = 8  # requirement rounds: real trees settle in two or three
PIP_TIMEOUT = 900.0

BASE_PROBE = r'''
import json, platform, sys
from importlib import metadata
names = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name and name.lower() not in names:
        names[name.lower()] = dist.version
env = {"implementation_name": sys.implementation.name, "implementation_version": platform.python_version(),
       "os_name": __import__("os").name, "platform_machine": platform.machine(),
       "platform_python_implementation": platform.python_implementation(), "platform_release": platform.release(),
       "platform_system": platform.system(), "platform_version": platform.version(),
       "python_full_version": platform.python_version(), "python_version": "%d.%d" % sys.version_info[:2],
       "sys_platform": sys.platform}
print(json.dumps({"python": sys.executable, "version": platform.python_version(), "markers": env,
                  "installed": names}))
'''

BASE_ANSWER = {"python": str, "version": str, "markers": {str: str}, "installed": {str: str}}


class EnvironmentFailed(Exception):
    """The release cannot be installed beside this base (pip's reason);
    `wrong_python` when its reason is the base's Python version."""

    def __init__(self, message: str, wrong_python: bool = False):
        super().__init__(message)
        self.wrong_python = wrong_python


@dataclass(frozen=True)
class Base:
    """The interpreter the reproducers run under, and what it has installed."""

    python: str
    version: str
    markers: dict
    installed: dict  # canonical name -> version

    @classmethod
    def of(cls, python: str) -> "Base":
        timeout = probe_timeout()
        try:  # in a group of its own: whatever it starts is killed with it
            proc = bounded([python, "-I", "-c", BASE_PROBE], timeout=timeout)
        except subprocess.TimeoutExpired:
            raise UserError(f"{python}: did not answer within {timeout:g} s") from None
        except OSError as err:
            raise UserError(f"{python}: cannot run it: {one_line(err)}") from None
        if proc.returncode != 0:
            raise UserError(f"{python}: not a Python 3.8+ it can read: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        data = parsed(proc.stdout, BASE_ANSWER, f"{python}: its answer to fixmono's probe")
        installed = {canonicalize_name(k): v for k, v in data["installed"].items()}
        return cls(data["python"], data["version"], data["markers"], installed)

    @property
    def key(self) -> str:
        """Changes with the interpreter and with anything installed in it."""
        text = json.dumps([FORMAT, self.python, self.version, sorted(self.installed.items())])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def folder_versions(folder: Path) -> dict[str, str]:
    """canonical name -> version of the distributions installed in `folder`."""
    found = {}
    for info in folder.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        found[canonicalize_name(name)] = version
    return found


def requirements_of(folder: Path, name: str) -> list[Requirement]:
    """Requires-Dist of `name` installed in `folder` (extras not asked for are dropped by the caller's markers)."""
    for info in folder.glob("*.dist-info"):
        if canonicalize_name(info.name.partition("-")[0]) == canonicalize_name(name):
            lines = (info / "METADATA").read_text(encoding="utf-8", errors="replace").splitlines()
            out = []
            for line in lines:
                if not line.strip():
                    break  # the headers end at the first empty line
                if line.startswith("Requires-Dist:"):
                    try:
                        out.append(Requirement(line.partition(":")[2].strip()))
                    except InvalidRequirement:
                        continue
            return out
    return []


def satisfied(req: Requirement, versions: dict[str, str]) -> bool:
    have = versions.get(canonicalize_name(req.name))
    if have is None:
        return False
    try:
        return req.specifier.contains(Version(have), prereleases=True)
    except InvalidVersion:
        return False


def wanted(req: Requirement, markers: dict, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**markers, "extra": extra}) for extra in extras | {""})


def merge(source: Path, target: Path) -> None:
    """Move `source`'s tree into `target`; folders both have are merged (a
    namespace package), a file `target` has already is kept."""
    for entry in source.iterdir():
        there = target / entry.name
        if not there.exists():
            entry.rename(there)
        elif entry.is_dir() and not entry.is_symlink() and there.is_dir():
            merge(entry, there)


def pip_install(base: Base, target: Path, specs: list[str], pip_args: list[str]) -> None:
    """`pip install --target` of exactly `specs` (no dependencies), wheels only,
    for the base's Python (its own pip; else this interpreter's, told the
    base's version: pip 23 then checks Requires-Python against the wrong
    one), into a round folder merged into `target` (pip --target would skip
    a folder that exists, e.g. a namespace package's)."""
    staging = target / f".round-{len(list(target.glob('.round-*')))}"
    other = base.version.rsplit(".", 1)[0] != "%d.%d" % sys.version_info[:2]
    pip = base.python if other and "pip" in base.installed else sys.executable
    command = [pip, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps",  # not --quiet: it hides
                                                                                       # what blocked a release
               "--only-binary", ":all:", "--no-compile", "--target", str(staging), *pip_args]
    if other and pip == sys.executable:
        command += ["--python-version", base.version.rsplit(".", 1)[0], "--ignore-requires-python"]
    proc = bounded(command + specs, timeout=PIP_TIMEOUT)
    if proc.returncode != 0:
        errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
        reason = errors[0] if errors else (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        blocked = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if "(constraint)" in line]
        wrong_python = any(words in proc.stderr.lower() for words in ("requires a different python",
                                                                       "require a different python"))
        raise EnvironmentFailed(f"pip install {' '.join(specs)}: {reason.removeprefix('ERROR: ')}"
                                + (f" [blocked by pip's configured constraints: {blocked[0]}]" if blocked else ""),
                                wrong_python)
    merge(staging, target)
    shutil.rmtree(staging)


def build(base: Base, dist: str, version: str, target: Path, pip_args: list[str]) -> dict[str, str]:
    """Install dist==version (and fixmono's RUNNER requirements where the base
    lacks them) and, round by round, what the base lacks of their requirements."""
    runner = [r for r in map(Requirement, RUNNER) if not satisfied(r, base.installed)]  # a bare foreign Python
    pip_install(base, target, [f"{dist}=={version}", *(str(r) for r in runner)], pip_args)
    added = {canonicalize_name(name): [""] for name in [dist, *(r.name for r in runner)]}  # name -> extras asked for
    for _ in range(MAX_ROUNDS):
        here = folder_versions(target)
        missing: dict[str, Requirement] = {}
        for name, extras in added.items():
            for req in requirements_of(target, name):
                if not wanted(req, base.markers, set(extras)):
                    continue
                # what the folder has shadows the base's; else the base's must do
                if satisfied(req, here) or (canonicalize_name(req.name) not in here and satisfied(req, base.installed)):
                    continue
                key = canonicalize_name(req.name)
                if key in here:
                    raise EnvironmentFailed(f"{dist}=={version}: {req} conflicts with {key} {here[key]} it needs too")
                missing[key] = req
        if not missing:
            return here
        specs = [f"{r.name}{r.specifier}" for r in missing.values()]
        pip_install(base, target, specs, pip_args)
        added = {name: sorted(req.extras) or [""] for name, req in missing.items()}
    raise EnvironmentFailed(f"{dist}=={version}: requirements did not settle in {MAX_ROUNDS} rounds")


def environment(base: Base, dist: str, version: str, pip_args: list[str] = (), progress=lambda m: None) -> Path:
    """The cached environment of dist==version beside `base`, built on first use.
    Raises EnvironmentFailed (not cached: pip's reason may be the network's)."""
    root = cache_dir() / "envs" / base.key
    root.mkdir(parents=True, exist_ok=True)
    name = f"{canonicalize_name(dist)}-{version}"
    final = root / name
    record = final / "env.json"
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per environment; the others wait and reuse it
        if record.is_file():
            return final
        for stale in root.glob(f".building-{name}-*"):  # a build that was killed: we hold its lock
            shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)  # a folder without its record is not an environment
        building = root / f".building-{name}-{os.getpid()}"
        progress(f"building the environment of {dist}=={version}")
        try:
            building.mkdir()
            installed = build(base, dist, version, building, list(pip_args))
            (building / "env.json").write_text(json.dumps(
                {"format": FORMAT, "dist": dist, "version": version, "base": base.python,
                 "installed": installed}, indent=1, sort_keys=True) + "\n")
            building.rename(final)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return final


def discard(base: Base, dist: str, version: str) -> None:
    """Remove the environment of dist==version (drift --run --discard-envs: a
    CUDA torch release is ~5 GB installed). Its record goes first, so a run
    killed mid-way leaves a folder the next build replaces."""
    root = cache_dir() / "envs" / base.key
    name = f"{canonicalize_name(dist)}-{version}"
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (root / name / "env.json").unlink(missing_ok=True)
        shutil.rmtree(root / name, ignore_errors=True)
