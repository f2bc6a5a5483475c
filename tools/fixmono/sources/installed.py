"""The files a Python environment has installed, as a source: a fix's
repository paths mapped to the installed package's files, read as text
(nothing of the package is imported)."""
from __future__ import annotations

import importlib.metadata
import json
import importlib.util
import sys
from pathlib import Path

from fixmono.model.errors import Unreadable, one_line
from fixmono.model.projects import Project
from fixmono.sources.upstream import Source


def dist_name(project: Project) -> str:
    return project.dist or "jaxlib"  # XLA ships inside jaxlib


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_dir(package: str, dist: str) -> Path | None:
    """Where `import <package>` would load it from (find_spec does not run a
    top-level package), else the distribution's own copy."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    try:
        return Path(importlib.metadata.distribution(dist).locate_file(package))
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_path(project: Project, repo_path: str, site: Path | None = None) -> Path | None:
    """The installed file for an upstream repository path (it may not exist), or
    None when such a file is never installed (C++ sources, tests). `site`
    replaces the directory holding the packages (site-packages), e.g. for a
    patched copy."""
    package = project.markers[0].removeprefix(project.wheel_root).split("/")[0]
    if not repo_path.endswith(".py") or not repo_path.startswith(f"{project.wheel_root}{package}/"):
        return None
    rel = repo_path.removeprefix(project.wheel_root)
    if site is None:
        where = package_dir(package, dist_name(project))
        site = where.parent if where else Path(sys.prefix, "(no installed package)")
    return site / rel


def installed_provenance(dist: str) -> dict | None:
    """What patch_wheel recorded in the installed distribution's dist-info
    (fixmono.json: the wheel it was built from, the fixes), or None."""
    try:
        text = importlib.metadata.distribution(dist).read_text("fixmono.json")
        return json.loads(text) if text else None
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


class InstalledFiles(Source):
    """The installed files of `project` (in `site`, default: where this
    interpreter imports it from), readable by their repository paths."""

    def __init__(self, project: Project, site: Path | None = None):
        self.project, self.site = project, site
        self.dist = dist_name(project)
        self.version = installed_version(self.dist)
        self.label = f"{self.dist} {self.version} in {sys.prefix}"

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
