"""`fixmono patch-env [--python PATH] FIX...|--all [--check] [--force] [--any-version]`
and `fixmono patch-env [--python PATH] --undo [FIX...] [--check]`: fix the
installed files of an environment in place, and restore them byte for byte.

Exit codes: 0 done, or nothing to do; 1 a fix failed or does not apply there
(nothing written); 2 bad input or refused (one line, nothing written), or a
disk too full for the run, found before or while writing (one line; what was
written is put back); 130 interrupted (the journal holds what was under way:
the next run completes it).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from functools import partial

from fixmono.cli.early import exit_quietly
from fixmono.cli.guard import ArgumentParser, os_error_as_user_error, run_command
from fixmono.cli.strip import add_strip, check_strip
from fixmono.model.errors import UserError
from fixmono.engines.port import diff_fixes
from fixmono.model.patchfile import read_patches
from fixmono.model.registry import discover
from fixmono.output.env_patch import execute, plan_patch, plan_undo, sites
from fixmono.output.journal import JOURNAL_DIR
from fixmono.sources.installed import Environment


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(prog="fixmono patch-env", description="apply fixes to the installed files of an environment, "
                                                             "or undo them")
    p.add_argument("fix_ids", nargs="*", metavar="FIX", help="fixes to apply (with --undo: to undo; none: all)")
    p.add_argument("--all", action="store_true", help="every fix whose target is installed as Python here")
    p.add_argument("--diff", action="append", default=[], metavar="FILE",
                   help="a patch file (git format-patch mail or diff -u; '-': stdin) to apply as a fix, instead of "
                        "fix ids (repeatable); with --undo: fixes to keep applied")
    add_strip(p, "its a/ b/ or pkg.orig/ pkg/ prefix, else the level under which they are in a known project's package")
    p.add_argument("--python", metavar="PATH", help="the environment of this interpreter (default: fixmono's own)")
    p.add_argument("--undo", action="store_true", help="restore the files fixmono patched, byte for byte")
    p.add_argument("--check", action="store_true", help="print what would change as a diff; write nothing")
    p.add_argument("--force", action="store_true", help="patch files that differ from their RECORD hash; with "
                                                        "--undo: restore originals over files changed since")
    p.add_argument("--any-version", action="store_true", help="patch versions outside the range a fix is checked on")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    if args.undo and (args.all or args.any_version):
        raise UserError("--undo takes fix ids (none: every fix fixmono applied), not --all/--any-version")
    if args.diff and not args.undo and (args.fix_ids or args.all):
        raise UserError("give --diff or fix ids/--all, not both")
    if not args.undo and not args.diff and bool(args.fix_ids) == args.all:
        raise UserError("name the fixes to apply, or --all (not both)")
    known = {f.id for f in discover()}
    unknown = [i for i in args.fix_ids if i not in known]
    if unknown and not args.undo:  # an undo may name a fix a --diff made
        raise UserError(f"unknown fix id(s): {', '.join(unknown)} (`fixmono status` lists them)")
    check_strip(args)
    args.diff_fixes = diff_fixes(read_patches(args.diff, sys.stdin.buffer, args.strip), any_package=True) \
        if args.diff else []
    return args


def work(args: argparse.Namespace, stage: dict) -> tuple[dict, int]:
    env = Environment.of(args.python) if args.python else Environment.current()
    known = {f.id: f for f in [*discover(), *args.diff_fixes]}
    if args.undo:
        folders = sites(env)
        make_plan = partial(plan_undo, env, args.fix_ids or None, known, force=args.force)
    else:
        fixes = args.diff_fixes or ([known[i] for i in args.fix_ids] if args.fix_ids else list(known.values()))
        folders = sites(env, fixes)
        make_plan = partial(plan_patch, env, fixes, force=args.force, any_version=args.any_version, every=args.all)
    stage["writing"] = not args.check
    try:
        plan, diff = execute(env, folders, lambda journals: make_plan(journals=journals), check=args.check,
                             force=args.undo and args.force)
    except OSError as err:  # a file vanished mid-run: what the run wrote is put back (journal.undo_on_error)
        raise os_error_as_user_error(err) from None
    payload = {"python": env.prefix, "python_executable": env.python, "action": "undo" if args.undo else "patch",
               "check": args.check, "fixes": [dataclasses.asdict(r) for r in plan.results], "notes": plan.notes,
               "journals": [str(site / JOURNAL_DIR) for site in folders], "diff": diff}
    return payload, 1 if plan.blocked else 0


def render(payload: dict, args) -> str:
    width = max([len(r["result"]) for r in payload["fixes"]] or [0])
    lines = [f"environment: {payload['python']}"]
    lines += [f"{r['result']:<{width}}  {r['fix']}: {r['detail']}" for r in payload["fixes"]]
    lines += [f"note: {note}" for note in payload["notes"]]
    if payload["check"]:
        sys.stderr.write("\n".join(lines) + "\n(--check: nothing was written)\n")
        return payload["diff"]
    if any(r["result"] in ("failed", "not-applicable") for r in payload["fixes"]):
        lines.append("nothing was written")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    stage = {"writing": False}

    def interrupted() -> str:
        if stage["writing"]:
            return "interrupted; the journal holds what was under way: the next patch-env (or --undo) completes it"
        return "interrupted; nothing was changed"

    return run_command("patch-env", argv, parse_args, partial(work, stage=stage), render, interrupted)


if __name__ == "__main__":
    exit_quietly(main())
