"""`fixmono import`: the patches a team already carries, each made a fix folder.

    fixmono import PATCH... | --series DIR | --from URL | --from-commit CHECKOUT@REV
                   [--upstream PROJECT] [--name NAME] [--into ROOT] [--json]
    tools/import_patch ...   (the same, into the checkout the launcher is in)

Per patch (a `git format-patch` mail, a plain `diff -u`, or an mbox of
several mails): fixes/<project>/<name>/ under ROOT (by default the checkout
this command is from, else the current folder: a fixmono checkout) holding the diff as fix.patch, a fix.py that
declares it in a few lines (fixmono.engines.imported.declare), a README
skeleton with the fields to fill, BUILD.bazel (`fix_module()`) and
__init__.py. Discovery, the catalogue tests, make_patch and the wheel pick
it up with no other edit. Before anything is written each patch's cases are
run (the diff's pre-image must take it, its post-image must say
already-applied); any problem is one line and exit 2 with nothing written.
Folders appear whole: each is written beside its place and renamed in.
"""
from __future__ import annotations

import keyword
import os
import re
import shutil
import signal
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import fixmono
from fixmono.apply.contract import apply_change
from fixmono.cli.early import exit_quietly
from fixmono.cli.guard import ArgumentParser, run_command
from fixmono.cli.imported_files import folder_files, next_steps
from fixmono.engines.imported import PATCH, diff_fix_of
from fixmono.engines.port import project_of, slug
from fixmono.model.errors import FixDeclarationError, UserError, one_line
from fixmono.model.patchfile import PatchFile, at_strip, decode, parse_patch, series_sources, split_mails
from fixmono.model.projects import PROJECTS, named
from fixmono.model.registry import fix_files
from fixmono.sources.git import clean_env, run_git
from fixmono.sources.index import Deadline, read_capped
from fixmono.sources.scratch import INTERRUPTS, abandoned, made_and_claimed, pause_point, remove_if_empty

PAUSE_POINTS = ("import-staged", "import-placed")  # tests kill an import at each (scratch.pause_point)
PATCH_LIMIT = 16 << 20  # bytes of one --from answer
GITHUB = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(commit|pull)/\w+/?$")


@dataclass(frozen=True)
class Imported:
    folder: Path  # relative to the root
    fix_id: str
    files: int
    hunks: int
    kind: str = "Python, imported"  # the top README's "kind" column



def own_checkout() -> Path | None:
    """The repository this fixmono runs from (tools/fixmono/ beside fixes/), None for an installed wheel."""
    root = Path(fixmono.__file__).resolve().parents[2]
    return root if (root / "fixes").is_dir() and (root / "tools" / "fixmono").is_dir() else None

def parse_args(argv: list[str]):
    p = ArgumentParser(prog="fixmono import", description="make fix folders of patch files")
    p.add_argument("patches", nargs="*", metavar="PATCH", help="patch files ('-': stdin); an mbox of several mails "
                                                               "gives a fix per mail")
    p.add_argument("--series", metavar="DIR", help="a quilt folder: the patches its `series` file lists, in order")
    p.add_argument("--from", dest="url", metavar="URL", help="a patch over HTTP(S) (a GitHub commit or pull "
                                                              "request page URL gets its .patch)")
    p.add_argument("--from-commit", metavar="CHECKOUT@REV", help="a commit (or A..B range) of a git checkout")
    p.add_argument("--upstream", metavar="PROJECT", help="the project, by its name or its PyPI name (default: from "
                                                          "the patch's paths)")
    p.add_argument("--name", help="the folder name (one patch only; default: from its subject)")
    p.add_argument("--into", default=None, metavar="ROOT", help="the fixmono checkout to write into (default: the "
                                                                 "one this command is from, else .)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.into is None:  # as tools/new_fix: the checkout this command belongs to (from anywhere), else here
        args.into = str(own_checkout() or ".")
    if not (args.patches or args.series or args.url or args.from_commit):
        raise UserError("give PATCH files, --series DIR, --from URL or --from-commit CHECKOUT@REV")
    if args.upstream is not None:
        project = named(args.upstream)
        if project is None or not project.markers:
            raise UserError(f"--upstream {args.upstream}: not a project of the catalogue (known: "
                            f"{', '.join(p.name for p in PROJECTS.values() if p.markers)}, or their PyPI names)")
        args.upstream = project.name
    if args.name is not None and not re.fullmatch(r"[a-z][a-z0-9_]*", args.name):
        raise UserError(f"--name {args.name!r}: a folder name in snake_case (a-z, 0-9, _)")
    if args.name is not None and keyword.iskeyword(args.name):
        raise UserError(f"--name {args.name!r}: a Python keyword cannot name a package (try fix_{args.name})")
    if not (Path(args.into) / "fixes" / "__init__.py").is_file():
        raise UserError(f"{args.into}: not a fixmono checkout (no fixes/__init__.py); give --into ROOT")
    return args


def sources(args) -> list[tuple[str, bytes, int | None]]:
    """(name, bytes, strip level a quilt series gives) of every patch the arguments name, in order."""
    if args.patches.count("-") > 1:
        raise UserError("- (stdin) can be given once")
    found = series_sources(args.patches, sys.stdin.buffer)
    if args.series:
        if not Path(args.series).is_dir():
            raise UserError(f"--series {args.series}: not a folder")
        found += series_sources([args.series], sys.stdin.buffer)
    for name, data in ([(args.url, download(args.url))] if args.url else []) + \
            ([(args.from_commit, commit_patches(args.from_commit))] if args.from_commit else []):
        mails = split_mails(data)
        found += [(f"{name}#{n}" if len(mails) > 1 else name, mail, None) for n, mail in enumerate(mails, 1)]
    return found


def download(url: str) -> bytes:
    """A patch over HTTP(S); a GitHub commit or pull request page URL is asked for its .patch."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise UserError(f"--from {url}: an http:// or https:// URL")
    if GITHUB.match(url):
        url = url.rstrip("/") + ".patch"
    deadline = Deadline()
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=deadline.timeout()) as answer:
            return read_capped(answer, PATCH_LIMIT, deadline)
    except (OSError, ValueError) as err:  # URLError, HTTPError, timeouts, a too long answer
        raise UserError(f"--from {url}: {one_line(err)}") from None


def commit_patches(spec: str) -> bytes:
    """`git format-patch` of CHECKOUT@REV (one commit, or a range A..B)."""
    checkout, at, rev = spec.rpartition("@")
    if not at or not checkout or not rev or rev.startswith("-"):
        raise UserError(f"--from-commit {spec!r}: give CHECKOUT@REV (a commit, or a range A..B)")
    if not Path(checkout).is_dir():
        raise UserError(f"--from-commit: {checkout}: no such folder")
    what = [rev] if ".." in rev else ["-1", rev]
    proc = run_git(Path(checkout), "format-patch", "--stdout", "--no-signature", *what, "--",
                   env=clean_env(GIT_LITERAL_PATHSPECS="0"), binary=True)
    if proc.returncode or not proc.stdout.strip():
        raise UserError(f"--from-commit {spec}: {one_line(proc.stderr) or 'no commits in that range'}")
    return proc.stdout


STOP_WORDS = {"to", "the", "a", "an", "of", "for", "in", "on", "and", "or", "with", "by", "at", "from", "as"}
NAME_WORDS, NAME_CHARS = 6, 40


def folder_name(patch: PatchFile, given: str | None) -> str:
    """`given`, else the subject's first words (whole words, at most NAME_WORDS
    and NAME_CHARS) less the stop words that would end it mid-phrase; a name
    Python cannot import as a package (a digit first, a keyword) gets `fix_`."""
    if given:
        return given
    words = slug(patch).removeprefix("diff-").split("-")
    name = words[0][:NAME_CHARS]
    for word in words[1:NAME_WORDS]:
        if len(name) + 1 + len(word) > NAME_CHARS:
            break
        name += "_" + word
    while "_" in name and name.rsplit("_", 1)[1] in STOP_WORDS:
        name = name.rsplit("_", 1)[0]
    return package_name(name)


def package_name(name: str) -> str:
    return f"fix_{name}" if name[:1].isdigit() or keyword.iskeyword(name) else name


def taken_ids(root: Path) -> set[str]:
    """The fix ids the checkout's fix.py files declare (read as text: nothing is imported)."""
    return {m for p in fix_files(root / "fixes")
            for m in re.findall(r'\bid\s*=\s*"([a-z0-9-]+)"', p.read_text(encoding="utf-8", errors="replace"))}


def problems(fix) -> list[str]:
    """What the new fix's own cases say (the tests CI runs on it)."""
    found = []
    for case in fix.cases:
        change = next(c for c in fix.changes if c.path == case.path)
        outcome = apply_change(change, case.before)
        if outcome.status.value != case.expect or (case.after is not None and outcome.new_text != case.after):
            found.append(f"{case.name}: {outcome.status.value}: {outcome.detail}")
    return found


def plan(args) -> list[tuple[Path, dict[str, str | bytes], Imported]]:
    """Every folder to write, checked before any is."""
    root, ids, out = Path(args.into), taken_ids(Path(args.into)), []
    read = sources(args)
    if args.name and len(read) > 1:
        raise UserError(f"--name names one folder; these are {len(read)} patches")
    for name, data, level in read:
        try:
            patch = parse_patch(decode(name, data), name)
            patch = patch if level is None else at_strip(patch, level, forced=True)
        except UserError as err:
            raise UserError(one_line(err)) from None
        whole = [f"{f.path} ({f.kind})" for f in patch.files if f.kind in ("added", "deleted", "renamed")]
        if whole:  # the catalogue's tests need a fixture per file; a file that is absent has none yet
            raise UserError(f"{name}: {', '.join(whole)}: import takes changes to files in place only so far "
                            "(make-patch --diff ports this patch); nothing was written")
        project = args.upstream or project_of(patch)
        folder = Path("fixes") / project.replace("-", "_") / folder_name(patch, args.name)
        fix_id = f"{project}-{folder.name.replace('_', '-')}"
        if (root / folder).exists() or any(folder == f for f, _, _ in out):
            raise UserError(f"{folder}: already there (give another --name); nothing was written")
        if fix_id in ids:
            raise UserError(f"{fix_id}: a fix of the catalogue has that id (give another --name); nothing was written")
        ids.add(fix_id)
        try:
            fix = diff_fix_of(patch, fix_id, project)
            found = problems(fix)
        except FixDeclarationError as err:
            found = [str(err)]
        if found:
            raise UserError(f"{name}: {found[0]}; nothing was written")
        files = {PATCH: data, **folder_files(patch, fix, folder, name)}
        kind = "Python, imported" if all(c.path.endswith((".py", ".pyi")) for c in fix.changes) else "imported"
        out.append((folder, files, Imported(folder, fix_id, len(fix.changes), sum(c.sites for c in fix.changes),
                                            kind)))
    return out


def write(root: Path, folders: list[tuple[Path, dict[str, str | bytes]]], rows: list[str]) -> bool:
    """Each folder written beside its place, then, with signals held, renamed in
    and the rows added to the top README's table (a temporary file swapped in):
    all of it or none (a failure takes back what was renamed). Returns whether
    the README had the table."""
    readme = root / "README.md"
    try:
        text = readme.read_bytes().decode("utf-8") if readme.exists() else None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{readme}: cannot read it ({one_line(err)}); nothing was written") from None
    table = text is not None and README_TABLE in text.replace("\r\n", "\n")
    staged, placed, locks = [], [], []
    try:
        sweep_staging(root)
        for folder, files in folders:
            holder = (root / folder).with_name(f".{folder.name}.new-{os.getpid()}")
            holder.parent.mkdir(parents=True, exist_ok=True)
            holder, lock = made_and_claimed(lambda: holder.mkdir() or holder, STAGING_MARKER)
            locks.append(lock)
            staging = holder / "new"
            staged.append(holder)
            staging.mkdir()
            for name, content in files.items():
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                (staging / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        pause_point("import-staged")
        held = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)  # from here to the end: whole, or not at all
        try:
            for holder, (folder, _) in zip(staged, folders):
                (holder / "new").rename(root / folder)
                placed.append(root / folder)
            pause_point("import-placed")
            if table and rows:
                swap_in(readme, with_rows(text, rows))
        except BaseException:
            for target in placed:
                shutil.rmtree(target, ignore_errors=True)
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    except OSError as err:
        raise UserError(f"{err.filename or root}: cannot write ({err.strerror or one_line(err)}); nothing was "
                        "written") from None
    finally:
        for holder in staged:
            shutil.rmtree(holder, ignore_errors=True)
        for lock in locks:
            os.close(lock)
    return table


STAGING_MARKER = ".fixmono-import-staging"  # in each holder, locked by the import writing there


def sweep_staging(root: Path) -> None:
    """Remove the holders (fixes/<project>/.<name>.new-<pid>/) killed imports
    left: marked, and nobody holds the marker's lock (as make_patch's --out
    sweeps its own); an older import's, unmarked, where that pid is gone."""
    for holder in (root / "fixes").glob("*/.*.new-*"):
        if holder.is_symlink() or not holder.is_dir() or remove_if_empty(holder):
            continue
        marker = holder / STAGING_MARKER
        if abandoned(marker) if marker.exists() else owner_gone(holder):
            shutil.rmtree(holder, ignore_errors=True)
    for temporary in root.glob(".README.md.new-*"):  # swap_in's, of an import killed in that instant
        if temporary.is_file() and not temporary.is_symlink() and owner_gone(temporary):
            temporary.unlink(missing_ok=True)


def owner_gone(path: Path) -> bool:
    """Whether the process whose pid ends `path`'s name (`….new-<pid>`) has ended."""
    pid = path.name.rpartition(".new-")[2]
    return pid.isdigit() and not alive(int(pid))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's process
        return True
    return True


def swap_in(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.new-{os.getpid()}")
    try:
        temporary.write_bytes(text.encode("utf-8"))
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


README_TABLE = "| fix | upstream, releases hit | kind | README |\n|---|---|---|---|\n"  # tests/test_docs.py reads it


def readme_row(fix_id: str, folder: Path, kind: str) -> str:
    return f"| {fix_id} | (fill in: upstream file, releases hit, issue) | {kind} | [README]({folder.as_posix()}/README.md) |"


def with_rows(text: str, rows: list[str]) -> str:
    """`text` (the top README) with `rows` after the last row of its table of fixes, in its own line ends."""
    eol = "\r\n" if "\r\n" in text else "\n"
    lines = text.split(eol)
    header = README_TABLE.split("\n")[0]
    at = lines.index(header) + 2
    while at < len(lines) and lines[at].startswith("|"):
        at += 1
    return eol.join(lines[:at] + rows + lines[at:])


def work(args):
    root = Path(args.into)
    planned = plan(args)
    write(root, [(folder, files) for folder, files, _ in planned],
          [readme_row(made.fix_id, folder, made.kind) for folder, _, made in planned])
    return {"imported": [{"folder": str(m.folder), "fix": m.fix_id, "files": m.files, "hunks": m.hunks}
                         for _, _, m in planned]}, 0


def render(made: dict, args) -> str:
    lines = [f"{m['folder']}/: {m['fix']} ({m['files']} file(s), {m['hunks']} hunk(s)); its cases pass"
             for m in made["imported"]]
    for m in made["imported"]:
        lines += next_steps(m["folder"], m["fix"])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return run_command("fixmono import", argv, parse_args, work, render)


if __name__ == "__main__":
    exit_quietly(main())
