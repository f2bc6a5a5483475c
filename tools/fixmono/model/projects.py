"""The upstream projects fixes target, and how to recognise their trees. A new
upstream project is one Project(...) line here; nothing else names it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet


@dataclass(frozen=True)
class Project:
    name: str  # as used in fixes/<name>/ and Fix.upstream
    dist: str  # its distribution on PyPI
    markers: tuple[str, ...]  # a tree holding any of these paths is this project
    default_spec: str  # what `--upstream default` uses; "" until a fix needs one
    wheel_root: str = ""  # where the wheel's files live in the repository layout
    # tools/drift_matrix's documented range: "2" = every final 2.x release,
    # "=2.13.0" = that version only, ">=0.5.1,<0.12" = a version specifier;
    # "" = its fixes ship in no wheel. Wheels are read by ranges (only the
    # targets), so a range costs ~1.5 MB per torch release, not ~500 MB.
    drift_range: str = ""
    # the project whose repository holds this one's files too (jaxlib is built
    # from jax-ml/jax): its fixes also run on that project's checkouts
    part_of: str = ""
    package: str = ""  # its top-level import package, where no marker names it (a project of no fix)


PROJECTS: dict[str, Project] = {
    p.name: p
    for p in (
        # from 2.4.0, the first release with activation_memory_budget (the partitioner fix's subject)
        Project("pytorch", "torch", ("torch/__init__.py",), "pip:torch==2.13.0", drift_range=">=2.4,<3"),
        Project("transformer-engine", "transformer-engine",
                ("transformer_engine/__init__.py",), "pip:transformer-engine==2.20.2", drift_range=">=1,<3"),
        Project("transformers", "transformers",
                ("src/transformers/__init__.py",), "pip:transformers==5.23.0", wheel_root="src/",
                drift_range="5"),
        Project("xla", "", ("xla/stream_executor/BUILD",), ""),
        Project("jax", "jax", ("jax/__init__.py",), "pip:jax==0.10.2", drift_range=">=0.5.1,<0.12"),
        # after jax: a jax checkout holds jaxlib/ too and is a jax tree
        Project("jaxlib", "jaxlib", ("jaxlib/plugin_support.py",), "pip:jaxlib==0.10.2",
                drift_range=">=0.9.1,<0.13", part_of="jax"),
    )
}


def any_project(name: str, dist: str = "", wheel_root: str = "", package: str = "") -> Project:
    """A project no fix of the catalogue targets (the upstream a --diff is ported
    onto: any git checkout, any pip:NAME==VERSION), registered so that what looks
    a fix's project up by name finds it. It has no markers: the catalogue's fixes
    never run on it. A name a catalogue project has gets '-tree' added."""
    while name in PROJECTS and PROJECTS[name].markers:
        name += "-tree"
    if name not in PROJECTS:
        PROJECTS[name] = Project(name, dist, (), "", wheel_root=wheel_root, package=package)
    return PROJECTS[name]


def pip_project(dist: str, paths=()) -> Project:
    """The project of a PyPI distribution, by either of its names (torch or
    pytorch: the catalogue's), else one of its own, its files under src/ in the
    repository where the diff's `paths` are."""
    name = dist.lower().replace("_", "-")
    known = named(name)
    return known if known and known.dist else \
        any_project(name, name, "src/" if any(p.startswith("src/") for p in paths) else "")


def named(name: str) -> Project | None:
    """A project by its name here (pytorch) or its PyPI name (torch)."""
    return PROJECTS.get(name) or by_dist(name)


def by_dist(dist: str) -> Project | None:
    norm = dist.lower().replace("_", "-")
    return next((p for p in PROJECTS.values() if p.dist and p.dist == norm), None)


def installed_module(project: Project, path: str) -> str:
    """The module a repository path is installed as (src/transformers/trainer.py -> transformers.trainer)."""
    parts = path.removeprefix(project.wheel_root).removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runs_on(fix_upstream: str, project: Project) -> bool:
    """Whether a fix for `fix_upstream` applies to a tree of `project`."""
    return fix_upstream == project.name or PROJECTS[fix_upstream].part_of == project.name


def range_specifier(drift_range: str) -> SpecifierSet:
    """A documented range as a version specifier: "2" -> ==2.*, "=2.13.0" -> ==2.13.0."""
    from packaging.specifiers import SpecifierSet  # drift's: a status or a make-patch run needs none

    if drift_range.startswith("=") and not drift_range.startswith("=="):
        return SpecifierSet(f"={drift_range}")
    return SpecifierSet(drift_range) if drift_range[0] in "<>=!~" else SpecifierSet(f"=={drift_range}.*")


def checked_range(project: Project) -> SpecifierSet | None:
    """The versions the project's fixes are checked on (its drift range), or None."""
    return range_specifier(project.drift_range) if project.drift_range else None
