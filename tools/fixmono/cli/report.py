"""`fixmono report --html DIR [REPORT.json]`: a saved drift run (`fixmono
drift ... --json > REPORT.json`, with or without --run; '-' or nothing: stdin)
as a static site: index.html (one grid per project, fixes x releases) and a
page per fix with its rows and README. It opens from file:// with no server.
`drift --html DIR` writes the same site at the end of a run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from fixmono.cli.files import check_site_folder
from fixmono.cli.guard import ArgumentParser, run_command
from fixmono.model.errors import UserError, one_line
from fixmono.model.shapes import Maybe, checked
from fixmono.output.html_report import write_site
from fixmono.output.readmes import fix_readmes


def parse_args(argv: list[str]):
    p = ArgumentParser(prog="fixmono report", description="a saved drift run as a static site")
    p.add_argument("report", nargs="?", default="-", metavar="REPORT.json",
                   help="the JSON of `fixmono drift ... --json` ('-' or none: stdin)")
    p.add_argument("--html", required=True, metavar="DIR", help="the folder to write the site into")
    return p.parse_args(argv)


def read_payload(name: str) -> dict:
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        payload = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserError(f"{name}: not a drift report: {one_line(err)}") from None
    matrix, runs = (payload.get("matrix"), payload.get("runs")) if isinstance(payload, dict) else (None, None)
    if matrix is None and runs is None:
        raise UserError(f"{name}: not a drift report: no `matrix` or `runs` (make it with fixmono drift ... --json)")
    for part, wanted in ((matrix, ("version", "status")), (runs, ("version", "static", "verdict"))):
        if part is None:
            continue
        if not isinstance(part, dict):
            raise UserError(f"{name}: not a drift report: `matrix` and `runs` map fix ids to rows")
        for fix_id, rows in part.items():
            if not isinstance(rows, list) or not all(
                    isinstance(r, dict) and all(isinstance(r.get(k), str) for k in wanted) for r in rows):
                raise UserError(f"{name}: not a drift report: the rows of {fix_id!r} are not a list of "
                                f"{{{', '.join(wanted)}, ...}} with text values")
    not_run = payload.get("not_run") or {}
    if not isinstance(not_run, dict) or not all(isinstance(v, str) for v in not_run.values()):
        raise UserError(f"{name}: not a drift report: `not_run` maps fix ids to reasons")
    return checked(payload, REPORT, f"{name}: not a drift report")


TEXT = str  # a row's optional fields: the site writes them as text
REPORT = {"matrix?": Maybe({str: [{"version": str, "status": str, "detail?": TEXT, "static?": TEXT}]}),
          "runs?": Maybe({str: [{"version": str, "static": str, "verdict": str, "detail?": TEXT, "finding?": TEXT,
                                "figures?": dict}]}),
          "not_run?": Maybe({str: str})}


def work(args):
    folder = Path(args.html)
    check_site_folder(folder)
    written = write_site(read_payload(args.report), folder, fix_readmes())
    return {"written": [str(p) for p in written]}, 0


def render(payload, args) -> str:
    return f"wrote {len(payload['written'])} page(s) to {args.html} (open {Path(args.html) / 'index.html'})\n"


def main(argv: list[str] | None = None) -> int:
    return run_command("fixmono report", argv, parse_args, work, render)


if __name__ == "__main__":
    sys.exit(main())
