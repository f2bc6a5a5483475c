"""The fix declaration: what every fixes/<upstream>/<name>/fix.py declares.

A fix is one frozen dataclass. Everything make_patch, the tests and the runtime
need is reachable from it: identity, DEP-3 provenance, per-file transformations
with their match contracts, inline transformation cases, the runtime hot-fix
and the reproducer.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

from fixmono.model.errors import FixDeclarationError, FixtureUnavailable

BACKENDS = ("rocm", "cuda", "cpu")
_ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def lazy(target: str) -> Callable:
    """A callable for "package.module:function" that imports on first call, so
    declaring a fix imports neither torch nor the upstream library."""
    module, _, name = target.partition(":")

    def call(*args, **kwargs):
        import importlib

        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__qualname__ = f"lazy({target})"
    return call



def installed_file(package: str, relative: str) -> Callable[[], str]:
    """A fixture source: `relative` inside the installed `package`, found
    without importing it (its text is that release's upstream text)."""
    def load() -> str:
        import importlib.util
        from pathlib import Path

        spec = importlib.util.find_spec(package)
        if spec is None or not spec.origin:
            raise FixtureUnavailable(f"{package} is not installed")
        return (Path(spec.origin).parent / relative).read_text(encoding="utf-8")

    load.__qualname__ = f"installed_file({package}, {relative})"
    return load







@dataclass(frozen=True)
class Dep3:
    """Debian DEP-3 patch header fields (https://dep-team.pages.debian.net/deps/dep3/)."""

    origin: str  # "upstream, <url>" | "backport, <url>" | "vendor" | "other"
    last_update: str  # YYYY-MM-DD; also the deterministic patch date
    bug: str | None = None
    forwarded: str = "no"  # URL | "no" | "not-needed"
    applied_upstream: str | None = None  # URL or commit of the upstream fix

    def trailers(self) -> list[tuple[str, str]]:
        rows = [("Origin", self.origin), ("Bug", self.bug), ("Forwarded", self.forwarded),
                ("Applied-Upstream", self.applied_upstream), ("Last-Update", self.last_update)]
        return [(k, v) for k, v in rows if v]


class Transform(Protocol):
    """What an engine-specific transformation offers (see engines/)."""

    engine: str  # "python" | "cpp"
    description: str

    def rewrite(self, source: str) -> "Rewrite":
        """Return the rewritten source and the number of sites it changed and found
        already fixed. Raise NotApplicable when the anchor is missing,
        TransformFailed when it has an unexpected shape, and TargetSyntaxError
        when the source does not parse."""


@dataclass(frozen=True)
class Rewrite:
    source: str
    changed: int  # sites rewritten by this call
    present: int  # sites already in fixed form (the presence check)
    added: tuple[str, ...] = ()  # optional names of the changed sites, for the status and commit message
    already: tuple[str, ...] = ()  # optional names of the present sites
    evidence: str = ""  # a diff's port: what placed its hunks, where more than their own lines (three_way.py)


EDITS = ("insert", "replace", "move")


@dataclass(frozen=True)
class Fixture:
    """The text a FileChange is tested on, declared with it: the catalogue,
    property and scale tests and the throwaway-fix test find it here.

    source: a file of the fix folder ("fixtures/Blas.cpp": our own text, shaped
    like upstream's), or a callable returning the text (e.g. the installed
    wheel's file; it may call pytest.skip when that is absent).
    mutate: where the property tests reformat the text: qualified function
    names ("Class.method", "Class::method" in C++), "<module>" for top-level
    statements, "@name" for functions decorated by `name`. Empty: not mutated.
    edit: what the fix does to the lines it touches: only inserts, replaces
    or removes, or moves lines (the property tests check the edit keeps that shape)."""

    source: str | Callable[[], str]
    mutate: tuple[str, ...] = ()
    edit: str = "insert"


@dataclass(frozen=True)
class FileChange:
    """One target file: its transformation, its match contract and the text it
    is tested on."""

    path: str  # upstream repository-relative path
    transform: Transform
    sites: int = 1  # exactly this many sites must change (or already be fixed)
    optional: bool = False  # a tree without this file still gets the other files' fix
    fixture: Fixture | None = None


@dataclass(frozen=True)
class Case:
    """An inline transformation case, written by us (never upstream text).

    after=None means a noop case: the transformation must leave `before`
    unchanged, and `expect` says which status it must report
    ("already-applied" or "not-applicable" or "failed")."""

    name: str
    before: str
    after: str | None = None
    expect: str = "applied"
    path: str | None = None  # which FileChange; needed when the fix has several


class Verdict(enum.Enum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not-reproduced"
    SKIPPED = "skipped"

    @property
    def exit_code(self) -> int:
        return {"reproduced": 1, "not-reproduced": 0, "skipped": 77}[self.value]


@dataclass(frozen=True)
class ReproResult:
    verdict: Verdict
    summary: str  # one line, with the numbers behind the verdict
    details: Mapping[str, object] = field(default_factory=dict)
    needs: str | None = None  # backend the real mechanism needs, when not here


class ValidationNote(str):
    """What a fix's validate() returns when it found no problem but has
    something to say (what a compile check showed, or why it could not run):
    added to the outcome's detail, never a failure."""


class NotChecked(ValidationNote):
    """A ValidationNote saying the compile step of a check could not run here
    (no compiler, no headers): what ran before it passed; counted apart."""


@dataclass(frozen=True)
class HotFix:
    """The runtime form of a fix, for stacks that cannot be rebuilt.

    apply/remove are idempotent and return a one-line message saying what they
    did (or why they did nothing: library absent, platform unaffected).
    trigger: the module whose first import turns it on when FIXMONO_HOTFIXES
    names the fix (runtime/autoload.py); apply() is then called with no arguments."""

    apply: Callable[..., str]
    remove: Callable[[], str]
    trigger: str = ""


@dataclass(frozen=True)
class UpstreamCommit:
    """An upstream commit a fix undoes. make_patch reverts it through git when
    the checkout's history has it (found by sha, or by its PR's "Pull Request
    resolved: <url>" trailer), else falls back to the tree transformation."""

    pull_request: str  # URL
    subject: str
    sha: str | None = None
    # what a tree lacks when it predates the commit, e.g. "no cuBLASLt gate here":
    # such a tree is not-applicable, not already-applied (see revert.confirm_reverted)
    absent: str = "the reverted change is not here"


@dataclass(frozen=True)
class Fix:
    id: str
    title: str  # the patch subject
    upstream: str  # project name in model/projects.py
    description: str  # the commit message body: symptom, cause, fix
    dep3: Dep3
    backends: Sequence[str]  # affected backends
    changes: Sequence[FileChange]
    references: Sequence[str] = ()
    author: str = "Fix Monorepo <fix-monorepo@users.noreply.github.com>"
    cases: Sequence[Case] = ()
    hotfix: HotFix | None = None
    reverts: UpstreamCommit | None = None
    reproduce: Callable[[], ReproResult] | None = None
    # Behavioural check for --validate: validate(before, after), the texts of
    # the files the fix changes ({path: text}) before and after it; returns a
    # problem (one line) or None. It runs no more of the upstream's code than
    # it says (e.g. one patched function, against a double). A ValidationNote
    # returned is not a problem: it is added to the detail.
    validate: Callable[[Mapping[str, str], Mapping[str, str]], str | None] | None = None
    # The backend the reproducer needs to show the mechanism ("cpu", "cuda",
    # "rocm"; "" when there is none): the behavioural matrix (drift --run)
    # runs on this machine only the fixes whose reproducer needs "cpu".
    repro_needs: str = ""
    # The reproducer needs the machine to itself: it times things (a benchmark,
    # its verdict resting on how fast kernels run) or uses every GPU at once.
    # status --run and drift --run run it with nothing else running, every
    # core and GPU its own (analysis/schedule.py).
    repro_alone: bool = False
    package: str = ""  # filled in by discovery: fixmono.fixes.<upstream>.<name>

    def __post_init__(self) -> None:
        problems = []
        if not _ID_RE.match(self.id):
            problems.append(f"id {self.id!r} is not kebab-case")
        if not _DATE_RE.match(self.dep3.last_update):
            problems.append(f"Last-Update {self.dep3.last_update!r} is not YYYY-MM-DD")
        if unknown := set(self.backends) - set(BACKENDS):
            problems.append(f"unknown backends {sorted(unknown)}")
        if self.repro_needs and (self.repro_needs not in BACKENDS or self.reproduce is None):
            problems.append(f"repro_needs {self.repro_needs!r}: one of {BACKENDS}, with a reproducer")
        if not isinstance(self.repro_alone, bool) or (self.repro_alone and not self.repro_needs):
            problems.append(f"repro_alone {self.repro_alone!r}: True or False, True only with repro_needs")
        if not self.changes:
            problems.append("declares no file changes")
        paths = [c.path for c in self.changes]
        if len(paths) != len(set(paths)):
            problems.append("declares the same path twice")
        if any(c.sites < 1 for c in self.changes):
            problems.append("a match contract must expect at least one site")
        if "\n" in self.title:
            problems.append("title must be one line")
        if any(c.fixture and c.fixture.edit not in EDITS for c in self.changes):
            problems.append(f"a fixture's edit must be one of {EDITS}")
        if problems:
            raise FixDeclarationError(f"fix {self.id}: " + "; ".join(problems))

    def with_package(self, package: str) -> "Fix":
        return dataclasses.replace(self, package=package)

    @property
    def folder(self) -> Path:
        """The fix's folder (its package's directory)."""
        return Path(importlib.import_module(self.package).__file__).parent

    def fixture_text(self, change: FileChange) -> str:
        """The text of `change`'s fixture."""
        source = change.fixture.source
        if callable(source):
            return source()
        return (self.folder / source).read_text(encoding="utf-8")
