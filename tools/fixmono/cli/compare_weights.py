"""`tools/compare_weights A B [--all]`: two safetensors files or folders,
tensor by tensor. Exit 0 when every tensor is bitwise equal, 1 when any
differs, 2 on bad input."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from fixmono.bench.weights import compare, load, summary
from fixmono.cli.early import exit_quietly
from fixmono.cli.guard import ArgumentParser, os_error_as_user_error, run_command, tool_name


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(prog=tool_name("compare_weights"),
                       description="two safetensors files or folders, tensor by tensor")
    p.add_argument("first", type=Path)
    p.add_argument("second", type=Path)
    p.add_argument("--all", action="store_true", help="list equal tensors too")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    return p.parse_args(argv)


def work(args: argparse.Namespace) -> tuple[dict, int]:
    try:
        diffs = compare(load(args.first), load(args.second))
    except OSError as err:
        raise os_error_as_user_error(err) from None
    shown = [d for d in diffs if args.all or not d.equal]
    return ({"tensors": [dataclasses.asdict(d) for d in shown], "summary": summary(diffs)},
            0 if all(d.equal for d in diffs) else 1)


def render(payload: dict, args) -> str:
    def about(d: dict) -> str:
        return d["note"] or f"max |delta| {d['max_abs_delta']:.3g}, {d['differing']} differing elements"

    lines = [f"{'equal ' if d['equal'] else 'DIFFER'}  {d['name']}  {about(d)}" for d in payload["tensors"]]
    return "".join(f"{line}\n" for line in lines) + payload["summary"] + "\n"


def main(argv: list[str] | None = None) -> int:
    return run_command("compare_weights", argv, parse_args, work, render)


if __name__ == "__main__":
    exit_quietly(main())
