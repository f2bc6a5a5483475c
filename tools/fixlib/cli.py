"""make_patch: turn fixes into git patches against a checkout or a wheel.

Exit codes: 0 nothing requested failed; 1 a fix failed; 2 bad input (one line
on stderr, nothing written); 130 interrupted.
"""
from __future__ import annotations

if __name__ == "__main__":  # a signal while the imports below run: one line, no traceback
    from tools.fixlib.early import interrupt_before_start
    interrupt_before_start("make_patch")

import argparse
import dataclasses
import json
import os
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tools.fixlib.apply import FixOutcome, Status, apply_fix
from tools.fixlib.errors import ArgumentParser, UserError, emit, exit_quietly, guarded
from tools.fixlib.model import Fix, Unreadable
from tools.fixlib.patches import (Entry, SeriesWrite, build_commits, check_branch_name, check_out_dir,
                                  create_branch, delete_branch, inside, series_files)
from tools.fixlib.projects import PROJECTS, runs_on
from tools.fixlib.remote import is_remote
from tools.fixlib.registry import discover
from tools.fixlib.revert import confirm_reverted, revert_through_git
from tools.fixlib.scratch import pause_point
from tools.fixlib.upstream import DEFAULT_MAX_TARGET_MIB, Upstream, open_upstream

DEFAULT_OUT = "patches-out"
WRITTEN = False  # set once the series/branch are in place: an interrupt after that changes nothing


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(prog="make_patch", description=__doc__.split("\n")[0])
    p.add_argument("fix_ids", nargs="*", metavar="FIX_ID", help="fixes to apply, in series order")
    p.add_argument("--all", action="store_true", help="every fix for the upstream")
    p.add_argument("--upstream", metavar="PATH_OR_SPEC",
                   help="a git checkout, pip:NAME==VERSION, or 'default' (each project's default)")
    p.add_argument("--out", metavar="DIR",
                   help=f"write the series here (default: {DEFAULT_OUT}, unless --branch or --check)")
    p.add_argument("--branch", metavar="NAME", help="also add the fixes as commits on a new branch")
    p.add_argument("--check", action="store_true", help="report statuses only; write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--validate", action="store_true", help="also run each fix's behavioural check")
    p.add_argument("--check-upstream", action="store_true",
                   help="run each fix's reproducer against what is installed here: still-needed, "
                        "fixed-upstream or cannot-run-here")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per reproducer (--check-upstream)")
    p.add_argument("--max-target-size", type=float, default=DEFAULT_MAX_TARGET_MIB, metavar="MIB",
                   help=f"refuse target files larger than this (default: {DEFAULT_MAX_TARGET_MIB} MiB)")
    args = p.parse_args(argv)
    if args.upstream is None and not args.check_upstream:
        raise UserError("the following arguments are required: --upstream")
    if not args.max_target_size > 0:
        raise UserError("--max-target-size must be a positive number of MiB")
    return args


def select(fixes: list[Fix], args: argparse.Namespace) -> list[Fix]:
    if args.all and args.fix_ids:
        raise UserError("give fix ids or --all, not both")
    if args.all:
        return fixes
    if not args.fix_ids:
        raise UserError("name the fixes to apply, or --all (fix ids: "
                        + ", ".join(f.id for f in fixes) + ")")
    by_id = {f.id: f for f in fixes}
    for fid in args.fix_ids:
        if fid not in by_id:
            raise UserError(f"unknown fix id {fid!r} (known: {', '.join(by_id)})")
    wanted = set(args.fix_ids)
    return [f for f in fixes if f.id in wanted]  # series order, not argument order


def check_options(args: argparse.Namespace) -> None:
    for option in ("upstream", "out", "branch"):
        value = getattr(args, option)
        if value is not None and not value.strip():
            raise UserError(f"--{option} is empty")
    if args.check and (args.out or args.branch):
        raise UserError("--check writes nothing: it cannot be combined with --out or --branch")
    if args.branch and (args.upstream == "default" or args.upstream.startswith("pip:") or is_remote(args.upstream)):
        raise UserError("--branch needs a git checkout as --upstream (a remote or wheel upstream has no branch "
                        "of yours to add to)")


def run_one(upstream: Upstream, fixes: list[Fix], validate: bool, progress) -> list[FixOutcome]:
    """Apply `fixes` in order; each sees the files as the previous ones left them."""
    patched: dict[str, str] = {}

    def read(path: str) -> bytes | None:
        if path in patched:
            return None if patched[path] is None else patched[path].encode()
        return upstream.read(path)

    outcomes = []
    for n, fix in enumerate(fixes, 1):
        progress(f"[{n}/{len(fixes)}] {fix.id}")
        try:
            outcome = apply_fix(fix, read, upstream.missing_file_hint)
        except Unreadable as err:
            outcome = FixOutcome(fix, Status.FAILED, str(err))
        if outcome.status is Status.APPLIED and fix.reverts:
            outcome = revert_through_git(upstream, outcome, patched)
        elif outcome.status is Status.ALREADY_APPLIED and fix.reverts:
            outcome = confirm_reverted(upstream, outcome)
        if outcome.status is Status.APPLIED and validate and fix.validate:
            before = {path: read(path).decode("utf-8") for path in outcome.new_files if read(path) is not None}
            problem = fix.validate(before, outcome.new_files)
            if problem:
                outcome = FixOutcome(fix, Status.FAILED, f"validation: {problem}", outcome.files)
        if outcome.status is Status.APPLIED:
            patched.update(outcome.new_files)
            if any("\r\n" in (text or "") for text in outcome.new_files.values()):
                # git am strips CRs unless told (like any format-patch of a CRLF file)
                outcome = dataclasses.replace(outcome, detail=outcome.detail + "; CRLF line endings kept: "
                                                                            "apply with `git am --keep-cr`")
        outcomes.append(outcome)
    return outcomes


def plan(args: argparse.Namespace, fixes: list[Fix]) -> list[tuple[str, list[Fix]]]:
    """(upstream spec, fixes) pairs to run, plus fixes that cannot run at all."""
    if args.upstream != "default":
        return [(args.upstream, fixes)]
    groups: dict[str, list[Fix]] = {}
    for fix in fixes:
        groups.setdefault(PROJECTS[fix.upstream].default_spec, []).append(fix)
    return sorted(groups.items(), key=lambda item: item[1][0].upstream)


@dataclass
class Job:
    """One upstream's run, opened and checked before anything is written."""

    group: list[Fix]  # the requested fixes planned for this upstream
    upstream: Upstream | None = None  # None: no default upstream for the project
    fixes: list[Fix] = field(default_factory=list)  # those for the upstream's project
    out: Path | None = None  # where the series goes (checked, resolved); None: no series
    shown_out: str | None = None  # `out` as the user named it
    outcomes: list[FixOutcome] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)  # the patch files written
    branch_tip: str | None = None  # the new branch's commit, once created

    @property
    def entries(self) -> list[Entry]:
        return [Entry(o.fix, o.new_files, o.message_note) for o in self.outcomes if o.status is Status.APPLIED]


def prepare(args: argparse.Namespace, spec: str, group: list[Fix]) -> Job:
    """Open and validate one upstream, its --out and --branch; writes nothing."""
    if not spec:  # default mode, project without an obtainable default
        return Job(group)
    upstream = open_upstream(spec)
    upstream.max_target_bytes = int(args.max_target_size * (1 << 20))
    if not args.all:
        for f in group:
            if not runs_on(f.upstream, upstream.project):
                raise UserError(f"fix {f.id} targets {f.upstream}, but --upstream {spec} "
                                f"is a {upstream.project.name} tree")
    job = Job(group, upstream, [f for f in group if runs_on(f.upstream, upstream.project)])
    # a series is written when --out is given, or by default unless --check or --branch
    if args.out or not (args.check or args.branch):
        out = Path(args.out or DEFAULT_OUT)
        if args.upstream == "default":
            out = out / upstream.project.name
        if not args.out and inside(out.resolve(), upstream.path):
            raise UserError(f"the default output directory {DEFAULT_OUT} would be inside the upstream "
                            f"checkout {upstream.path}; pass --out DIR outside it")
        job.out, job.shown_out = check_out_dir(upstream, out), str(out)
    if args.branch:
        check_branch_name(upstream, args.branch)
    return job


def execute(args: argparse.Namespace) -> dict:
    check_options(args)
    fixes = select(discover(), args)
    progress = (lambda msg: print(msg, file=sys.stderr)) if sys.stderr.isatty() else (lambda msg: None)
    jobs = [prepare(args, spec, group) for spec, group in plan(args, fixes)]  # all before any write
    pause_point("opened")
    for job in jobs:
        if job.upstream is not None:
            job.outcomes = run_one(job.upstream, job.fixes, args.validate, progress)
    pause_point("transformed")
    failed = any(o.status is Status.FAILED for job in jobs for o in job.outcomes)
    if not failed:  # a failed run writes nothing: the previous series and branches stay as they were
        write(args, jobs)
    return {"runs": [report(args, job, written=not failed) for job in jobs], "exit_code": 1 if failed else 0}


def write(args: argparse.Namespace, jobs: list[Job]) -> None:
    """Every series and the branch, all or nothing: everything is built in
    scratch space first, then put in place in one uninterruptible step that
    is undone as a whole if any part of it fails."""
    writes: list[SeriesWrite] = []
    branches: list[tuple[Job, str]] = []
    try:
        for job in jobs:
            entries = job.entries if job.upstream else []
            if job.out:
                files = series_files(job.upstream, entries)
                writes.append(SeriesWrite(job.out))
                writes[-1].stage(files)
                job.patches = [name for name in files if name.endswith(".patch")]
            if args.branch and entries:
                branches.append((job, build_commits(job.upstream, entries)[-1]))
        pause_point("staged")
        with signals_held():
            created = []
            try:
                for job, tip in branches:
                    create_branch(job.upstream, tip, args.branch)
                    created.append((job, tip))
                    job.branch_tip = tip
                    pause_point("branch-created")
                for series in writes:
                    series.commit()
                    pause_point("series-swapped")
            except BaseException:  # undone while signals are still held
                for series in reversed(writes):
                    series.rollback()
                for job, tip in reversed(created):
                    delete_branch(job.upstream, tip, args.branch)
                raise
            for series in writes:  # the holders go too before a held signal lands: none is left behind
                series.finish()
    except BaseException:
        for series in reversed(writes):
            series.discard()
        for job in jobs:
            job.branch_tip, job.patches = None, []
        raise
    pause_point("written")


@contextmanager
def signals_held():
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is over. Once it
    succeeded the run is complete: a signal that came meanwhile is dropped
    (the series and branch stay, the report is printed, exit 0)."""
    global WRITTEN
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # delivered now: undone, so "not changed" holds
        raise
    WRITTEN = True
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in held}
    signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a pending signal is dropped here
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def report(args: argparse.Namespace, job: Job, written: bool) -> dict:
    upstream = job.upstream
    if upstream is None:
        project = job.group[0].upstream
        return {"upstream": None, "project": project, "base": None, "out": None, "written": False, "results": [
            result(f, Status.NOT_APPLICABLE,
                   f"no default upstream for {project} on this machine; pass --upstream <{project} checkout>")
            for f in job.group]}
    names = iter(job.patches)
    return {
        "upstream": upstream.label, "project": upstream.project.name, "base": upstream.head,
        "out": job.shown_out, "written": written,
        "branch": args.branch if job.branch_tip else None, "branch_tip": job.branch_tip,
        "results": [result(o.fix, o.status, o.detail,
                           next(names) if o.status is Status.APPLIED and job.patches else None)
                    for o in job.outcomes]}


def result(fix: Fix, status: Status, detail: str, patch: str | None = None) -> dict:
    return {"fix": fix.id, "upstream_project": fix.upstream, "status": status.value,
            "detail": detail, "patch": patch}


def check_upstream(args: argparse.Namespace) -> dict:
    from tools.fixlib.still_needed import check

    if args.upstream or args.out or args.branch:
        raise UserError("--check-upstream runs reproducers against the installed libraries: "
                        "it takes no --upstream, --out or --branch")
    fixes = select(discover(), args)
    results = [check(fix, args.timeout) for fix in fixes]
    return {"check_upstream": results, "exit_code": 0}


def render_still_needed(report: dict) -> str:
    rows = [(r["fix"], r["status"], r["detail"]) for r in report["check_upstream"]]
    width = max([len("FIX")] + [len(r[0]) for r in rows])
    lines = [f"{'FIX':<{width}}  {'STATUS':<16}  DETAIL"]
    lines += [f"{fix:<{width}}  {status:<16}  {detail}" for fix, status, detail in rows]
    return "\n".join(lines) + "\n"


def render_table(report: dict) -> str:
    lines = []
    for run in report["runs"]:
        lines.append(f"upstream: {run['upstream'] or '(none available for ' + run['project'] + ')'}")
        rows = [(r["fix"], r["status"], r["detail"]) for r in run["results"]]
        width = max([len("FIX")] + [len(r[0]) for r in rows])
        lines.append(f"  {'FIX':<{width}}  {'STATUS':<15}  DETAIL")
        lines += [f"  {fid:<{width}}  {status:<15}  {detail}" for fid, status, detail in rows]
        if not rows:
            lines.append("  (no fixes for this upstream)")
        if run.get("out") and run["written"]:
            count = sum(1 for r in run["results"] if r["patch"])
            lines.append(f"  wrote {count} patch(es) and series to {run['out']}")
        elif run.get("out"):
            lines.append(f"  wrote nothing to {run['out']}: a fix failed (what was there is as it was)")
        if run.get("branch"):
            lines.append(f"  created branch {run['branch']} at {run['branch_tip'][:12]}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def readable(value):
    """Strings as text for JSON: an argument's undecodable bytes (LC_ALL=C)
    read as UTF-8, as git reads them, instead of lone surrogates."""
    if isinstance(value, str):
        return os.fsencode(value).decode("utf-8", "replace")
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on, Ctrl-C is handled by guarded
    if "BUILD_WORKING_DIRECTORY" in os.environ:  # under `bazel run`
        os.chdir(os.environ["BUILD_WORKING_DIRECTORY"])
    json_out = "--json" in (sys.argv[1:] if argv is None else argv)

    def work():
        args = parse_args(argv)
        report = check_upstream(args) if args.check_upstream else execute(args)
        render = render_still_needed if args.check_upstream else render_table
        emit(json.dumps(readable(report), indent=2) + "\n" if args.json else render(report))
        return report["exit_code"]

    def json_error(message: str, code: int) -> None:
        if json_out:
            emit(json.dumps({"error": message.removeprefix("error: "), "exit_code": code}) + "\n")

    def interrupted() -> str:
        return ("interrupted after everything was written (the report was not printed)" if WRITTEN
                else "interrupted; the checkout was not changed")

    exit_code, code = guarded("make_patch", work, interrupted, on_error=json_error)
    return exit_code if code is None else code


if __name__ == "__main__":
    exit_quietly(main())
