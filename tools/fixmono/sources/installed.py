"""The files a Python environment has installed, as a source: a fix's
repository paths mapped to the installed package's files, read as text
(nothing of the package is imported). The environment is this interpreter's
or any other's (`Environment.of(PATH)`): what it has installed is asked of
that interpreter by a probe of the standard library alone, run in isolated
mode (-I: its PYTHONPATH and user site are not read), which imports none of
its packages. The probe runs in a process group of its own, killed whole
after FIXMONO_PROBE_TIMEOUT seconds (default 60); its answer, and the
provenance patch_wheel left in a dist-info, are checked (model/shapes.py)
before use: a wrong shape is one line naming the field."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fixmono.model.errors import Unreadable, UserError, one_line
from fixmono.model.projects import PROJECTS, Project
from fixmono.model.shapes import SHA256, Maybe, parsed
from fixmono.sources.processes import bounded, env_seconds
from fixmono.sources.upstream import Source

PROBE = r'''
import json, sys
import importlib.util


def probe(pairs):
    try:
        from importlib import metadata
    except ImportError:  # before Python 3.8: versions cannot be read
        metadata = None
    dists = {}
    for dist, package in pairs:
        info = {"version": None, "package_dir": None, "provenance": None}
        found = None
        if metadata is not None:
            try:
                found = metadata.distribution(dist)
                info["version"] = found.version
                info["provenance"] = found.read_text("fixmono.json")
            except Exception:
                found = None
        try:  # find_spec of a top-level package does not run it
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.submodule_search_locations:
                info["package_dir"] = list(spec.submodule_search_locations)[0]
        except Exception:
            pass
        if info["package_dir"] is None and found is not None:
            info["package_dir"] = str(found.locate_file(package))
        dists[dist] = info
    import sysconfig
    paths = sysconfig.get_paths()
    return {"python": sys.executable, "prefix": sys.prefix, "sites": sorted({paths["purelib"], paths["platlib"]}),
            "version": "%d.%d.%d" % tuple(sys.version_info[:3]), "dists": dists}
'''
PROBE_TIMEOUT = 60.0  # default of FIXMONO_PROBE_TIMEOUT
DIST = {"version": Maybe(str), "package_dir": Maybe(str), "provenance": Maybe(str)}
ANSWER = {"python": str, "prefix": str, "sites": [str], "version": str, "dists": {str: DIST}}
# fixmono.json in a dist-info patch_wheel wrote (output/wheel.py provenance()): what status shows of it
WHEEL_PROVENANCE = {"input": {"wheel": str, "sha256": SHA256}, "fixes": [{"id": str}]}


def probe_timeout() -> float:
    return env_seconds("FIXMONO_PROBE_TIMEOUT", PROBE_TIMEOUT)


def dist_name(project: Project) -> str:
    return project.dist or "jaxlib"  # XLA ships inside jaxlib


def package_name(project: Project) -> str:
    return project.package or project.markers[0].removeprefix(project.wheel_root).split("/")[0]


def wanted() -> list[tuple[str, str]]:
    """(distribution, package) of every project an environment may hold (a checkout's project of no fix: none)."""
    return sorted({(dist_name(p), package_name(p)) for p in PROJECTS.values() if p.markers or p.package})


@dataclass(frozen=True)
class Environment:
    """What one interpreter has installed, for the upstream projects."""

    python: str  # its executable
    prefix: str  # its sys.prefix
    version: str  # its Python version
    dists: dict = field(default_factory=dict)  # dist -> {"version", "package_dir", "provenance"}
    here: bool = True  # the interpreter fixmono runs in
    sites: list = field(default_factory=list)  # its own site-packages (purelib, platlib)

    @classmethod
    def current(cls) -> "Environment":
        scope: dict = {}
        exec(compile(PROBE, "<fixmono probe>", "exec"), scope)  # noqa: S102 (our own code, the same as .of runs)
        return cls(**scope["probe"](wanted()), here=True)

    @classmethod
    def of(cls, python: str) -> "Environment":
        """The environment of the interpreter `python` (a path, or a name on PATH)."""
        where = f"--python {python}"
        found = python if os.sep in python else (shutil.which(python) or python)
        if not os.path.exists(found):
            raise UserError(f"{where}: no such file")
        if os.path.isdir(found) or not os.access(found, os.X_OK):
            raise UserError(f"{where}: not an executable")
        code = PROBE + "\nprint(json.dumps(probe(json.loads(sys.argv[1]))))\n"
        timeout = probe_timeout()
        try:  # in a group of its own: whatever it starts is killed with it
            proc = bounded([found, "-I", "-c", code, json.dumps(wanted())], timeout=timeout,
                           env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")})
        except subprocess.TimeoutExpired:
            raise UserError(f"{where}: did not answer within {timeout:g} s") from None
        except OSError as err:
            raise UserError(f"{where}: cannot run it: {one_line(err)}") from None
        lines = proc.stdout.strip().splitlines()
        if proc.returncode or not lines or not lines[-1].lstrip().startswith(("{", "[")):
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise UserError(f"{where}: not a Python 3 interpreter fixmono can read ({last})")
        answer = parsed(lines[-1], ANSWER, f"{where}: its answer to fixmono's probe")
        return cls(**{key: answer[key] for key in ANSWER}, here=False)

    def dist(self, dist: str) -> dict:
        return self.dists.get(dist) or {"version": None, "package_dir": None, "provenance": None}

    def owns(self, folder: Path) -> bool:
        """Whether `folder` is this environment's own site-packages (not a system
        site of a venv made with --system-site-packages, nor a folder a .pth adds)."""
        return any(os.path.realpath(folder) == os.path.realpath(own) for own in self.sites)

    def site(self, project: Project) -> Path:
        """The folder holding the project's package (site-packages, usually)."""
        where = self.dist(dist_name(project))["package_dir"]
        return Path(where).parent if where else Path(self.prefix, "(no installed package)")

    def provenance(self, dist: str) -> dict | None:
        """What patch_wheel recorded in the installed dist-info (fixmono.json),
        or None; one that is not what patch_wheel writes is a UserError."""
        text = self.dist(dist)["provenance"]
        if text is None:
            return None
        return parsed(text, WHEEL_PROVENANCE, f"{self.python}: the installed {dist}'s fixmono.json (patch_wheel's "
                                              "provenance)")

    def torch_build(self) -> dict:
        """The accelerator the installed torch is built for, read from its
        torch/version.py (nothing imported): rocm, cuda or cpu."""
        where = self.dist("torch")["package_dir"]
        version = self.dist("torch")["version"]
        if not where or version is None:
            return {"name": None, "devices": None, "detail": "torch not installed: backend unknown"}
        try:
            text = (Path(where) / "version.py").read_text(encoding="utf-8")
        except OSError as err:
            return {"name": None, "devices": None, "detail": f"torch {version}: cannot read version.py ({one_line(err)})"}
        built = {key: re.search(rf"^{key}\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M) for key in ("hip", "cuda")}
        name = "rocm" if built["hip"] else "cuda" if built["cuda"] else "cpu"
        return {"name": name, "devices": None,
                "detail": f"torch {version} built for {name} (read from torch/version.py; devices are counted "
                          "only in the interpreter fixmono runs in)"}


def installed_path(project: Project, repo_path: str, site: Path | None = None) -> Path | None:
    """The installed file for an upstream repository path (it may not exist)
    under `site` (the folder holding the packages; default: this
    interpreter's), or None when such a file is never installed (C++ sources, tests)."""
    package = package_name(project)
    if not repo_path.endswith(".py") or not repo_path.startswith(f"{project.wheel_root}{package}/"):
        return None
    return (site or Environment.current().site(project)) / repo_path.removeprefix(project.wheel_root)


class InstalledFiles(Source):
    """The installed files of `project` in `env` (default: this interpreter's),
    or under `site` when given (a patched copy), readable by their repository paths."""

    def __init__(self, project: Project, site: Path | None = None, env: Environment | None = None):
        env = env or Environment.current()
        self.project, self.env = project, env
        self.site = site or env.site(project)
        self.dist = dist_name(project)
        self.version = env.dist(self.dist)["version"]
        self.label = f"{self.dist} {self.version} in {env.prefix}"

    def path(self, repo_path: str) -> Path | None:
        return installed_path(self.project, repo_path, self.site)

    def read(self, repo_path: str) -> bytes | None:
        path = self.path(repo_path)
        if path is None or not path.is_file():
            return None
        try:
            return path.read_bytes()
        except OSError as err:
            raise Unreadable(f"{path}: {one_line(err)}") from None

    def missing_file_hint(self, repo_path: str) -> str:
        return f"not in the installed {self.dist} {self.version} ({self.path(repo_path)})"
