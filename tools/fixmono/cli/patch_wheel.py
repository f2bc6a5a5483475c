"""`tools/patch_wheel WHEEL SERIES_DIR [--out DIR] [--suffix fixmono]`: exit 0
when the new wheel is written and verified, 2 on bad input (one line)."""
from __future__ import annotations

import argparse
from pathlib import Path

from fixmono.cli.early import exit_quietly
from fixmono.cli.guard import ArgumentParser, os_error_as_user_error, run_command
from fixmono.output.wheel import patch_wheel


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(prog="patch_wheel", description="apply a series' Python-only fixes to a built wheel")
    p.add_argument("wheel", type=Path)
    p.add_argument("series", type=Path)
    p.add_argument("--out", type=Path, default=Path("."), help="where the new wheel goes (default: here)")
    p.add_argument("--suffix", default="fixmono", help="local version label (default: fixmono)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p.parse_args(argv)


def work(args: argparse.Namespace) -> tuple[dict, int]:
    try:
        result = patch_wheel(args.wheel, args.series, args.out, args.suffix)
    except OSError as err:  # an unreadable wheel, --out gone mid-run: bad input, not a bug
        raise os_error_as_user_error(err) from None
    return {"wheel": str(result.wheel), "fixes": result.fixes, "verified": result.verified}, 0


def render(payload: dict, args) -> str:
    return ("".join(f"verified: {line}\n" for line in payload["verified"])
            + f"wrote {payload['wheel']} with {len(payload['fixes'])} fix(es): {', '.join(payload['fixes'])}\n")


def main(argv: list[str] | None = None) -> int:
    return run_command("patch_wheel", argv, parse_args, work, render, "interrupted; no wheel was written")


if __name__ == "__main__":
    exit_quietly(main())
