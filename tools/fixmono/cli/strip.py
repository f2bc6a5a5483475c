"""--strip N, the one option every command that takes --diff shares (as patch -pN)."""
from __future__ import annotations

import argparse

from fixmono.model.errors import UserError


def add_strip(parser: argparse.ArgumentParser, default: str) -> None:
    """--strip N; `default` says where the level comes from without it."""
    parser.add_argument("--strip", type=int, metavar="N",
                        help=f"--diff: take N leading components off its paths (as patch -pN; default: {default})")


def check_strip(args: argparse.Namespace) -> None:
    if args.strip is not None and not args.diff:
        raise UserError("--strip N is for --diff (the level its paths are read at)")
