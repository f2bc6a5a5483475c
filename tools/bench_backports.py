#!/usr/bin/env python3
"""The port engine on real upstream backports (issue 34, benchmark b).

    .venv/bin/python tools/bench_backports.py GITDIR [GITDIR...] [--limit N] [--verbose] [--json FILE] [--cli N]
                                              [--lang python|cpp]
    .venv/bin/python tools/bench_backports.py GITDIR [GITDIR...] --rerun ROWS.json [--tool COLUMN]

GITDIR is a bare clone of an upstream repository. Its pairs (`select_pairs`,
deterministic): a commit of a release branch (`release/2.5.x`, `release_v2.16`,
`v1.3-release`, `r3.9`, `2.14`, ...; not on the main branch) that is a backport
of a main-branch commit: its message says `(cherry picked from commit SHA)`
with SHA reachable from main, or (repositories that do not use -x) its subject
ends with a PR number ` (#1234)` and equals the subject of exactly one
main-branch commit. Kept: main commits that only modify existing `.py` files
(no added, deleted, renamed or binary files) that exist at the release too;
with `--lang cpp`, main commits that only modify existing C/C++ files instead
(their `clean` below: tree-sitter finds no parse error the file had not, and
every added line is in the same function as in the main commit, tree-sitter's,
where the file can be read whole).
A pair whose two patches are the same text (index lines and hunk line numbers
ignored) is `trivial`; it is counted, and also reported apart.

The main commit's `git format-patch` is given, side by side, to the port
engine (`DiffTransform(path, hunks, old_blob).rewrite(source)` per file, as
`make_patch --diff` does), to three text tools on the same files in a
scratch folder: `git apply`, `git apply -C1`, `patch -p1 --fuzz=3`, and to
`git apply --3way` as in a clone with the objects (a scratch repository
holding the target's files and the blobs the diff's index lines name, read
from GITDIR: it finds the pre-image there; a conflict is `failed`).

1. Release branch, truth known: the files at the backport's parent, the truth
   the files at the backport. Per tool:
     identical  its text equals the backport's
     wrong      it wrote other text; `explained` where that text is what the
                main diff says (the engine's text equals `git apply`'s, or it
                adds and removes exactly the main diff's lines): the backport
                itself differs from the main fix (a conflict resolved by hand)
     no         no text (failed, not-applicable, already-applied, refused)
   And for the engine: where `git apply` applies, the engine's text must be
   byte-identical to it (`differs from git apply`: must be 0).
2. Older releases, no truth: the same diff onto the files at the last patch
   release of each of the 1-3 minor versions before the release branch's.
   A tool's text is `clean` when every changed file parses (ast), defines no
   def/class twice in one body where the file did not, every added line lies
   in the same def/class chain as in the main commit's post-image (where the
   file has those defs/classes: a method renamed since is not judged),
   and pyflakes (when importable) reports no undefined name the file did not
   have; else `broken`. Attempts where every removed line of the diff is in
   the file (stripped) are counted apart: there the code is there to change.
   A clean text is also `usable` when what its added lines import, read on
   `self`/`cls` and pass as keywords is in that release's tree (the files at
   the tag, read from git; engines/uses.py). The engine's own text gets that
   check in both settings, as make_patch's does: a certain miss is `failed`.
3. Speed: CPU seconds to parse and port every diff of setting 1: the engine
   in-process without and with the pre-image (the rewrite cache off), beside
   `git apply`'s processes', as ratios; and this process's peak memory
   (ru_maxrss: the engine, and the benchmark's rows around it).
4. --cli N: N release-branch pairs, evenly spread, also through the real
   command (`python -m fixmono make-patch --diff main.patch --upstream
   CHECKOUT --out DIR --json`, the checkout a shared clone of GITDIR at the
   backport's parent): its status must be the in-process engine's, and where
   it applied, the files `git am` of its series gives must be the engine's
   text. Exit 1 where one disagrees.

5. --rerun ROWS.json: instead of the above, every attempt of an earlier --json
   file through the engine column(s) again (`--tool`, default both) with the
   code here: the counts before and now, and each attempt whose verdict changed
   (exit 1 where one did). A change to the engine is checked verdict by verdict
   this way in about a third of a full run's time.

The engine's evidence per file (Rewrite.evidence, or what it appends to a
refusal in parentheses: `placed through the diff's pre-image (blob ...)`, `by
its hunks: ...`; empty where its hunks alone decided) is in the --json rows
(`<tool> evidence`, `<tool> evidence class`), and a table per setting gives
the `port engine + pre-image` outcomes by its class.

Tables on stdout, progress on stderr; --verbose prints each engine `wrong`
and `broken` case with a short diff; --json dumps one row per attempt.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fixmono.engines.cpp import CppDocument  # noqa: E402
from fixmono.engines.port import CPP, CppScopes, DiffTransform, norm, norm_cpp  # noqa: E402
from fixmono.engines.uses import unresolved_uses  # noqa: E402
from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed, UserError  # noqa: E402
from fixmono.model.patchfile import parse_patch  # noqa: E402
from fixmono.sources.git import clean_env, run_git  # noqa: E402

GIT_ENV = clean_env(GIT_LITERAL_PATHSPECS="0")  # `-- '*.py'` is a pattern here

try:
    from pyflakes.api import check as pyflakes_check
    from pyflakes.messages import UndefinedName
    from pyflakes.reporter import Reporter
except ImportError:  # the benchmark runs without it, one check fewer
    pyflakes_check = None

TOOLS = {"git apply": ["git", "apply"], "git apply -C1": ["git", "apply", "-C1"],
         "patch --fuzz=3": ["patch", "-p1", "--fuzz=3", "--no-backup-if-mismatch", "-s", "-f"]}
ENGINE = "port engine"
ENGINE_PRE = "port engine + pre-image"  # given the main commit's parent file, as a checkout holding its blob is
THREE_WAY = "git apply --3way"  # as in a clone with the objects: it finds the pre-image blobs by the index lines
ALL = (ENGINE, ENGINE_PRE, *TOOLS, THREE_WAY)
GIT_CONFLICTS = "with conflicts"  # what git apply --3way says where its merge conflicts (rows of earlier runs)
CONFLICTS = f"{GIT_CONFLICTS} in"  # its refusal here, naming the files
# a release branch: an optional prefix, a version, optional release-ish suffixes
RELEASE = re.compile(r"^(?:release[/_-]?v?|r|v)?(\d+)\.(\d+)(?:\.\d+)?(?:\.x|\.X)?"
                     r"(?:[-_.](?:release|post\d*|patch|bis|good)\w*)*$")
TAG = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?$")
CHERRY = re.compile(r"\(cherry picked from commit ([0-9a-f]{7,40})\)")
PR_SUFFIX = re.compile(r" \(#\d+\)$")


@dataclasses.dataclass(frozen=True)
class Pair:
    repo: str
    branch: str
    main: str  # the fix on the main branch
    pick: str  # its backport on the release branch
    parent: str  # the backport's parent: the release before the fix
    paths: tuple[str, ...]
    how: str  # "cherry-pick -x" | "subject"
    trivial: bool  # both patches the same text


def git(gitdir: str, *args: str) -> str:
    """git on a mirror, through the one git layer (sources/git.py: its hardened environment)."""
    proc = run_git(None, "--git-dir", gitdir, *args, env=GIT_ENV)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, ["git", *args], proc.stdout, proc.stderr)
    return proc.stdout


def show(gitdir: str, rev: str, path: str) -> str | None:
    """The file's text at `rev`, None where it is absent (or not UTF-8)."""
    proc = run_git(None, "--git-dir", gitdir, "show", f"{rev}:{path}", env=GIT_ENV, binary=True)
    if proc.returncode:
        return None
    try:
        return proc.stdout.decode()
    except UnicodeDecodeError:
        return None


def repo_name(gitdir: str) -> str:
    """owner/name from a mirror path like /work/.mirror/owner+name/repo, else the folder name."""
    parts = [p for p in Path(gitdir).resolve().parts if "+" in p]
    return parts[-1].replace("+", "/") if parts else Path(gitdir).resolve().name


def version_of(name: str, pattern: re.Pattern) -> tuple[int, ...] | None:
    match = pattern.match(name)
    return tuple(int(g or 0) for g in match.groups()) if match else None


def release_branches(gitdir: str, main: str) -> list[str]:
    """Branches named like a release, oldest version first (ties by name)."""
    names = git(gitdir, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    found = [n for n in names if n != main and version_of(n, RELEASE)]
    return sorted(found, key=lambda n: (version_of(n, RELEASE), n))


def main_branch(gitdir: str) -> str:
    return git(gitdir, "symbolic-ref", "--short", "HEAD").strip()


LANGUAGES = {"python": (".py",), "cpp": CPP}  # --lang: the files a main commit may modify


def touched(gitdir: str, sha: str, suffixes: tuple[str, ...] = (".py",)) -> tuple[str, ...] | None:
    """The files `sha` changes, where all are existing text files of `suffixes` it modifies; else None."""
    raw = git(gitdir, "diff-tree", "--no-commit-id", "-r", "-M", "--numstat", "--raw", sha).splitlines()
    stats = [line for line in raw if line and not line.startswith(":")]
    modes = [line for line in raw if line.startswith(":")]
    if not modes or any(line.split()[4] != "M" for line in modes) or any(s.startswith("-\t-\t") for s in stats):
        return None
    paths = tuple(line.split("\t", 1)[1] for line in modes)
    return paths if all(p.endswith(suffixes) for p in paths) else None


def patch_text(gitdir: str, old: str, new: str, paths: tuple[str, ...]) -> str:
    """The diff old..new of `paths`, index lines and hunk line numbers dropped (to compare two patches)."""
    text = git(gitdir, "diff", "--no-ext-diff", "--no-textconv", old, new, "--", *paths)
    return "\n".join("@@" if line.startswith("@@") else line
                     for line in text.splitlines() if not line.startswith("index "))


def select_pairs(gitdir: str, suffixes: tuple[str, ...] = (".py",)) -> list[Pair]:
    """Backports of main-branch commits on the release branches (see the docstring), in branch order."""
    main = main_branch(gitdir)
    on_main = set(git(gitdir, "rev-list", main).split())
    subjects: dict[str, list[str]] = {}
    for line in git(gitdir, "log", "--no-merges", "--format=%H %s", main).splitlines():
        sha, _, subject = line.partition(" ")
        subjects.setdefault(subject, []).append(sha)
    pairs, seen = [], set()
    for branch in release_branches(gitdir, main):
        log = git(gitdir, "log", "--no-merges", "--reverse", "--format=%H%x1f%P%x1f%s%x1f%B%x1e", f"{main}..{branch}")
        for record in filter(str.strip, log.split("\x1e")):
            sha, parent, subject, body = record.strip("\n").split("\x1f", 3)
            if sha in seen:
                continue  # the same commit on two branches: once
            seen.add(sha)
            found, how = origin(gitdir, body, subject, on_main, subjects)
            paths = touched(gitdir, found, suffixes) if found else None
            if not paths or any(show(gitdir, parent, p) is None for p in paths):
                continue
            trivial = patch_text(gitdir, f"{found}^", found, paths) == patch_text(gitdir, parent, sha, paths)
            pairs.append(Pair(repo_name(gitdir), branch, found, sha, parent, paths, how, trivial))
    return pairs


def origin(gitdir: str, body: str, subject: str, on_main: set, subjects: dict) -> tuple[str | None, str]:
    """The main-branch commit a release commit backports, and how it was found."""
    for short in reversed(CHERRY.findall(body)):  # the last note is the newest pick
        full = git_full(gitdir, short)
        if full in on_main and len(git(gitdir, "rev-list", "--parents", "-n1", full).split()) == 2:
            return full, "cherry-pick -x"
    if PR_SUFFIX.search(subject) and len(subjects.get(subject, ())) == 1:
        return subjects[subject][0], "subject"
    return None, ""


def git_full(gitdir: str, short: str) -> str | None:
    return run_git(None, "--git-dir", gitdir, "rev-parse", "--verify", "-q", f"{short}^{{commit}}",
                   env=GIT_ENV).stdout.strip() \
        or None


def older_releases(gitdir: str, branch: str, count: int = 3) -> list[str]:
    """The last patch release tag of each of the `count` minor versions before `branch`'s."""
    version = version_of(branch, RELEASE)
    best: dict[tuple[int, int], tuple] = {}
    for tag in git(gitdir, "tag").split():
        v = version_of(tag, TAG)
        if v and v[:2] < version[:2] and (v[:2] not in best or v > best[v[:2]][0]):
            best[v[:2]] = (v, tag)
    return [best[minor][1] for minor in sorted(best)[-count:]]


# --- porting -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    status: str  # applied | already-applied | not-applicable | failed
    texts: dict[str, str] | None = None  # the files after it, where applied
    message: str = ""
    evidence: dict[str, str] = dataclasses.field(default_factory=dict)  # the engine's, per file it reached


# what placed a file's hunks (Rewrite.evidence, or the text the engine appends in parentheses to a
# refusal), by the stable start of its phrase (engines/port.py: DiffTransform.through_pre_image); an
# attempt of several files counts under the last of its files' classes in this order (the weakest)
EVIDENCE = {"placed by the syntax of": "pre-image placed by syntax",
            "placed through the diff's pre-image": "pre-image placed",
            "the file is the diff's pre-image": "the file is the pre-image",
            "its changes stand here where its pre-image": "pre-image present (its changes there)",
            "by its hunks:": "pre-image did not place it (hunks decided)"}
NO_EVIDENCE = "no evidence given (hunks only)"


def refusal_evidence(message: str) -> str:
    """The evidence the engine appended to a refusal message, `(by its hunks: ...)`; '' where none."""
    at = max(message.rfind(f"({phrase}") for phrase in EVIDENCE)
    return message[at + 1:].removesuffix(")") if at >= 0 else ""


def evidence_class(evidence: dict[str, str]) -> str:
    """The attempt's class: its files' weakest evidence (EVIDENCE's order: a class holds the attempts
    whose every file had at least that); an unknown phrase its own class, after the known ones."""
    found = [next((name for phrase, name in EVIDENCE.items() if text.startswith(phrase)),
                  f"other: {text[:40]}") if text else NO_EVIDENCE for text in evidence.values()]
    order = [*EVIDENCE.values(), NO_EVIDENCE]
    return max(found, key=lambda c: order.index(c) if c in order else len(EVIDENCE), default=NO_EVIDENCE)


def engine(patch: str, files: dict[str, str], read=None, pre_images: dict[str, str | None] | None = None) -> Result:
    """The port engine on every file of the diff (one not-applicable file and one applied: failed);
    with `read` (the target tree's files), its result must use only what that tree has, as
    make_patch checks it (apply/contract.check_uses); `pre_images`: the files the diff was made on
    (engines/three_way.py), where known."""
    try:
        parsed = parse_patch(patch, "main.patch")
    except UserError as err:
        return Result("failed", message=str(err))
    out, statuses, messages, evidence = {}, set(), [], {}
    for f in parsed.files:
        try:
            rewrite = DiffTransform(f.path, f.hunks, f.old_blob).rewrite(files[f.path], (pre_images or {}).get(f.path))
        except NotApplicable as err:
            statuses.add("not-applicable")
            messages.append(f"{f.path}: not-applicable: {err}")
            evidence[f.path] = refusal_evidence(str(err))
            continue
        except (TransformFailed, TargetSyntaxError) as err:
            evidence[f.path] = refusal_evidence(str(err))
            return Result("failed", message=f"{f.path}: {err}", evidence=evidence)
        out[f.path], evidence[f.path] = rewrite.source, rewrite.evidence
        statuses.add("applied" if rewrite.changed else "already-applied")
    if statuses == {"not-applicable"}:
        return Result("not-applicable", message="; ".join(messages), evidence=evidence)
    if "not-applicable" in statuses:
        return Result("failed", message="half the diff applies: " + "; ".join(messages), evidence=evidence)
    if "applied" not in statuses:
        return Result("already-applied", evidence=evidence)
    if read is not None and (why := unusable(read, files, out, pre_images)):
        return Result("failed", message=why, evidence=evidence)
    return Result("applied", {**files, **out}, evidence=evidence)


def text_tool(command: list[str], patch: str, files: dict[str, str]) -> Result:
    """A text tool in a scratch folder holding `files`: applied, or failed where it refuses."""
    with tempfile.TemporaryDirectory() as tmp:
        for path, text in files.items():
            (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / path).write_text(text)
        proc = subprocess.run(command, cwd=tmp, input=patch.encode(), capture_output=True)
        if proc.returncode:
            return Result("failed", message=(proc.stdout + proc.stderr).decode(errors="replace").strip()[:300])
        return Result("applied", {path: (Path(tmp) / path).read_text() for path in files})


def three_way(gitdir: str, patch: str, files: dict[str, str]) -> Result:
    """`git apply --3way` as in a clone of GITDIR at the target: a scratch repository whose index and
    work tree hold `files`, and whose objects hold the blobs the diff's index lines name, read from
    GITDIR (a clone has them: there it finds the pre-image). Not GITDIR itself as GIT_DIR or as an
    alternate: git "freshens" (sets the time of) a pack holding an object it writes again, and
    `git apply --3way` writes its blobs: the mirror's packs would be touched. A conflict (its
    markers, a non-zero exit) is failed; a merge that changes nothing (the change is there), already-applied."""
    with tempfile.TemporaryDirectory() as tmp:
        work, repo = Path(tmp) / "work", Path(tmp) / "git"
        for path, text in files.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(text)
        env = clean_env(GIT_DIR=str(repo), GIT_WORK_TREE=str(work))
        steps = [(["init", "-q", "--bare", "--template=", str(repo)], None, clean_env()),
                 (["update-index", "--add", "--", *files], None, env)]
        steps += [(["hash-object", "-w", "--no-filters", "--stdin"], data, env)
                  for f in parse_patch(patch, "main.patch").files
                  if f.old_blob and (data := show_blob(gitdir, f.old_blob)) is not None]
        for args, data, step_env in steps:
            if (proc := run_git(work, *args, env=step_env, input=data)).returncode:
                raise subprocess.CalledProcessError(proc.returncode, ["git", *args], proc.stdout, proc.stderr)
        proc = run_git(work, "apply", "--3way", input=patch, env=env)
        if proc.returncode:
            said = (proc.stdout + proc.stderr).strip()
            conflicts = [line[2:] for line in said.splitlines() if line.startswith("U ")]
            return Result("failed", message=f"{CONFLICTS} {', '.join(conflicts)}" if conflicts else said[:300])
        texts = {path: (work / path).read_text() for path in files}
        return Result("already-applied") if texts == files else Result("applied", texts)  # merged: no change


def show_blob(gitdir: str, blob: str) -> bytes | None:
    """The blob's bytes (an abbreviated id, as an index line names it), None where GITDIR has none."""
    proc = run_git(None, "--git-dir", gitdir, "cat-file", "blob", blob, env=GIT_ENV, binary=True)
    return None if proc.returncode else proc.stdout


def port_all(patch: str, files: dict[str, str], read, pre_images: dict[str, str | None],
             gitdir: str) -> dict[str, Result]:
    return {ENGINE: engine(patch, files, read), ENGINE_PRE: engine(patch, files, read, pre_images),
            **{t: text_tool(c, patch, files) for t, c in TOOLS.items()}, THREE_WAY: three_way(gitdir, patch, files)}


def pre_images(gitdir: str, pair: Pair) -> dict[str, str | None]:
    return {p: show(gitdir, f"{pair.main}^", p) for p in pair.paths}


# --- checks --------------------------------------------------------------------------------------

def chains(source: str, path: str = "m.py") -> list[tuple[int, int, str]]:
    """(first line, last line, name) of every def and class (C/C++: every function, by its own name; none
    where tree-sitter cannot read the file whole: a namespace or class span it reads past a parse error
    would call a line moved that is not)."""
    if path.endswith(CPP):
        try:
            return sorted(CppScopes(source).functions)
        except TargetSyntaxError:
            return []
    tree = ast.parse(source)
    return sorted((n.lineno, n.end_lineno, n.name) for n in ast.walk(tree)
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def added_lines(before: str, after: str, path: str = "m.py") -> list[tuple[str, tuple[str, ...]]]:
    """The lines `after` adds to `before` (code only, as tokens), each with its def/class chain in `after`."""
    old, new = before.splitlines(), after.splitlines()
    spans = chains(after, path)
    code = norm_cpp if path.endswith(CPP) else norm
    out = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("insert", "replace"):
            for j in range(j1, j2):
                if code(new[j]):
                    out.append((code(new[j]), tuple(name for s, e, name in spans if s <= j + 1 <= e)))
    return out


def misplaced(before: str, after: str, wanted: list[tuple[str, tuple]], path: str = "m.py") -> str | None:
    """Where an added line lies in another def/class chain than in the main commit (None: none does)."""
    where: dict[str, set] = {}
    for text, chain in wanted:
        where.setdefault(text, set()).add(chain)
    names = {name for _, _, name in chains(before, path)}
    for text, chain in added_lines(before, after, path):
        if text not in where or not any(c.isalnum() for c in text):
            continue  # a line the diff does not add, or a lone `)`: difflib's choice of line, not judged
        if any(not all(name in names for name in c) for c in where[text]):
            continue  # the main commit has it in a def/class this release lacks (renamed since): not judged
        if chain not in where[text]:
            return f"`{text}` in {'.'.join(chain) or '<module>'}, the main commit has it in " \
                   f"{' / '.join('.'.join(c) or '<module>' for c in sorted(where[text]))}"
    return None


def duplicates(source: str) -> set[tuple]:
    """Defs/classes defined twice in one body (a hunk adding a def the target already has in another form)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        names = [n.name for n in (body if isinstance(body, list) else []) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                               ast.ClassDef))
                 and not any(isinstance(d, ast.Attribute) or getattr(d, "id", "") == "overload"
                             for d in n.decorator_list)]  # @x.setter, @overload: the same name on purpose
        out |= {(getattr(node, "name", "<module>"), name) for name in names if names.count(name) > 1}
    return out


def undefined(source: str) -> set[str]:
    """The names pyflakes reports undefined."""
    class Quiet(Reporter):
        def __init__(self):
            self.names = set()

        def flake(self, message):
            if isinstance(message, UndefinedName):
                self.names.add(message.message_args[0])

        def unexpectedError(self, *args):
            pass

        def syntaxError(self, *args):
            pass

    reporter = Quiet()
    pyflakes_check(source, "file.py", reporter)
    return reporter.names


def check(result: Result, files: dict[str, str], wanted: dict[str, list]) -> str | None:
    """Why a tool's text is broken (None: clean): it does not parse, defines a def/class twice, a line is
    misplaced, a new undefined name."""
    for path, text in result.texts.items():
        if text == files[path]:
            continue
        if path.endswith(CPP):  # C/C++: no more tree-sitter parse errors than the file had, and no line misplaced
            if (new := len(CppDocument(text).errors())) > (old := len(CppDocument(files[path]).errors())):
                return f"{path}: does not parse (tree-sitter errors {old} -> {new})"
            if (why := misplaced(files[path], text, wanted[path], path)) is not None:
                return f"{path}: misplaced: {why}"
            continue
        try:
            ast.parse(text)
        except (SyntaxError, ValueError) as err:
            return f"{path}: does not parse (line {getattr(err, 'lineno', '?')}: {getattr(err, 'msg', err)})"
        if new := duplicates(text) - duplicates(files[path]):
            return f"{path}: defines {', '.join(f'{c}.{n}' for c, n in sorted(new))} twice"
        if (why := misplaced(files[path], text, wanted[path])) is not None:
            return f"{path}: misplaced: {why}"
        if pyflakes_check and (new := undefined(text) - undefined(files[path])):
            return f"{path}: new undefined name(s) {', '.join(sorted(new))}"
    return None


def tree_at(gitdir: str, rev: str):
    """read(path) of the files at `rev` (bytes, None where absent), for the uses check."""
    def read(path: str) -> bytes | None:
        proc = run_git(None, "--git-dir", gitdir, "show", f"{rev}:{path}", env=GIT_ENV, binary=True)
        return None if proc.returncode else proc.stdout
    return read


def unusable(read, files: dict[str, str], texts: dict[str, str], pre: dict[str, str | None] | None = None) \
        -> str | None:
    """What a tool's text uses that the tree `read` reads lacks (None: every use is there), its
    changed files read as the tool wrote them; `pre`: the diff's pre-images (C/C++: a function of upstream's
    file is told apart by them)."""
    def tree(path: str) -> bytes | None:
        return texts[path].encode() if path in texts else read(path)

    for path, text in texts.items():
        if text != files[path] and (problems := unresolved_uses(path, files[path], text, tree, whole_tree=True,
                                                                pre_image=(pre or {}).get(path))):
            return f"{path}: {problems[0]}"
    return None


def short_diff(a: dict[str, str], b: dict[str, str], limit: int = 30) -> str:
    lines = []
    for path in a:
        lines += difflib.unified_diff(a[path].splitlines(), b[path].splitlines(), f"a/{path}", f"b/{path}",
                                      n=1, lineterm="")
    return "\n".join(lines[:limit] + ([f"... ({len(lines) - limit} more lines)"] if len(lines) > limit else []))


# --- the settings --------------------------------------------------------------------------------

def main_diff(gitdir: str, pair: Pair) -> tuple[str, dict[str, list]]:
    """The main commit as a `git format-patch` mail, and its added lines per file (for the scope check)."""
    patch = git(gitdir, "format-patch", "-1", "--stdout", pair.main)
    wanted = {}
    for path in pair.paths:
        before, after = show(gitdir, f"{pair.main}^", path), show(gitdir, pair.main, path)
        try:
            wanted[path] = added_lines(before or "", after or "", path)
        except (SyntaxError, ValueError):
            wanted[path] = []  # the main commit's own file does not parse: nothing to compare scopes with
    return patch, wanted


def explained(result: Result, files: dict[str, str], patch: str, applied: Result, truth: dict[str, str]) -> bool:
    """A wrong text is what the main diff says: git apply's text, or each file
    the backport's or exactly the diff's added and removed lines."""
    if applied.status == "applied":
        return result.texts == applied.texts
    parsed = parse_patch(patch, "main.patch")
    for f in parsed.files:
        if result.texts[f.path] == truth.get(f.path):
            continue  # (a line diff of it may pair its lines otherwise than the main diff does)
        want = Counter((k, norm(t)) for h in f.hunks for k, t in h.lines if k != " " and norm(t))
        have = Counter()
        for line in difflib.unified_diff(files[f.path].splitlines(), result.texts[f.path].splitlines(),
                                         lineterm="", n=0):
            if line[:1] in "+-" and not line.startswith(("+++", "---")) and norm(line[1:]):
                have[(line[0], norm(line[1:]))] += 1
        if have != want:
            return False
    return True


def release_branch_rows(gitdir: str, pair: Pair, patch: str, wanted: dict, verbose: bool) -> dict:
    """Setting 1: the main diff onto the backport's parent, against the backport."""
    files = {p: show(gitdir, pair.parent, p) for p in pair.paths}
    truth = {p: show(gitdir, pair.pick, p) for p in pair.paths}
    results = port_all(patch, files, tree_at(gitdir, pair.parent), pre_images(gitdir, pair), gitdir)
    row = {"setting": "release", **dataclasses.asdict(pair), "target": pair.parent}
    for tool, result in results.items():
        if result.status != "applied":
            verdict = "no"
        elif result.texts == truth:
            verdict = "identical"
        else:
            verdict = "wrong explained" if explained(result, files, patch, results["git apply"], truth) else "wrong"
        row[tool] = verdict
    with_evidence(row, results)
    eng, plain = results[ENGINE], results["git apply"]
    row["engine status"], row["engine message"] = eng.status, eng.message
    row["engine broken"] = check(eng, files, wanted) if eng.status == "applied" else None
    row["differs from git apply"] = plain.status == "applied" and eng.status == "applied" and eng.texts != plain.texts
    pre = results[ENGINE_PRE]
    row["pre-image differs from git apply"] = plain.status == "applied" and pre.status == "applied" \
        and pre.texts != plain.texts
    row["git apply applied, engine no"] = plain.status == "applied" and eng.status != "applied"
    if verbose and row[ENGINE_PRE] == "wrong":
        print(f"\n#### {pair.repo} {pair.branch} {pair.main[:10]}: engine + pre-image wrong\n"
              f"{short_diff(truth, pre.texts)}")
    if verbose and (row[ENGINE] == "wrong" or row["engine broken"] or row["differs from git apply"]):
        print(f"\n#### {pair.repo} {pair.branch} {pair.main[:10]} -> {pair.pick[:10]} ({', '.join(pair.paths)}): "
              f"engine {row[ENGINE]}; {row['engine broken'] or ''}\nengine vs backport:\n"
              f"{short_diff(truth, eng.texts)}")
        if row["differs from git apply"]:
            print(f"git apply vs engine:\n{short_diff(plain.texts, eng.texts)}")
    return row


def with_evidence(row: dict, results: dict[str, Result]) -> None:
    """The engine's evidence per file, and its class, into the attempt's row."""
    for tool in (ENGINE, ENGINE_PRE):
        row[f"{tool} evidence"] = results[tool].evidence
        row[f"{tool} evidence class"] = evidence_class(results[tool].evidence)


def older_verdict(result: Result, files: dict[str, str], wanted: dict) -> tuple[str, str | None]:
    """A tool's outcome on an older release: clean, broken (and why), or the status it gave no text with."""
    why = check(result, files, wanted) if result.status == "applied" else None
    return ("broken" if why else "clean" if result.status == "applied" else result.status), why


def older_rows(gitdir: str, pair: Pair, patch: str, wanted: dict, verbose: bool) -> list[dict]:
    """Setting 2: the main diff onto the 1-3 minor releases before the branch's, checked without truth."""
    parsed = parse_patch(patch, "main.patch")
    removed = {f.path: {t.strip() for h in f.hunks for k, t in h.lines if k == "-" and t.strip()}
               for f in parsed.files}
    rows = []
    for tag in older_releases(gitdir, pair.branch):
        files = {p: show(gitdir, tag, p) for p in pair.paths}
        row = {"setting": "older", **dataclasses.asdict(pair), "target": tag}
        if any(t is None for t in files.values()):
            row["missing file"] = True
            rows.append(row)
            continue
        row["removed lines present"] = all(removed[p] <= {line.strip() for line in files[p].splitlines()}
                                           for p in removed)
        read, pre = tree_at(gitdir, tag), pre_images(gitdir, pair)
        results = port_all(patch, files, read, pre, gitdir)
        with_evidence(row, results)
        for tool, result in results.items():
            row[tool], why = older_verdict(result, files, wanted)
            row[f"{tool} why"] = why or result.message
            row[f"{tool} unusable"] = unusable(read, files, result.texts, pre) if row[tool] == "clean" else None
            if verbose and row[f"{tool} unusable"]:
                print(f"\n#### {pair.repo} {pair.main[:10]} @ {tag}: {tool} clean, not usable: "
                      f"{row[f'{tool} unusable']}")
            if verbose and tool in (ENGINE, ENGINE_PRE) and why:
                print(f"\n#### {pair.repo} {pair.main[:10]} @ {tag} ({', '.join(pair.paths)}): engine broken: {why}\n"
                      f"{short_diff(files, result.texts)}")
        rows.append(row)
    return rows


def through_cli(gitdir: str, pair: Pair, patch: str) -> str | None:
    """The pair's main diff through the real command onto a checkout of the backport's
    parent: None where it agrees with the in-process engine, else what differs."""
    files = {p: show(gitdir, pair.parent, p) for p in pair.paths}
    mine = engine(patch, files, tree_at(gitdir, pair.parent), pre_images(gitdir, pair))  # the clone holds them
    plain = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    local = clean_env(GIT_ALLOW_PROTOCOL="file")  # the one git layer's environment; a local clone: file transport
    with tempfile.TemporaryDirectory() as tmp:
        repo, out = Path(tmp) / "checkout", Path(tmp) / "out"
        for args in (["clone", "-q", "--shared", "--no-checkout", gitdir, str(repo)],
                     ["-C", str(repo), "checkout", "-q", "--detach", pair.parent]):
            if (done := run_git(None, *args, env=local)).returncode:
                raise subprocess.CalledProcessError(done.returncode, args, done.stdout, done.stderr)
        (Path(tmp) / "main.patch").write_text(patch)
        proc = subprocess.run([sys.executable, "-m", "fixmono", "make-patch", "--diff", str(Path(tmp) / "main.patch"),
                               "--upstream", str(repo), "--out", str(out), "--json"], capture_output=True, text=True,
                              env={**plain, "PYTHONPATH": str(Path(__file__).resolve().parent)})
        if proc.returncode not in (0, 1) or not proc.stdout.startswith("{"):
            return f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
        (result,) = json.loads(proc.stdout)["runs"][0]["results"]
        if result["status"] != mine.status:
            return f"the command says {result['status']} ({result['detail'][:120]}), in-process {mine.status}"
        if mine.status != "applied":
            return None
        done = run_git(repo, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "am", "-q",
                       *map(str, sorted(out.glob("0001-*.patch"))), env=local)
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, ["git", "am"], done.stdout, done.stderr)
        texts = {p: (repo / p).read_text() for p in pair.paths}
        return None if texts == {p: mine.texts[p] for p in pair.paths} else \
            f"its series gives other text:\n{short_diff(mine.texts, texts)}"


def sample(items: list, count: int) -> list:
    """`count` of `items`, evenly spread, the first and the last among them."""
    if count >= len(items):
        return list(items)
    return [items[round(i * (len(items) - 1) / max(count - 1, 1))] for i in range(count)]


def speed(inputs: list[tuple[str, dict, dict]]) -> dict[str, float]:
    """CPU seconds to parse and port every diff of setting 1 (its files in memory), and the engine's peak
    memory (`engine peak MB`, Python's allocations traced in a pass of its own): the engine in this
    process (time.process_time) without and with the pre-image, the rewrite cache off (setting 1
    filled it: a warm cache would measure reading it back), and `git apply` in its scratch folder
    (its processes' CPU, getrusage(RUSAGE_CHILDREN): the folder's writes not counted)."""
    was = os.environ.get("FIXMONO_REWRITE_CACHE")
    os.environ["FIXMONO_REWRITE_CACHE"] = "off"
    try:
        cpu = {}
        for tool in (ENGINE, ENGINE_PRE):
            start = time.process_time()
            for patch, files, pre in inputs:
                engine(patch, files, pre_images=pre if tool == ENGINE_PRE else None)
            cpu[tool] = time.process_time() - start
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for patch, files, _ in inputs:
            text_tool(TOOLS["git apply"], patch, files)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu["git apply"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        tracemalloc.start()  # a pass of its own: tracing slows what it traces, the CPU seconds above are without it
        try:
            for patch, files, pre in inputs:
                engine(patch, files, pre_images=pre)
            cpu["engine peak MB"] = tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()
        return cpu
    finally:
        if was is None:
            del os.environ["FIXMONO_REWRITE_CACHE"]
        else:
            os.environ["FIXMONO_REWRITE_CACHE"] = was


def speed_line(count: int, cpu: dict[str, float]) -> str:
    """The CPU seconds side by side, as ratios to `git apply`'s, and this process's peak memory."""
    plain = cpu["git apply"]
    ratio = {tool: f" ({seconds / plain:.1f}x git apply's)" if plain > 0 else "" for tool, seconds in cpu.items()}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return (f"Speed: the {count} release-branch diffs, CPU seconds: {ENGINE} {cpu[ENGINE]:.2f} s{ratio[ENGINE]}, "
            f"{ENGINE_PRE} {cpu[ENGINE_PRE]:.2f} s{ratio[ENGINE_PRE]}, git apply {plain:.2f} s (its processes); "
            f"peak memory: the engine's own {cpu['engine peak MB']:.0f} MB (traced, above its inputs), this process's "
            f"{peak:.0f} MB (the inputs of all {count} diffs and the benchmark's rows held too)")


# --- tables --------------------------------------------------------------------------------------

def usable(row: dict, tool: str) -> bool:
    return row[tool] == "clean" and not row.get(f"{tool} unusable")


def release_table(rows: list[dict], title: str) -> str:
    n = len(rows)
    trivial = [r for r in rows if r["trivial"]]
    out = [f"#### {title}: release branch, {n} backports ({len(trivial)} with the same patch text)\n",
           "| tool | identical | wrong | wrong, explained by the backport | no | identical among the non-trivial |",
           "|---|---|---|---|---|---|"]
    for tool in ALL:
        c = Counter(r[tool] for r in rows)
        hard = [r for r in rows if not r["trivial"]]
        out.append(f"| {tool} | {c['identical']}/{n} ({100 * c['identical'] / max(n, 1):.0f}%) | {c['wrong']} | "
                   f"{c['wrong explained']} | {c['no']} | "
                   f"{sum(r[tool] == 'identical' for r in hard)}/{len(hard)} |")
    eng = Counter(r["engine status"] for r in rows)
    out.append(f"\nengine: {', '.join(f'{k} {v}' for k, v in sorted(eng.items()))}; its text broken (parse/scope/"
               f"pyflakes) {sum(bool(r['engine broken']) for r in rows)}; **differs from git apply where git apply "
               f"applies: {sum(r['differs from git apply'] for r in rows)}**; git apply applies and the engine "
               f"gives no text: {sum(r['git apply applied, engine no'] for r in rows)}; with the pre-image, differs "
               f"from git apply where git apply applies: {sum(r['pre-image differs from git apply'] for r in rows)}\n")
    return "\n".join(out)


def older_table(rows: list[dict], title: str) -> str:
    tried = [r for r in rows if not r.get("missing file")]
    present = [r for r in tried if r["removed lines present"]]
    n = len(tried)
    out = [f"#### {title}: older releases, {n} attempts ({len(rows) - n} with a file missing, not tried; "
           f"{len(present)} with every removed line there)\n",
           "| tool | clean | usable (clean, its uses in the release) | broken (parse/scope/pyflakes) "
           "| no: not-applicable | no: failed | no: already-applied | clean where every removed line is there |",
           "|---|---|---|---|---|---|---|---|"]
    for tool in ALL:
        c = Counter(r[tool] for r in tried)
        fit = sum(usable(r, tool) for r in tried)
        out.append(f"| {tool} | {c['clean']}/{n} ({100 * c['clean'] / max(n, 1):.0f}%) | {fit}/{c['clean']} | "
                   f"{c['broken']} | "
                   f"{c['not-applicable']} | {c['failed']} | {c['already-applied']} | "
                   f"{sum(r[tool] == 'clean' for r in present)}/{len(present)} |")
    return "\n".join(out) + "\n"


def evidence_table(rows: list[dict], title: str, outcomes: tuple[str, ...]) -> str:
    """The engine given the pre-image: its outcomes by the class of the evidence that placed (or did
    not place) its hunks; `usable` among the outcomes: clean and its uses in the release."""
    rows = [r for r in rows if not r.get("missing file")]
    key = f"{ENGINE_PRE} evidence class"
    found = Counter(r[key] for r in rows)
    out = [f"#### {title}: `{ENGINE_PRE}` by the evidence that placed its hunks, {len(rows)} attempts\n",
           "| evidence | attempts | " + " | ".join(outcomes) + " |", "|---" * (len(outcomes) + 2) + "|"]
    for name in [*EVIDENCE.values(), NO_EVIDENCE, *sorted(set(found) - {*EVIDENCE.values(), NO_EVIDENCE})]:
        mine = [r for r in rows if r[key] == name]
        c = Counter(r[ENGINE_PRE] for r in mine)
        c["usable"] = sum(usable(r, ENGINE_PRE) for r in mine)
        out.append(f"| {name} | {len(mine)} | " + " | ".join(str(c[o]) for o in outcomes) + " |")
    return "\n".join(out) + "\n"


# why the engine given the pre-image has no usable result, by what git's own three-way merge did on the
# attempt (`git apply --3way` with the diff's pre-image blob as its base): the first class that holds
GAP = (("the fix is there already (the engine: already-applied)", lambda r: r[ENGINE_PRE] == "already-applied"),
       ("git's merge conflicts: the release changed the lines the diff edits, or lacks them",
        lambda r: r[THREE_WAY] == "failed" and GIT_CONFLICTS in (r.get(f"{THREE_WAY} why") or "")),
       ("git's merge fails otherwise", lambda r: r[THREE_WAY] == "failed"),
       ("git's merge is broken (parse, scope or an undefined name)", lambda r: r[THREE_WAY] == "broken"),
       ("git's merge is clean, but uses what the release lacks", lambda r: not usable(r, THREE_WAY)),
       ("git's merge is clean and usable", lambda r: True))


def merges_once_normalised(gitdir: str, row: dict) -> bool:
    """git's three-way merge of the attempt's Python files (the release, the diff's pre-image and post-image)
    is clean once each is normalised by `ast.unparse` (formatting and comments gone): the conflict was
    formatting only, which a port by syntax can resolve; False where a file does not parse."""
    for path in row["paths"]:
        texts = [show(gitdir, rev, path) for rev in (row["target"], f"{row['main']}^", row["main"])]
        try:
            release, pre, post = (ast.unparse(ast.parse(text)) + "\n" for text in texts)
        except (SyntaxError, ValueError, TypeError):  # (TypeError: a file one of them lacks)
            return False
        with tempfile.TemporaryDirectory() as tmp:
            names = []
            for name, text in (("release", release), ("pre", pre), ("post", post)):
                (Path(tmp) / name).write_text(text)
                names.append(str(Path(tmp) / name))
            if run_git(None, "merge-file", "-p", *names).returncode:
                return False
    return True


def gap_table(rows: list[dict], gitdirs: dict[str, str] | None = None) -> str:
    """The older attempts without a usable result from the engine given the pre-image, each in the first
    GAP class that holds it, and every one of them that some tool made usable, listed (case by case).
    With `gitdirs` ({repo: GITDIR}): also how many of git's conflicts were formatting only."""
    tried = [r for r in rows if not r.get("missing file")]
    gap = [r for r in tried if not usable(r, ENGINE_PRE)]
    others = [t for t in ALL if t != ENGINE_PRE]
    out = [f"#### Older releases: the {len(gap)} of {len(tried)} attempts without a usable result from "
           f"`{ENGINE_PRE}`, by what `{THREE_WAY}` (its base the diff's pre-image blob) did\n",
           "| class | attempts | the engine: failed / not-applicable / clean, not usable | some other tool usable |",
           "|---|---|---|---|"]
    listed = []
    for name, holds in GAP:
        mine = [r for r in gap if holds(r)]
        gap = [r for r in gap if not holds(r)]
        c = Counter(r[ENGINE_PRE] for r in mine)
        saved = [r for r in mine if any(usable(r, t) for t in others)]
        listed += saved
        out.append(f"| {name} | {len(mine)} | {c['failed']} / {c['not-applicable']} / {c['clean']} | {len(saved)} |")
        if gitdirs and name.startswith("git's merge conflicts"):
            python = [r for r in mine if all(p.endswith(".py") for p in r["paths"]) and r["repo"] in gitdirs]
            merged = sum(merges_once_normalised(gitdirs[r["repo"]], r) for r in python)
            out.append(f"| ... of them, git's merge clean once the three texts are normalised by `ast.unparse` "
                       f"(formatting and comments only) | {merged} of {len(python)} (Python) | | |")
    out.append(f"\nThe {len(listed)} where another tool's result is usable (usable is not right: read each):")
    out += list(dict.fromkeys(  # (an attempt of two release branches with one main commit: once)
        f"- {r['repo']} {r['main'][:10]} @ {r['target']}: {', '.join(t for t in others if usable(r, t))}; "
        f"the engine {r[ENGINE_PRE]}: {(r.get(f'{ENGINE_PRE} why') or '')[:160]}" for r in listed))
    return "\n".join(out) + "\n"


def verdict_now(gitdir: str, row: dict, tool: str) -> tuple[str, str]:
    """An earlier --json row's attempt through the engine column `tool` with the code here: (its verdict as
    the row would say it, folding `wrong explained` into `wrong` and an unusable clean text into
    `clean-unusable`; why, where it is not applied)."""
    pair = Pair(*(row[f.name] for f in dataclasses.fields(Pair)))
    pair = dataclasses.replace(pair, paths=tuple(pair.paths))
    patch, wanted = main_diff(gitdir, pair)
    target = row["target"] if row["setting"] == "older" else pair.parent
    files = {p: show(gitdir, target, p) for p in pair.paths}
    read = tree_at(gitdir, target)
    pre = pre_images(gitdir, pair)
    result = engine(patch, files, read, pre if tool == ENGINE_PRE else None)
    if row["setting"] == "release":
        truth = {p: show(gitdir, pair.pick, p) for p in pair.paths}
        return ("identical" if result.texts == truth else "wrong") if result.status == "applied" else "no", \
            result.message
    verdict, why = older_verdict(result, files, wanted)
    if verdict == "clean" and unusable(read, files, result.texts, pre):
        verdict = "clean-unusable"
    return verdict, why or result.message


def rerun(rows_file: str, gitdirs: list[str], tools: list[str]) -> int:
    """--rerun: each attempt of an earlier --json file through the engine columns again, with the code here;
    the counts before and after, and each attempt whose verdict changed. Exit 1 where one changed."""
    rows = json.loads(Path(rows_file).read_text())
    by_repo = {repo_name(g): g for g in gitdirs}
    changed = 0
    for tool in tools:
        before, after = Counter(), Counter()
        for row in rows:
            if row.get("missing file") or tool not in row or row["repo"] not in by_repo:
                continue
            old = row[tool].replace("wrong explained", "wrong")
            if old == "clean" and row.get(f"{tool} unusable"):
                old = "clean-unusable"
            new, why = verdict_now(by_repo[row["repo"]], row, tool)
            before[(row["setting"], old)] += 1
            after[(row["setting"], new)] += 1
            if new != old:
                changed += 1
                print(f"{tool} | {row['setting']} | {row['repo']} {row['main'][:10]} @ "
                      f"{row.get('target', row['branch'])} | {old} -> {new} | {why[:200]}")
        for setting in ("release", "older"):
            print(f"{tool}, {setting}: before " + ", ".join(f"{v} {n}" for (s, v), n in sorted(before.items())
                                                          if s == setting)
                  + "; now " + ", ".join(f"{v} {n}" for (s, v), n in sorted(after.items()) if s == setting))
    print(f"{changed} verdict(s) changed")
    return 1 if changed else 0


def print_tables(release: list[dict], older: list[dict], gitdirs: list[str]) -> None:
    repos = list(dict.fromkeys(r["repo"] for r in release))
    print(f"### Upstream backports: {len(release)} pairs in {len(repos)} repositories"
          + ("" if pyflakes_check else " (pyflakes not importable: no undefined-name check)") + "\n")
    print("| repository | pairs | by cherry-pick -x | by subject | same patch text |\n|---|---|---|---|---|")
    for repo in repos:
        mine = [r for r in release if r["repo"] == repo]
        print(f"| {repo} | {len(mine)} | {sum(r['how'] == 'cherry-pick -x' for r in mine)} | "
              f"{sum(r['how'] == 'subject' for r in mine)} | {sum(r['trivial'] for r in mine)} |")
    print()
    for repo in repos:
        print(release_table([r for r in release if r["repo"] == repo], repo))
    print(release_table(release, "All repositories"))
    print(evidence_table(release, "Release branches", ("identical", "wrong", "wrong explained", "no")))
    if older:
        for repo in repos:
            print(older_table([r for r in older if r["repo"] == repo], repo))
        print(older_table(older, "All repositories"))
        print(evidence_table(older, "Older releases", ("clean", "usable", "broken", "failed", "not-applicable",
                                                       "already-applied")))
        print(gap_table(older, {repo_name(g): g for g in gitdirs}))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("gitdirs", nargs="+", metavar="GITDIR", help="a bare clone of an upstream repository")
    p.add_argument("--limit", type=int, help="at most N pairs per repository (the first in branch order)")
    p.add_argument("--verbose", action="store_true", help="print each engine wrong/broken case with a diff")
    p.add_argument("--json", metavar="FILE", help="write one row per attempt here")
    p.add_argument("--no-older", action="store_true", help="setting 1 and the speed only")
    p.add_argument("--lang", choices=sorted(LANGUAGES), default="python",
                   help="the main commits kept: those modifying only Python files (the default) or only C/C++ "
                        "files (there `clean`: no new tree-sitter parse error, no added line in another function)")
    p.add_argument("--cli", type=int, default=0, metavar="N",
                   help="also run N release-branch pairs through the real command and check it agrees")
    p.add_argument("--rerun", metavar="ROWS", help="instead: rerun the engine columns of an earlier --json file's "
                   "attempts with the code here and print what changed (its GITDIRs given as above)")
    p.add_argument("--tool", action="append", choices=[ENGINE, ENGINE_PRE],
                   help="with --rerun: the column(s) to rerun (default both)")
    p.add_argument("--tables", metavar="ROWS", help="instead: print the tables of an earlier --json file's rows "
                   "(no port is run; its GITDIRs are read for the formatting-only count of the conflicts)")
    args = p.parse_args(argv)
    if args.rerun:
        return rerun(args.rerun, args.gitdirs, args.tool or [ENGINE_PRE, ENGINE])
    if args.tables:
        rows = json.loads(Path(args.tables).read_text())
        print_tables([r for r in rows if r["setting"] == "release"], [r for r in rows if r["setting"] == "older"],
                     args.gitdirs)
        return 0
    if pyflakes_check is None:
        print("note: pyflakes is not importable: the older-release check runs without its undefined-name test",
              file=sys.stderr)
    release, older, inputs, picked = [], [], [], []
    for gitdir in args.gitdirs:
        pairs = select_pairs(gitdir, LANGUAGES[args.lang])[:args.limit]
        print(f"{repo_name(gitdir)}: {len(pairs)} pairs", file=sys.stderr, flush=True)
        for n, pair in enumerate(pairs, 1):
            patch, wanted = main_diff(gitdir, pair)
            row = release_branch_rows(gitdir, pair, patch, wanted, args.verbose)
            release.append(row)
            picked.append((gitdir, pair, patch))
            inputs.append((patch, {p: show(gitdir, pair.parent, p) for p in pair.paths}, pre_images(gitdir, pair)))
            if not args.no_older:
                older += older_rows(gitdir, pair, patch, wanted, args.verbose)
            print(f"  {n}/{len(pairs)} {pair.branch} {pair.main[:10]}: " + ", ".join(f"{t} {row[t]}" for t in ALL)
                  + (f" ({row['engine message'][:120]})" if row["engine message"] else ""), file=sys.stderr, flush=True)
    cpu = speed(inputs)
    print_tables(release, older, args.gitdirs)
    print(speed_line(len(inputs), cpu))
    disagree = []
    if args.cli > 0:
        chosen = sample(picked, args.cli)
        for gitdir, pair, patch in chosen:
            if why := through_cli(gitdir, pair, patch):
                disagree.append(f"{pair.repo} {pair.branch} {pair.main[:10]}: {why}")
        print(f"CLI: {len(chosen)} release-branch pair(s) through `python -m fixmono make-patch --diff`: "
              f"{len(chosen) - len(disagree)} agree with the in-process engine (status and text), "
              f"{len(disagree)} do not" + "".join(f"\n- {line}" for line in disagree))
    if args.json:
        Path(args.json).write_text(json.dumps(release + older, indent=1, default=list))
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
