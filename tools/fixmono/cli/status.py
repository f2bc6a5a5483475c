"""`tools/fixes status`: which fixes matter for what is installed here.

Exit codes: 0 ok; 2 bad input (one line on stderr); 3 internal error; 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import sys

from fixmono.analysis.status import (BUILT_IN, FAILED, FIXED, NOT_APPLICABLE, NOT_FIXED, NOT_INSTALLED, PATCHED_HERE,
                                     collect)
from fixmono.analysis.schedule import cores
from fixmono.cli.early import exit_quietly
from fixmono.cli.guard import ArgumentParser, run_command
from fixmono.cli.render import table
from fixmono.cli.strip import add_strip, check_strip
from fixmono.model.errors import UserError
from fixmono.model.patchfile import read_patches
from fixmono.model.registry import discover
from fixmono.output.progress import Progress
from fixmono.sources.installed import Environment

COLOURS = {NOT_FIXED: "33", FIXED: "32", PATCHED_HERE: "32", FAILED: "31", NOT_APPLICABLE: "2", NOT_INSTALLED: "2", BUILT_IN: "2",
           "still-needed": "33", "fixed-upstream": "32", "cannot-run-here": "2"}


def render(report: dict, colour: bool = False) -> str:
    def paint(text: str) -> str:
        key = text.rstrip()
        return f"\033[{COLOURS[key]}m{text}\033[0m" if colour and key in COLOURS else text

    b = report["backend"]
    count = f", {b['devices']} GPU(s)" if b["devices"] is not None else ""  # another interpreter's: not counted
    where = f"{b['name']}{count} ({b['detail']})" if b["name"] else b["detail"]
    run = any("reproducer" in r for r in report["fixes"])
    rows = [(r["fix"], r["project"], f"{r['dist']} {r['version'] or 'not installed'}",
             ",".join(r["backends"]) + ("" if r["affects_backend_here"] is not False else " (not here)"),
             r["installed_files"]) for r in report["fixes"]]
    head, *body = table(("FIX", "PROJECT", "INSTALLED", "FOR", "INSTALLED FILES"), rows,
                        paint=lambda column, text: paint(text) if column == 4 else text)
    lines = [f"python: {report['python']} (Python {report['python_version']})", f"backend: {where}", "", head]
    for r, row in zip(report["fixes"], body):
        lines += [row, f"    {r['detail']}"]
        if r.get("provenance"):
            origin = r["provenance"]
            lines.append(f"    built by patch_wheel from {origin['input']['wheel']} (sha256 "
                         f"{origin['input']['sha256']}) with {', '.join(f['id'] for f in origin['fixes'])}")
        if run:
            rep = r["reproducer"]
            lines.append(f"    reproducer: {paint(rep['status'])}: {rep['detail']}")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    if argv and argv[0] == "status":
        argv = argv[1:]
    elif argv and not argv[0].startswith("-"):
        raise UserError(f"unknown command {argv[0]!r} (commands: status)")
    p = ArgumentParser(prog="fixes status", description="which fixes the installed libraries need")
    p.add_argument("--python", metavar="PATH", help="the environment of this interpreter instead of fixmono's own "
                                                    "(its installed files read, nothing imported)")
    p.add_argument("--run", action="store_true", help="also run each fix's reproducer in a subprocess")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per reproducer (--run)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help=f"reproducers at a time, each with cores/N threads (--run; default: the cores, {cores()} here); "
                        "those that need a GPU --per-gpu at a time on each GPU, those that time things alone")
    p.add_argument("--per-gpu", type=int, metavar="N",
                   help="reproducers that need a GPU run N at a time on each GPU (--run; default 2: they show results, "
                        "not timings; 1: one at a time)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr (--run)")
    p.add_argument("--diff", action="append", default=[], metavar="FILE",
                   help="the status of these patch files (git format-patch mail or diff -u; '-': stdin) instead of "
                        "the catalogue's fixes (repeatable)")
    add_strip(p, "as patch-env")
    args = p.parse_args(argv)
    if args.diff and args.run:
        raise UserError("--diff has no reproducer to --run")
    check_strip(args)
    if args.diff:  # the diff engine: only for --diff
        from fixmono.engines.port import diff_fixes

    args.diff_fixes = diff_fixes(read_patches(args.diff, sys.stdin.buffer, args.strip), any_package=True) \
        if args.diff else None
    if not args.timeout > 0:
        raise UserError("--timeout must be a positive number of seconds")
    if args.jobs is not None and not args.run:
        raise UserError("--jobs is for --run")
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: must be 1 or more")
    if args.per_gpu is not None and not args.run:
        raise UserError("--per-gpu is for --run")
    if args.per_gpu is not None and args.per_gpu < 1:
        raise UserError(f"--per-gpu {args.per_gpu}: must be 1 or more")
    args.per_gpu = args.per_gpu or 2
    args.jobs = args.jobs or cores()
    return args


def main(argv: list[str] | None = None) -> int:
    progress = Progress()

    def work(args):
        if args.quiet:
            progress.silence()
        try:
            env = Environment.of(args.python) if args.python else None
            if args.run:
                progress.total = len(args.diff_fixes or discover())
            return collect(args.diff_fixes, run_reproducers=args.run, timeout=args.timeout, env=env,
                           progress=progress, jobs=args.jobs, per_gpu=args.per_gpu), 0
        finally:
            progress.clear()  # before the report, or an error's line

    def show(report, args):
        return render(report, colour=sys.stdout.isatty() and not os.environ.get("NO_COLOR"))

    prog = "fixmono status" if sys.argv[0] == "fixmono status" else "fixes"  # its --json `command`, as before
    return run_command(prog, argv, parse_args, work, show, interrupted=progress.stopped)


if __name__ == "__main__":
    exit_quietly(main())
