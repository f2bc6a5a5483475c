"""`tools/fixes status`: which fixes matter for what is installed here (the
runtime hot-fixes are in hotfixes.py).

For each fix: its project, the installed version of the project's distribution,
the backend here, and whether the installed files already contain the fix (the
fix's presence check run on the installed files, read as text: nothing of the
upstream package is imported for it). `--run` also runs each reproducer
(still_needed.check). Exit codes: 0 ok; 2 bad input (one line on stderr);
3 internal error; 130 interrupted.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path

from tools.fixlib.apply import FileOutcome, Status, apply_change, decode, summarise
from tools.fixlib.errors import ArgumentParser, UserError, guarded
from tools.fixlib.gitrun import one_line
from tools.fixlib.model import Fix, Unreadable
from tools.fixlib.projects import PROJECTS, Project
from tools.fixlib.registry import discover

NOT_FIXED, FIXED, NOT_APPLICABLE, FAILED = "not fixed", "already fixed", "not applicable", "failed"  # installed files; still_needed.py says what reproducers find
NOT_INSTALLED = "not installed"
BUILT_IN = "not in the installed package (C++/tests: built into the binary)"


# --- what is installed -------------------------------------------------------------------
def dist_name(project: Project) -> str:
    return project.dist or "jaxlib"  # XLA ships inside jaxlib


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def backend() -> dict:
    """The accelerator torch would use here, without torch: unknown."""
    if importlib.util.find_spec("torch") is None:
        return {"name": None, "devices": None, "detail": "torch not installed: backend unknown"}
    try:
        import torch

        from tools.fixlib.repro import torch_backend

        name = torch_backend()
        devices = torch.cuda.device_count() if name != "cpu" else 0
    except Exception as err:  # a broken torch install: say so, do not fail the report
        return {"name": None, "devices": None, "detail": f"torch does not import: {one_line(err)}"}
    return {"name": name, "devices": devices, "detail": f"torch {torch.__version__}"}


def package_dir(package: str, dist: str) -> Path | None:
    """Where `import <package>` would load it from (find_spec does not run a
    top-level package), else the distribution's own copy."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    try:
        return Path(importlib.metadata.distribution(dist).locate_file(package))
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_path(project: Project, repo_path: str, site: Path | None = None) -> Path | None:
    """The installed file for an upstream repository path (it may not exist), or
    None when such a file is never installed (C++ sources, tests). `site`
    replaces the directory holding the packages (site-packages), e.g. for a
    patched copy."""
    package = project.markers[0].removeprefix(project.wheel_root).split("/")[0]
    if not repo_path.endswith(".py") or not repo_path.startswith(f"{project.wheel_root}{package}/"):
        return None
    rel = repo_path.removeprefix(project.wheel_root)
    if site is None:
        where = package_dir(package, dist_name(project))
        site = where.parent if where else Path(sys.prefix, "(no installed package)")
    return site / rel


def check_installed(fix: Fix, site: Path | None = None) -> dict:
    """The fix's presence check on the installed files."""
    project = PROJECTS[fix.upstream]
    dist, version = dist_name(project), installed_version(dist_name(project))
    row = {"fix": fix.id, "project": fix.upstream, "dist": dist, "version": version,
           "backends": list(fix.backends)}
    paths = {c.path: installed_path(project, c.path, site) for c in fix.changes}
    if not any(paths.values()):
        return {**row, "installed_files": BUILT_IN, "applies": None,
                "detail": ", ".join(paths) + ": compiled or test files, not shipped in the wheel"}
    if version is None:
        return {**row, "installed_files": NOT_INSTALLED, "applies": None,
                "detail": f"{dist} is not installed in {sys.prefix}"}
    outcomes = []
    for change in fix.changes:
        path = paths[change.path]
        if path is None:
            continue  # a C++/test file next to Python ones: judged on the Python ones
        if not path.is_file():
            outcomes.append(FileOutcome(change.path, Status.NOT_APPLICABLE,
                                        f"{path}: not in the installed {dist} {version}", optional=change.optional))
            continue
        try:
            outcomes.append(apply_change(change, decode(str(path), path.read_bytes())))
        except (OSError, Unreadable) as err:
            outcomes.append(FileOutcome(change.path, Status.FAILED, f"{path}: {one_line(err)}"))
    outcome = summarise(fix, tuple(outcomes))
    state = {Status.APPLIED: NOT_FIXED, Status.ALREADY_APPLIED: FIXED,
             Status.NOT_APPLICABLE: NOT_APPLICABLE, Status.FAILED: FAILED}[outcome.status]
    if outcome.status is Status.APPLIED:
        detail = "the fix applies; lacking it: " + ", ".join(
            str(paths[f.path]) for f in outcome.files if f.status is Status.APPLIED)
    elif outcome.status is Status.ALREADY_APPLIED:
        detail = "contains the fix: " + ", ".join(str(paths[f.path]) for f in outcome.files)
    else:
        detail = outcome.detail
    return {**row, "installed_files": state, "applies": outcome.status in (Status.APPLIED, Status.ALREADY_APPLIED),
            "detail": detail}


def collect(fixes: list[Fix] | None = None, run: bool = False, timeout: float = 600.0,
            site: Path | None = None, progress=lambda msg: None) -> dict:
    fixes = discover() if fixes is None else fixes
    here = backend()
    rows = []
    for fix in fixes:
        row = check_installed(fix, site)
        row["affects_backend_here"] = here["name"] in fix.backends if here["name"] else None
        rows.append(row)
    if run:
        from tools.fixlib.still_needed import check

        for n, (fix, row) in enumerate(zip(fixes, rows), 1):
            progress(f"[{n}/{len(fixes)}] running the reproducer of {fix.id} (limit {timeout:.0f} s)")
            found = check(fix, timeout)
            row["reproducer"] = {"status": found["status"], "detail": found["detail"]}
        progress("")
    return {"python": sys.prefix, "backend": here, "fixes": rows, "exit_code": 0}


# --- rendering ---------------------------------------------------------------------------
_COLOURS = {NOT_FIXED: "33", FIXED: "32", FAILED: "31", NOT_APPLICABLE: "2", NOT_INSTALLED: "2", BUILT_IN: "2",
            "still-needed": "33", "fixed-upstream": "32", "cannot-run-here": "2"}


def render(report: dict, colour: bool = False) -> str:
    def paint(text: str, key: str, width: int = 0) -> str:
        padded = f"{text:<{width}}"
        return f"\033[{_COLOURS[key]}m{padded}\033[0m" if colour and key in _COLOURS else padded

    b = report["backend"]
    where = f"{b['name']}, {b['devices']} GPU(s) ({b['detail']})" if b["name"] else b["detail"]
    head = ("FIX", "PROJECT", "INSTALLED", "FOR", "INSTALLED FILES")
    run = any("reproducer" in r for r in report["fixes"])
    rows = [(r["fix"], r["project"], f"{r['dist']} {r['version'] or 'not installed'}",
             ",".join(r["backends"]) + ("" if r["affects_backend_here"] is not False else " (not here)"),
             r["installed_files"]) for r in report["fixes"]]
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(4)]
    lines = [f"python: {report['python']}", f"backend: {where}", ""]
    lines.append("  ".join(f"{h:<{w}}" for h, w in zip(head, widths)) + "  " + head[4])
    for r, cells in zip(report["fixes"], rows):
        lines.append("  ".join(f"{c:<{w}}" for c, w in zip(cells, widths)) + "  " + paint(cells[4], cells[4]))
        lines.append(f"    {r['detail']}")
        if run:
            rep = r["reproducer"]
            lines.append(f"    reproducer: {paint(rep['status'], rep['status'])}: {rep['detail']}")
    return "\n".join(lines) + "\n"


# --- CLI ---------------------------------------------------------------------------------
def parse_args(argv: list[str]) -> argparse.Namespace:
    if argv and argv[0] == "status":
        argv = argv[1:]
    elif argv and not argv[0].startswith("-"):
        raise UserError(f"unknown command {argv[0]!r} (commands: status)")
    p = ArgumentParser(prog="fixes status", description="which fixes the installed libraries need")
    p.add_argument("--run", action="store_true", help="also run each fix's reproducer in a subprocess")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per reproducer (--run)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    if not args.timeout > 0:
        raise UserError("--timeout must be a positive number of seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    if "BUILD_WORKING_DIRECTORY" in os.environ:  # under `bazel run`
        os.chdir(os.environ["BUILD_WORKING_DIRECTORY"])
    tty = sys.stderr.isatty()

    def progress(msg: str) -> None:
        if tty:
            print(f"\r\033[K{msg}", end="" if msg else "\r", file=sys.stderr, flush=True)

    args = None

    def work():
        nonlocal args
        args = parse_args(sys.argv[1:] if argv is None else argv)
        return collect(run=args.run, timeout=args.timeout, progress=progress)

    report, code = guarded("fixes", work, "interrupted", cleanup=lambda: progress(""))
    if code is not None:
        return code
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report, colour=sys.stdout.isatty() and not os.environ.get("NO_COLOR")), end="")
    return report["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
