"""`tools/patch_wheel WHEEL SERIES_DIR|--diff FILE... [--out DIR] [--suffix fixmono] [--expect-sha256 HEX]`
and `tools/patch_wheel --verify OUTPUT`: exit 0 when the new wheel is written
and verified (or the output wheel checks out), 2 on bad input (one line)."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from fixmono.cli.early import exit_quietly
from fixmono.cli.guard import ArgumentParser, os_error_as_user_error, run_command, tool_name
from fixmono.cli.strip import add_strip, check_strip
from fixmono.model.errors import UserError
from fixmono.model.patchfile import read_patches
from fixmono.output.wheel import check_patched, patch_wheel


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(prog=tool_name("patch_wheel"), description="apply a series' Python-only fixes to a built wheel")
    p.add_argument("wheel", type=Path, help="the wheel to patch (with --verify: a wheel patch_wheel wrote)")
    p.add_argument("series", type=Path, nargs="?", help="the folder make_patch wrote the series to")
    p.add_argument("--diff", action="append", default=[], metavar="FILE",
                   help="a patch file to port onto the wheel's files instead of a series (repeatable, in order; a "
                        "quilt folder, a folder of NNNN-*.patch or an mbox: its patches in order)")
    add_strip(p, "the level under which its files are in the wheel")
    p.add_argument("--out", type=Path, default=Path("."), help="where the new wheel goes (default: here)")
    p.add_argument("--suffix", default="fixmono", help="local version label (default: fixmono)")
    p.add_argument("--expect-sha256", metavar="HEX", help="refuse the input wheel unless its sha256 is this")
    p.add_argument("--verify", action="store_true",
                   help="check a wheel patch_wheel wrote: RECORD, its provenance, each recorded fix's presence")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    if args.verify and (args.series or args.expect_sha256 or args.diff):
        raise UserError("--verify takes only the wheel to check")
    if args.series is not None and args.diff:
        raise UserError("give a series folder or --diff files, not both")
    if not args.verify and args.series is None and not args.diff:
        raise UserError("the following arguments are required: series (or --diff FILE)")
    check_strip(args)
    if args.expect_sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", args.expect_sha256):
        raise UserError(f"--expect-sha256 {args.expect_sha256!r} is not a sha256 (64 hex digits)")
    return args


def work(args: argparse.Namespace) -> tuple[dict, int]:
    try:
        if args.verify:
            origin, lines = check_patched(args.wheel)
            return {"wheel": str(args.wheel), "provenance": origin, "verified": lines}, 0
        diffs = read_patches(args.diff, sys.stdin.buffer, args.strip) if args.diff else []
        result = patch_wheel(args.wheel, args.series, args.out, args.suffix, args.expect_sha256, diffs)
    except OSError as err:  # an unreadable wheel, --out gone mid-run: bad input, not a bug
        raise os_error_as_user_error(err) from None
    return {"wheel": str(result.wheel), "fixes": result.fixes, "verified": result.verified}, 0


def render(payload: dict, args) -> str:
    lines = "".join(f"verified: {line}\n" for line in payload["verified"])
    if args.verify:
        source = payload["provenance"]["input"]
        fixes = ", ".join(entry["id"] for entry in payload["provenance"]["fixes"])
        return (lines + f"{payload['wheel']}: RECORD holds; built by fixmono "
                f"{payload['provenance']['tool_version']} from {source['wheel']} (sha256 {source['sha256']}) "
                f"with {fixes}\n")
    return lines + f"wrote {payload['wheel']} with {len(payload['fixes'])} fix(es): {', '.join(payload['fixes'])}\n"


def main(argv: list[str] | None = None) -> int:
    return run_command("patch_wheel", argv, parse_args, work, render, "interrupted; no wheel was written")


if __name__ == "__main__":
    exit_quietly(main())
