"""Fix an installed environment in place (`fixmono patch-env`), and undo it.

The same run as make_patch (apply.run on the installed files, read as text),
so an install that has the fix upstream is `already-applied` and left alone.
What can refuse is checked before anything is written: a fix that changes
compiled code, a project that is not installed or is outside the range the fix
is checked on, a file that no longer matches its RECORD hash (changed since
install: --force), a folder that cannot be written, a filesystem without
the free space the run needs (space.py). A fix that fails means nothing is
written. The writes go through the journal (journal.py); a run that fails
midway (a disk that fills anyway) puts back everything it wrote.
"""
from __future__ import annotations

import csv
import dataclasses
import os
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from fixmono.apply.contract import apply_change
from fixmono.apply.run import run
from fixmono.model.errors import UserError, disk_full
from fixmono.model.fix import Fix
from fixmono.model.outcome import Status
from fixmono.model.patchfile import unified_diff
from fixmono.model.projects import PROJECTS, checked_range
from fixmono.output.confine import confined, own_site, relative_to_site
from fixmono.output.journal import (JOURNAL_DIR, Journal, begin, compile_again, finish, json_text, locked,
                                    patch_env_command, record_entry, sha256, undo_on_error)
from fixmono.output.space import out_of_space, require_space
from fixmono.sources.installed import Environment, InstalledFiles, dist_name, installed_path
from fixmono.sources.verify import record_hash

PATCHED, ALREADY, BEFORE, UNDONE = "patched", "already-applied", "patched-by-fixmono", "undone"
NOT_APPLICABLE, FAILED, SKIPPED, NOT_PATCHED = "not-applicable", "failed", "skipped", "not-patched-by-fixmono"


@dataclass
class FixResult:
    fix: str
    result: str
    detail: str
    files: list[str] = field(default_factory=list)  # installed paths it writes


@dataclass
class Plan:
    """What a patch-env or --undo run is to write: per site, per file (its path
    under the site) the bytes it will hold and its fixes afterwards."""

    results: list[FixResult] = field(default_factory=list)
    targets: dict = field(default_factory=lambda: defaultdict(dict))  # site -> rel -> (bytes, fixes)
    dists: dict = field(default_factory=dict)  # (site, rel) -> what the journal keeps of a new file's distribution
    notes: list[str] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        """A fix failed or does not apply: nothing is written."""
        return any(r.result in (FAILED, NOT_APPLICABLE) for r in self.results)


def installed_changes(fix: Fix) -> tuple:
    """The fix's changes to files its distribution installs (an optional change
    to another distribution's file is left to that one)."""
    project = PROJECTS[fix.upstream]
    return tuple(c for c in fix.changes if installed_path(project, c.path, Path("/")) is not None)


def refusal(fix: Fix, env: Environment, any_version: bool) -> str | None:
    """Why `fix` cannot go into `env`'s installed files, or None."""
    compiled = [c.path for c in fix.changes if c.transform.engine != "python"]
    if compiled:
        return (f"changes compiled code ({', '.join(compiled)}), which an installed environment does not hold as "
                "source: rebuild from make-patch's series (or carry it into your wheel build)")
    whole = [c.path for c in fix.changes if hasattr(c.transform, "place")]
    if whole:  # the journal and RECORD hold changed files, not new or deleted ones
        return f"adds or deletes files ({', '.join(whole)}), which patch-env does not do yet: make-patch is the way"
    installed = {c.path for c in installed_changes(fix)}
    elsewhere = [c.path for c in fix.changes if c.path not in installed and not c.optional]
    if elsewhere:
        return f"changes files its wheel does not install ({', '.join(elsewhere)}): make-patch is the way"
    project = PROJECTS[fix.upstream]
    dist = dist_name(project)
    version = env.dist(dist)["version"]
    if version is None:
        return f"{dist} is not installed in {env.prefix}"
    if not env.owns(env.site(project)):
        return (f"{dist} {version} is installed outside this environment ({env.site(project)}: a system site or a "
                f"folder a .pth adds); patch the environment it belongs to, with that one's --python")
    site = env.site(project)
    try:
        own_site(site, env.prefix)
        for change in installed_changes(fix):  # the file, and the bytecode folder beside it
            rel = relative_to_site(site, installed_path(project, change.path, site))
            confined(site, rel)
            confined(site, rel.rpartition("/")[0] + "/__pycache__")
    except UserError as err:
        return str(err).removesuffix("; nothing was changed")
    if not project.markers:  # a diff's project of its own: no range of the catalogue's to be outside of
        return None
    spec = checked_range(project)
    try:
        inside = spec is not None and spec.contains(Version(version), prereleases=True)
    except InvalidVersion:
        inside = False
    if not inside and not any_version:
        return (f"{dist} {version} is outside the range this fix is checked on ({spec or 'none'}); `fixmono "
                f"make-patch {fix.id} --upstream pip:{dist}=={version.split('+')[0]} --check` shows what the "
                "transformation finds there; --any-version to patch it anyway")
    return None


def writable(folder: Path) -> str | None:
    """None, or why nothing can be written in `folder` (tried, not guessed from
    mode bits: root, ACLs and read-only mounts all answer the same way)."""
    probe = folder / f".fixmono-write-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        if disk_full(err):  # writable, but full: said as such by execute
            raise
        return f"{folder} is not writable ({err.strerror})"
    return None


def require_writable(folders) -> None:
    for folder in sorted(set(folders)):
        problem = writable(folder)
        if problem:
            raise UserError(f"{problem}: patch-env writes the installed files there; nothing was changed")


def forget_stale(journal: Journal) -> list[str]:
    """Entries whose file pip installed again since fixmono wrote it (a
    reinstall or an upgrade: the file matches its RECORD line): the journal no
    longer describes them. A file something else changed is never forgotten:
    its original stays for --undo --force. In memory: saved by the next write."""
    notes = []
    for rel in list(journal.files):
        if journal.state(rel) == "reinstalled":
            notes.append(f"{rel}: installed again since fixmono patched it (reinstalled?); its journal entry is "
                         "forgotten")
            journal.files.pop(rel)
    return notes


def changed_since(env: Environment, journal: Journal, rel: str) -> UserError:
    return UserError(f"{journal.site / rel}: changed by something else since fixmono patched it (it is neither what "
                     "fixmono wrote nor a file pip installed); its original and journal entry are kept: "
                     f"`{patch_env_command(env, '--undo', '--force')}` restores the original over that change; "
                     "nothing was changed")


def site_of(env: Environment, fix: Fix) -> Path:
    return env.site(PROJECTS[fix.upstream])


def plan_patch(env: Environment, fixes: list[Fix], journals: dict[Path, Journal], force: bool = False,
               any_version: bool = False, every: bool = False) -> Plan:
    """`every` (--all): a fix that cannot go in or does not apply is skipped
    and said, instead of refusing the run."""
    plan = Plan()
    groups: dict[str, list[Fix]] = defaultdict(list)
    for fix in fixes:
        why = refusal(fix, env, any_version)
        if why and not every:
            raise UserError(f"{fix.id}: {why}; nothing was changed")
        if why:
            plan.results.append(FixResult(fix.id, SKIPPED, why))
        else:
            groups[fix.upstream].append(dataclasses.replace(fix, changes=installed_changes(fix)))
    for upstream, group in groups.items():
        project = PROJECTS[upstream]
        source = InstalledFiles(project, env=env)
        journal = journals[source.site]
        for change in (c for fix in group for c in fix.changes):  # fixmono's file, changed since: never run over
            rel = relative_to_site(journal.site, source.path(change.path))
            if rel in journal.files and journal.state(rel) != "patched":
                raise changed_since(env, journal, rel)
        for outcome in run(source, group):
            fix = outcome.fix
            if outcome.status is Status.APPLIED:
                files = [add_target(plan, journal, source, path, text, fix, force)
                         for path, text in outcome.new_files.items()]
                plan.results.append(FixResult(fix.id, PATCHED, outcome.detail, files))
            elif outcome.status is Status.ALREADY_APPLIED:
                ours = [rel for rel, e in journal.files.items() if fix.id in e["fixes"]]
                if ours:
                    plan.results.append(FixResult(fix.id, BEFORE, "already patched by fixmono: " + ", ".join(ours)))
                else:
                    plan.results.append(FixResult(fix.id, ALREADY, f"the installed files contain the fix; left alone "
                                                                   f"({outcome.detail})"))
            elif outcome.status is Status.NOT_APPLICABLE and every:
                plan.results.append(FixResult(fix.id, SKIPPED, outcome.detail))
            else:
                result = NOT_APPLICABLE if outcome.status is Status.NOT_APPLICABLE else FAILED
                plan.results.append(FixResult(fix.id, result, outcome.detail))
    return plan


def add_target(plan: Plan, journal: Journal, source: InstalledFiles, path: str, text: str | None, fix: Fix,
               force: bool) -> str:
    installed = source.path(path)
    rel = relative_to_site(journal.site, installed)
    if rel not in plan.targets[journal.site]:
        if rel not in journal.files:
            plan.dists[journal.site, rel] = check_record(source, installed, rel, force)
        plan.targets[journal.site][rel] = (None, list(journal.files.get(rel, {}).get("fixes", [])))
    _, fixes = plan.targets[journal.site][rel]
    if fix.id in fixes:  # another diff of the same subject: undo could not tell them apart
        raise UserError(f"{fix.id}: {installed} holds a fix of this id already, from another diff (the same "
                        "subject); give this diff a subject of its own (its `Subject:` line); nothing was changed")
    plan.targets[journal.site][rel] = (text.encode("utf-8"), [*fixes, fix.id])
    return str(installed)


def dist_info(site: Path, dist: str, version: str) -> Path | None:
    """The dist-info folder of `dist` `version` under `site`."""
    def norm(name: str) -> str:
        return name.lower().replace("_", "-").replace(".", "-")

    for folder in site.glob("*.dist-info"):
        name, _, found = folder.name[:-len(".dist-info")].rpartition("-")
        if norm(name) == norm(dist) and found == version:
            return folder
    return None


def check_record(source: InstalledFiles, installed: Path, rel: str, force: bool) -> dict:
    """The file must be as its distribution installed it (its RECORD hash), unless --force."""
    info = dist_info(source.site, source.dist, source.version)
    record = confined(source.site, f"{info.name}/RECORD") if info else None
    line = record_entry(record, rel) if record and record.is_file() else None
    if not force:
        if line is None:
            raise UserError(f"{installed}: not listed in a RECORD of {source.dist} {source.version}, so fixmono "
                            "cannot tell whether it was changed since install; --force to patch it anyway; "
                            "nothing was changed")
        hashed = (next(csv.reader([line]))[1:2] or [""])[0]
        if hashed != record_hash(installed.read_bytes(), hashed or None):
            raise UserError(f"{installed}: differs from its RECORD hash (changed since install, by hand or another "
                            "tool); --force to patch it as it is now; nothing was changed")
    return {"dist": source.dist, "dist_version": source.version, "record_line": line,
            "dist_info": info.name if info else None, "forced": force}


def change_for(fix: Fix, rel: str, site: Path):
    project = PROJECTS[fix.upstream]
    return next((c for c in fix.changes if installed_path(project, c.path, site) == site / rel), None)


def plan_undo(env: Environment, ids: list[str] | None, known: dict[str, Fix], journals: dict[Path, Journal],
              force: bool = False) -> Plan:
    """Restore the files of the fixes `ids` (None: all): the original bytes, or
    the original with the fixes that stay applied again on top. A file
    something else changed since fixmono wrote it is refused (its original is
    kept), unless `force`: then the original goes over that change."""
    plan = Plan()
    done: dict[str, list[str]] = defaultdict(list)
    for site, journal in journals.items():
        for rel, entry in journal.files.items():
            gone = [f for f in entry["fixes"] + entry.get("pending", {}).get("fixes", [])
                    if ids is None or f in ids]
            if not gone:
                continue
            if journal.state(rel) != "patched" and not force:
                raise changed_since(env, journal, rel)
            gone = list(dict.fromkeys(gone))
            data = journal.original(rel)
            if not journal.vouched(rel):
                plan.notes.append(f"{rel}: its original is checked against the journal's own hash only (patched "
                                  "with --force: no RECORD line of its distribution vouches for those bytes)")
            staying = [f for f in entry["fixes"] if f not in gone]  # a pending entry's are not known to be there
            if len(set(staying)) < len(staying):  # (a journal an older fixmono wrote: two diffs of one subject)
                raise UserError(f"{rel}: the journal lists a fix twice ({', '.join(staying)}): two diffs of one "
                                "subject; undo them all (--undo without ids); nothing was changed")
            for fid in staying:
                change = change_for(known[fid], rel, site) if fid in known else None
                if change is None:
                    raise UserError(f"{rel}: cannot keep {fid} after undoing {', '.join(gone)} ({fid} is not in this "
                                    f"catalogue); undo {fid} too; nothing was changed")
                outcome = apply_change(change, data.decode("utf-8"))
                if outcome.status is Status.APPLIED:
                    data = outcome.new_text.encode("utf-8")
                elif outcome.status is not Status.ALREADY_APPLIED:
                    raise UserError(f"{rel}: {fid} does not apply without {', '.join(gone)} ({outcome.detail}); "
                                    f"undo both; nothing was changed")
            plan.targets[site][rel] = (data, staying)
            for fid in gone:
                done[fid].append(str(site / rel))
    for fid in (ids or sorted(done)):
        if done.get(fid):
            plan.results.append(FixResult(fid, UNDONE, "restored: " + ", ".join(done[fid]), done[fid]))
        else:
            plan.results.append(FixResult(fid, NOT_PATCHED, "nothing to undo: fixmono did not patch it here"))
    return plan


def diff(plan: Plan) -> str:
    out = []
    for site, targets in plan.targets.items():
        for rel, (data, _) in sorted(targets.items()):
            before = confined(site, rel).read_bytes()
            if sha256(before) == sha256(data):
                continue
            out.append(unified_diff(before.decode("utf-8", "replace").splitlines(keepends=True),
                                    data.decode("utf-8", "replace").splitlines(keepends=True), rel))
    return "".join(out)



def sites(env: Environment, fixes: list[Fix] | None = None) -> list[Path]:
    """The folders holding the installed projects of `fixes` (None: those
    where fixmono keeps a journal); one that leads outside the environment
    (a link into another) is refused."""
    projects = {PROJECTS[f.upstream] for f in fixes} if fixes is not None else PROJECTS.values()
    found = {env.site(p) for p in projects if env.dist(dist_name(p))["version"] is not None and env.owns(env.site(p))}
    if fixes is None:  # its own site-packages too: a --diff patched a distribution of no catalogue project there
        found |= {Path(site) for site in env.sites}
    chosen = sorted(s for s in found if fixes is not None or (s / JOURNAL_DIR).is_dir())
    if fixes is None:
        return [own_site(site, env.prefix) for site in chosen]
    # patching: a folder of another environment is never opened, locked or probed; its fixes are refused by name
    return [site for site in chosen if leads_inside(site, env.prefix)]


def leads_inside(site: Path, prefix: str) -> bool:
    try:
        own_site(site, prefix)
    except UserError:
        return False
    return True


def execute(env: Environment, folders: list[Path], make_plan, check: bool = False,
            force: bool = False) -> tuple[Plan, str | None]:
    """Plan with the journals of `folders` read (`make_plan(journals)`), then
    write it, or with `check` only say it as a diff. Before planning, an
    interrupted run is completed and stale entries are forgotten. Only while
    holding each folder's lock is its journal read, changed or removed."""
    if check:
        journals = {site: Journal.read(site) for site in folders}
        if any("pending" in e for j in journals.values() for e in j.files.values()):
            raise UserError(f"an interrupted patch-env is pending in this environment: run "
                            f"`{patch_env_command(env)}` without --check first (it completes it)")
        notes = [note for j in journals.values() for note in forget_stale(j)]
        plan = make_plan(journals)
        plan.notes[:0] = notes
        return plan, diff(plan)
    needs: dict[int, int] = {}  # device -> bytes the run is to write there
    try:
        require_writable(folders)
        with ExitStack() as stack:
            for site in folders:
                stack.enter_context(locked(site))
            return write(env, {site: Journal.read(site) for site in folders}, make_plan, needs, force)
    except OSError as err:
        if disk_full(err):  # written so far: put back by undo_on_error
            raise out_of_space(err, needs) from None
        raise


def write(env: Environment, journals: dict[Path, Journal], make_plan, needs: dict[int, int],
          force: bool = False) -> tuple[Plan, None]:
    """The run under the locks: complete an interrupted one, forget stale
    entries, plan, write. Every change is put back if any step fails
    (undo_on_error); bytecode is compiled once the run is through."""
    notes, changed, written = [], set(), []
    with undo_on_error(journals):
        for site, journal in journals.items():
            if any("pending" in e for e in journal.files.values()):
                require_space(completion_writes(journal), needs)
                problems, files = finish(journal, env)
                notes += [f"completed an interrupted patch-env in {site}", *problems]
                written += files
            stale = forget_stale(journal)
            notes += stale
            changed |= {site} if stale else set()
        plan = make_plan(journals)
        plan.notes[:0] = notes
        if not plan.blocked:
            written += write_plan(env, journals, plan, changed, needs, force)
    if written:
        compile_again(env.python, written)
    return plan, None


def write_plan(env: Environment, journals: dict[Path, Journal], plan: Plan, changed: set, needs: dict[int, int],
               force: bool) -> list[Path]:
    """Check the folders and the free space, then write: the journal's intent
    (begin), then the files (finish). The files written."""
    infos = {(site, rel): plan.dists.get((site, rel)) or journals[site].files[rel]
             for site, targets in plan.targets.items() for rel in targets}
    require_writable([confined(site, rel).parent for site, rel in infos] +
                     [confined(site, info["dist_info"]) for (site, _), info in infos.items() if info["dist_info"]])
    require_space(plan_writes(plan, journals, infos), needs)
    patched = [r.fix for r in plan.results if r.result == PATCHED]
    written = []
    for site, journal in journals.items():
        targets = plan.targets.get(site)
        if targets:
            begin(journal, targets, {rel: info for (s, rel), info in infos.items() if s == site}, patched)
        if targets or site in changed:
            problems, files = finish(journal, env, force)
            plan.notes += problems
            written += files
    return written


def plan_writes(plan: Plan, journals: dict[Path, Journal], infos: dict) -> dict[Path, list[int]]:
    """The files writing `plan` makes, by folder: each new file (its old one
    stays until the run is through, to put back), the store's copy of it and
    of each original not stored yet, each RECORD rewritten, and the journal
    twice (with intent, then folded)."""
    writes: dict[Path, list[int]] = defaultdict(list)
    for site, targets in plan.targets.items():
        journal = journals[site]
        for rel, (data, _) in targets.items():
            path = confined(site, rel)
            writes[path.parent].append(len(data))
            original = [] if rel in journal.files else [path.stat().st_size]  # stored once, at its first patch
            writes[journal.folder / "store"] += [len(data), *original]
        records = {confined(site, f"{infos[site, rel]['dist_info']}/RECORD") for rel in targets
                   if infos[site, rel]["dist_info"]}
        for record in records:
            writes[record.parent].append(record.stat().st_size if record.is_file() else 0)
        writes[journal.folder] += [len(json_text(journal.data)) + 1024 * len(targets)] * 2
    return writes


def completion_writes(journal: Journal) -> dict[Path, list[int]]:
    """The files completing an interrupted run makes: its pending files, their RECORDs, the journal."""
    writes: dict[Path, list[int]] = defaultdict(list)
    for rel, entry in journal.files.items():
        if "pending" in entry:
            stored = journal.folder / "store" / entry["pending"]["to"]
            writes[journal.path(rel).parent].append(stored.stat().st_size if stored.is_file() else 0)
            record = journal.record_path(rel)
            if record is not None and record.is_file():
                writes[record.parent].append(record.stat().st_size)
    writes[journal.folder].append(len(json_text(journal.data)))
    return writes
