"""make_patch: turn fixes into git patches against a checkout or a wheel.

Exit codes: 0 nothing requested failed; 1 a fix failed; 2 bad input (one line
on stderr, nothing written); 130 interrupted.
"""
from __future__ import annotations

if __name__ == "__main__":  # a signal while the imports below run: one line, no traceback
    from fixmono.cli.early import interrupt_before_start
    interrupt_before_start("make_patch")

import argparse
import sys
from pathlib import Path

from fixmono.engines.port import DiffTransform, diff_fixes
from fixmono.apply.run import run
from fixmono.cli.early import exit_quietly
from fixmono.cli.guard import ArgumentParser, run_command, tool_name
from fixmono.cli.render import table
from fixmono.cli.strip import add_strip, check_strip
from fixmono.model.errors import UserError
from fixmono.model.fix import Fix
from fixmono.model.outcome import Status
from fixmono.model.patchfile import all_paths, read_patches, resolve_strip
from fixmono.model.projects import PROJECTS, runs_on
from fixmono.model.registry import discover
from fixmono.output import publish
from fixmono.output.branch import check_branch_name
from fixmono.output.out_dir import check_out_dir, inside
from fixmono.output.progress import Progress
from fixmono.sources.open import open_upstream
from fixmono.sources.remote import is_remote
from fixmono.sources.scratch import pause_point
from fixmono.sources.upstream import DEFAULT_MAX_TARGET_MIB, ObjectStore, Upstream

DEFAULT_OUT = "patches-out"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(prog=tool_name("make_patch"), description=__doc__.split("\n")[0])
    p.add_argument("fix_ids", nargs="*", metavar="FIX_ID", help="fixes to apply, in series order")
    p.add_argument("--all", action="store_true", help="every fix for the upstream")
    p.add_argument("--diff", action="append", default=[], metavar="FILE",
                   help="a patch file (git format-patch mail or diff -u; '-': stdin) to port as a fix, instead of "
                        "fix ids (repeatable: a series, in order)")
    add_strip(p, "the level under which its files are in the upstream")
    p.add_argument("--upstream", metavar="PATH_OR_SPEC",
                   help="a git checkout, pip:NAME==VERSION, or 'default' (each project's default)")
    p.add_argument("--base", metavar="PATH_OR_SPEC",
                   help="with --diff: the tree the diff was made on (a git checkout or pip:NAME==VERSION); its "
                        "files are the diff's pre-image, through which its hunks are placed")
    p.add_argument("--history", metavar="PATH",
                   help="with --diff: a git repository (a clone with history, a mirror of upstream) whose objects "
                        "may hold the diff's pre-image blobs (its `index` lines), looked up after the upstream's")
    p.add_argument("--out", metavar="DIR",
                   help=f"write the series here (default: {DEFAULT_OUT}, unless --branch or --check)")
    p.add_argument("--branch", metavar="NAME", help="also add the fixes as commits on a new branch")
    p.add_argument("--check", action="store_true", help="report statuses only; write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr (--all)")
    p.add_argument("--validate", action="store_true", help="also run each fix's behavioural check")
    p.add_argument("--check-upstream", action="store_true",
                   help="run each fix's reproducer against what is installed here: still-needed, "
                        "fixed-upstream or cannot-run-here")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per reproducer (--check-upstream)")
    p.add_argument("--full-wheel", action="store_true",
                   help="pip: download the whole wheel and check its sha256 (default: read the target files by "
                        "HTTP range requests, each checked against the wheel's CRC-32)")
    p.add_argument("--refresh", action="store_true",
                   help="pip: ask the package indexes again which wheel the release is (default: the answer an "
                        "earlier run kept, with no request: a published release does not change)")
    p.add_argument("--max-target-size", type=float, default=DEFAULT_MAX_TARGET_MIB, metavar="MIB",
                   help=f"refuse target files larger than this (default: {DEFAULT_MAX_TARGET_MIB} MiB)")
    args = p.parse_args(argv)
    if args.upstream is None and not args.check_upstream:
        raise UserError("the following arguments are required: --upstream")
    if not args.max_target_size > 0:
        raise UserError("--max-target-size must be a positive number of MiB")
    return args


def select(args: argparse.Namespace) -> list[Fix]:
    """The fixes to run: a --diff's (the catalogue is not loaded), else the catalogue's chosen."""
    if args.diff:
        return fixes_from_diffs(args)
    fixes = discover()
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


def fixes_from_diffs(args: argparse.Namespace) -> list[Fix]:
    """--diff: each patch file a fix for the project --upstream is (read first: a bad patch is one line)."""
    if args.fix_ids or args.all:
        raise UserError("give --diff or fix ids/--all, not both")
    if args.upstream == "default" or args.check_upstream:
        raise UserError("--diff ports a patch onto one --upstream (a checkout, pip:NAME==VERSION or a remote)")
    patches = read_patches(args.diff, sys.stdin.buffer, args.strip)
    args.diff_paths = frozenset().union(*(all_paths(patch) for patch in patches))  # at every strip level
    upstream = open_upstream(args.upstream, full_wheel=args.full_wheel, extra=args.diff_paths, any_project=True,
                             refresh=args.refresh)
    args.opened = {args.upstream: upstream}  # prepare() runs on it: the wheel is not looked up twice
    there = upstream.files(args.diff_paths)
    return diff_fixes([resolve_strip(patch, there.__contains__) for patch in patches], upstream.project.name)


def check_options(args: argparse.Namespace) -> None:
    for option in ("upstream", "out", "branch"):
        value = getattr(args, option)
        if value is not None and not value.strip():
            raise UserError(f"--{option} is empty")
    check_strip(args)
    if args.base is not None and (not args.diff or not args.base.strip()):
        raise UserError("--base names the tree a --diff was made on: give it with --diff, not empty")
    if args.history is not None and (not args.diff or not args.history.strip()):
        raise UserError("--history names a repository holding a --diff's pre-image: give it with --diff, not empty")
    if args.check and (args.out or args.branch):
        raise UserError("--check writes nothing: it cannot be combined with --out or --branch")
    if args.branch and (args.upstream == "default" or args.upstream.startswith("pip:") or is_remote(args.upstream)):
        raise UserError("--branch needs a git checkout as --upstream (a remote or wheel upstream has no branch "
                        "of yours to add to)")
    if args.refresh and args.upstream != "default" and not any(
            (spec or "").startswith("pip:") for spec in (args.upstream, args.base)):
        raise UserError("--refresh asks the package indexes again for a pip:NAME==VERSION upstream; "
                        "--upstream and --base name none")


def plan(args: argparse.Namespace, fixes: list[Fix]) -> list[tuple[str, list[Fix]]]:
    """(upstream spec, fixes) pairs to run, plus fixes that cannot run at all."""
    if args.upstream != "default":
        return [(args.upstream, fixes)]
    groups: dict[str, list[Fix]] = {}
    for fix in fixes:
        groups.setdefault(PROJECTS[fix.upstream].default_spec, []).append(fix)
    return sorted(groups.items(), key=lambda item: item[1][0].upstream)


def prepare(args: argparse.Namespace, spec: str, group: list[Fix]) -> publish.Job:
    """Open and validate one upstream, its --out and --branch; writes nothing."""
    if not spec:  # default mode, project without an obtainable default
        return publish.Job(group)
    extra = args.diff_paths if args.diff else frozenset()
    upstream = getattr(args, "opened", {}).get(spec) or open_upstream(
        spec, full_wheel=args.full_wheel, extra=extra, any_project=bool(args.diff), refresh=args.refresh)
    upstream.max_target_bytes = int(args.max_target_size * (1 << 20))
    if not args.all and not args.diff:
        for f in group:
            if not runs_on(f.upstream, upstream.project):
                raise UserError(f"fix {f.id} targets {f.upstream}, but --upstream {spec} "
                                f"is a {upstream.project.name} tree")
    job = publish.Job(group, upstream, [f for f in group if runs_on(f.upstream, upstream.project)])
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


def open_base(spec: str, paths: frozenset, refresh: bool = False) -> Upstream:
    """--base: opened as an --upstream is, its error messages naming --base."""
    try:
        return open_upstream(spec, extra=paths, any_project=True, refresh=refresh)
    except UserError as err:
        raise UserError(str(err).replace("--upstream", "--base", 1)) from None


def execute(args: argparse.Namespace) -> tuple[dict, int]:
    publish.WRITTEN = False  # this run's: main() may run again in one process (tests, a caller's loop)
    check_options(args)
    fixes = select(args)
    jobs = [prepare(args, spec, group) for spec, group in plan(args, fixes)]  # all before any write
    base = open_base(args.base, args.diff_paths, args.refresh) if args.base else None
    history = ObjectStore(args.history) if args.history else None
    pause_point("opened")
    progress = args.progress
    progress.total = sum(len(job.fixes) for job in jobs if job.upstream is not None) if args.all else 0
    for job in jobs:
        if job.upstream is not None:
            job.outcomes = run(job.upstream, job.fixes, args.validate, lambda fix_id: progress(fix_id),
                               lambda *step: progress.finished(*step) if args.all else None, base, history)
    pause_point("transformed")
    failed = any(o.status is Status.FAILED for job in jobs for o in job.outcomes)
    if not failed:  # a failed run writes nothing: the previous series and branches stay as they were
        publish.write(jobs, args.branch)
    return {"runs": [report(args, job, written=not failed) for job in jobs]}, 1 if failed else 0


def report(args: argparse.Namespace, job: publish.Job, written: bool) -> dict:
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
        "out": job.shown_out, "written": written, "wheel": wheel_read(upstream),
        "branch": args.branch if job.branch_tip else None, "branch_tip": job.branch_tip,
        "validated": {kind: sum(o.validation == kind for o in job.outcomes)
                      for kind in ("passed", "compile not run", "failed", "no check")} if args.validate else None,
        "results": [{**result(o.fix, o.status, o.detail,
                              next(names) if o.status is Status.APPLIED and job.patches else None),
                     **evidence(o)} for o in job.outcomes]}


def evidence(outcome) -> dict:
    """For a diff's port: what placed each changed file's hunks (engines/three_way.py), "hunks only"
    where their own lines did; and what the uses check could not resolve (C/C++ calls), where any."""
    diffs = {c.path for c in outcome.fix.changes if isinstance(c.transform, DiffTransform)}
    placed = {f.path: f.evidence or "hunks only" for f in outcome.files
              if f.path in diffs and f.status is Status.APPLIED}
    unchecked = {f.path: f.unchecked for f in outcome.files if f.unchecked}
    return ({"evidence": placed} | ({"not checked": unchecked} if unchecked else {})) if diffs else {}


def wheel_read(upstream) -> dict | None:
    """For a pip: upstream, how its wheel was read and what was verified."""
    wheel = getattr(upstream, "wheel", None)
    if not wheel:
        return None
    keys = ("name", "read", "verified", "bytes", "size", "requests", "sha256", "published_sha256", "note",
            "cached_members")
    # cached: the scratch repository an earlier run built (verified as that run's read was)
    return {**{k: wheel.get(k) for k in keys}, "cached": bool(wheel.get("cached"))}


def describe_read(wheel: dict) -> str:
    size = f" of {wheel['size'] / 1e6:.1f} MB" if wheel.get("size") else ""
    how = {"range": "by HTTP range requests", "full": "downloaded whole", "local-file": "from a local index"}
    members = f" ({wheel['cached_members']} members from the member cache, each matching this read's central " \
              "directory)" if wheel.get("cached_members") else ""
    return (f"  wheel: {wheel['name']}: {(wheel.get('bytes') or 0) / 1e6:.2f} MB read{size}, "
            f"{how.get(wheel.get('read'), wheel.get('read'))}{members}"
            + (" by an earlier run (cached)" if wheel.get("cached") else "") + f"; verified: {wheel['verified']}"
            + (f" ({wheel['note']})" if wheel.get("note") else ""))


def result(fix: Fix, status: Status, detail: str, patch: str | None = None) -> dict:
    return {"fix": fix.id, "upstream_project": fix.upstream, "status": status.value,
            "detail": detail, "patch": patch}


def check_upstream(args: argparse.Namespace) -> tuple[dict, int]:
    if args.upstream or args.out or args.branch:
        raise UserError("--check-upstream runs reproducers against the installed libraries: "
                        "it takes no --upstream, --out or --branch")
    from fixmono.analysis.still_needed import check  # runs reproducers: only this mode needs it

    fixes = select(args)
    return {"check_upstream": [check(fix, args.timeout) for fix in fixes]}, 0


def render_still_needed(report: dict) -> str:
    rows = [(r["fix"], r["status"], r["detail"]) for r in report["check_upstream"]]
    return "\n".join(table(("FIX", "STATUS", "DETAIL"), rows, min_widths=(0, 16))) + "\n"


def render_runs(report: dict) -> str:
    lines = []
    for each in report["runs"]:
        lines.append(f"upstream: {each['upstream'] or '(none available for ' + each['project'] + ')'}")
        if each.get("wheel"):
            lines.append(describe_read(each["wheel"]))
        rows = [(r["fix"], r["status"], r["detail"]) for r in each["results"]]
        lines += table(("FIX", "STATUS", "DETAIL"), rows, indent="  ", min_widths=(0, 15))
        if not rows:
            lines.append("  (no fixes for this upstream)")
        if each.get("validated"):
            counts = each["validated"]
            lines.append(f"  --validate: {sum(counts.values())} fix(es) applied: {counts['passed']} passed their check, "
                         f"{counts['compile not run']} passed it but for a compile step that could not run here, "
                         f"{counts['failed']} failed it, {counts['no check']} declare none (already-applied and "
                         "not-applicable fixes have nothing to check)")
        if each.get("out") and each["written"]:
            count = sum(1 for r in each["results"] if r["patch"])
            lines.append(f"  wrote {count} patch(es) and series to {each['out']}")
        elif each.get("out"):
            lines.append(f"  wrote nothing to {each['out']}: a fix failed (what was there is as it was)")
        if each.get("branch"):
            lines.append(f"  created branch {each['branch']} at {each['branch_tip'][:12]}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    progress = Progress()

    def work(args):
        args.progress = progress
        if args.quiet:
            progress.silence()
        try:
            return check_upstream(args) if args.check_upstream else execute(args)
        finally:
            progress.clear()  # before the report, or an error's line

    def render(report, args):
        return render_still_needed(report) if args.check_upstream else render_runs(report)

    def interrupted() -> str:
        return progress.stopped("interrupted after everything was written (the report was not printed)"
                                if publish.WRITTEN else "interrupted; the checkout was not changed")

    return run_command("make_patch", argv, parse_args, work, render, interrupted)


if __name__ == "__main__":
    exit_quietly(main())
