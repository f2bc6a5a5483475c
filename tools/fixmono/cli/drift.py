"""`tools/drift_matrix`: the fixes over published versions (wheels), or one
fix over a repository's history (--git); with --run, each CPU reproducer
also run against each release (analysis/behaviour.py). A markdown table and
a summary; exit 0 unless make_patch failed somewhere or a reproducer
disagrees with it, 2 on bad input (every argument checked before any
download or walk; with --ray, an address where no Ray cluster answers), 4
when the Ray cluster was lost mid-run (--ray: its head died or stopped
answering for --ray-timeout seconds): then the report still holds every
verdict that finished, the other cells `lost`."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import fixmono
from fixmono.analysis import behaviour, history, status
from fixmono.analysis.drift import RANGES, Cell, chosen_fixes, markdown, matrix, parse_versions, published_versions
from fixmono.analysis.envs import Base
from fixmono.cli.early import exit_quietly
from fixmono.cli.files import check_report_path, check_site_folder, write_report
from fixmono.cli.guard import ArgumentParser, os_error_as_user_error, run_command, tool_name
from fixmono.cli.strip import add_strip, check_strip
from fixmono.engines.port import diff_fixes, project_of
from fixmono.model.errors import UserError
from fixmono.model.patchfile import all_paths, read_patches, resolve_strip
from fixmono.model.projects import PROJECTS, runs_on
from fixmono.model.registry import discover
from fixmono.output.html_report import write_site
from fixmono.output.progress import Progress
from fixmono.output.readmes import fix_readmes
from fixmono.sources.installed import Environment
from fixmono.sources.open import open_upstream
from fixmono.sources.upstream import ObjectStore, detect_project

# the repository's checked-in series, when fixmono runs from the repository
REPOSITORY_PATCHES = Path(fixmono.__file__).absolute().parents[2] / "patches"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(prog=tool_name("drift_matrix"),
                       description="make_patch and the static patch across published versions")
    p.add_argument("--fix", action="append", help="only this fix (repeatable)")
    p.add_argument("--versions", action="append", default=[], metavar="PROJECT=V1,V2",
                   help="versions to check instead of the documented range")
    p.add_argument("--diff", action="append", default=[], metavar="FILE",
                   help="a patch file (format-patch mail or diff -u; '-': stdin) as a fix, instead of --fix")
    add_strip(p, "the level under which its files are in the releases")
    p.add_argument("--history", metavar="PATH",
                   help="with --diff: a git repository (a clone with history, a mirror of upstream) whose objects "
                        "may hold the diff's pre-image blobs (its `index` lines): each release is ported through it")
    p.add_argument("--patches", type=Path, help="the static series (default: the repository's patches/)")
    p.add_argument("--out", type=Path, help="also write the report here")
    p.add_argument("--html", type=Path, metavar="DIR", help="also write the report as a static site (index.html, "
                                                            "a page per fix) into this folder")
    p.add_argument("--full-wheel", action="store_true",
                   help="download each wheel whole and check its sha256 (default: the target files by range requests)")
    p.add_argument("--refresh", action="store_true",
                   help="ask the package indexes again which wheel each release is (default: the answer an earlier "
                        "run kept, with no request: a published release does not change)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr (--run)")
    behaviour_args = p.add_argument_group("run the bug on each release (behavioural matrix)")
    behaviour_args.add_argument("--run", action="store_true",
                                help="also run each CPU reproducer against each release, in that release's environment")
    behaviour_args.add_argument("--jobs", type=int, metavar="N",
                                help="reproducers at a time, each with cores/N threads (default: the cores, as "
                                     "status --run); those that need a GPU one at a time per GPU, those that time "
                                     "things alone")
    behaviour_args.add_argument("--timeout", type=float, default=600.0, metavar="S",
                                help="seconds per reproducer (default 600)")
    behaviour_args.add_argument("--python", action="append", default=[], metavar="PATH",
                                help="the interpreter the reproducers run under, beside each release (default: this "
                                     "one); repeated: the first whose Python version the release installs on")
    behaviour_args.add_argument("--pip-arg", action="append", default=[], metavar="ARG",
                                help="passed to pip when an environment is built, e.g. --pip-arg=--index-url=URL")
    behaviour_args.add_argument("--discard-envs", action="store_true",
                                help="remove each release's environment once its runs are over (default: cached)")
    behaviour_args.add_argument("--installed", action="store_true",
                                help="with --run: only the releases installed in the interpreter, every fix with a "
                                     "reproducer (C++ ones too), no wheel read: e.g. a GPU machine's own stack")
    behaviour_args.add_argument("--fresh", action="store_true",
                                help="run every reproducer again (default: reuse the verdicts of a run with the same "
                                     "fix source, release, backend and interpreters)")
    behaviour_args.add_argument("--ray", metavar="ADDRESS",
                                help="run each cell as a task on this Ray cluster ('auto': RAY_ADDRESS); GPU cells go "
                                     "to nodes offering their backend as a resource (rocm, cuda)")
    behaviour_args.add_argument("--retries", type=int, default=2, metavar="N",
                                help="with --ray: times a cell whose node died runs again elsewhere (default 2)")
    behaviour_args.add_argument("--ray-timeout", type=float, metavar="S",
                                help="with --ray: seconds the cluster has to answer, at connect and at each step of "
                                     "the run; past it the run ends with exit code 4 and what finished (default: "
                                     "FIXMONO_RAY_TIMEOUT, else 30)")
    history_args = p.add_argument_group("over git history instead of wheels")
    history_args.add_argument("--git", type=Path, metavar="CHECKOUT", help="a checkout or bare mirror (one --fix)")
    history_args.add_argument("--range", dest="rev_range", metavar="A..B", help="commits in A..B (default: all to BASE)")
    history_args.add_argument("--since", metavar="DATE", help="only commits after DATE (git log --since)")
    history_args.add_argument("--sample", type=int, metavar="N", help="at most N commits, evenly spread")
    history_args.add_argument("--tips", action="append", default=[], metavar="GLOB",
                              help="also these branches' tips (repeatable), e.g. 'rocm-jaxlib-v*'")
    history_args.add_argument("--base", default="HEAD", help="where the static patch is made (default: HEAD)")
    history_args.add_argument("--csv", type=Path, help="write the points as CSV here")
    history_args.add_argument("--png", type=Path, help="write a timeline PNG here")
    args = p.parse_args(argv)
    if args.diff and (args.fix or args.run or args.git is not None):
        raise UserError("--diff takes the place of --fix, over wheels; it has no reproducer to --run")
    check_strip(args)
    args.patch_files = read_patches(args.diff, sys.stdin.buffer, args.strip) if args.diff else None
    if args.patches is None:
        args.patches = REPOSITORY_PATCHES if REPOSITORY_PATCHES.is_dir() else None
    return args


def behaviour_bases(args: argparse.Namespace) -> list[Base]:
    """--run's arguments checked, and its interpreter probed, before any wheel is read."""
    if not args.run:
        for flag, given in (("--jobs", args.jobs is not None), ("--timeout", args.timeout != 600.0),
                            ("--python", args.python), ("--pip-arg", args.pip_arg),
                            ("--discard-envs", args.discard_envs), ("--fresh", args.fresh),
                            ("--ray", args.ray), ("--retries", args.retries != 2), ("--installed", args.installed),
                            ("--ray-timeout", args.ray_timeout is not None)):
            if given:
                raise UserError(f"{flag} is for --run")
        return []
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: must be 1 or more")
    from fixmono.analysis.schedule import cores

    args.jobs = args.jobs or cores()
    if not args.timeout > 0:
        raise UserError(f"--timeout {args.timeout:g}: must be more than 0")
    if args.retries < 0:
        raise UserError(f"--retries {args.retries}: must be 0 or more")
    if args.ray is None and args.ray_timeout is not None:
        raise UserError("--ray-timeout is for --ray")
    if args.ray is not None:
        if args.discard_envs:
            raise UserError("--discard-envs is for a local run (each node keeps its own environments)")
        return []  # the interpreters are the nodes' (--python paths are paths on the nodes)
    return [Base.of(python) for python in args.python or [sys.executable]]


def over_wheels(args: argparse.Namespace) -> tuple[dict, int]:
    history = ObjectStore(args.history) if args.history else None
    try:
        if args.patch_files:
            fixes, chosen, extra = diff_plan(args)
        else:
            fixes, extra = chosen_fixes(args.fix, discover()), None
            chosen = parse_versions(args.versions, fixes)
        if args.out:
            check_report_path(args.out)
        if args.html:
            check_site_folder(args.html)
        bases = behaviour_bases(args)
        if args.ray is not None:
            from fixmono.analysis import on_ray  # Ray is imported only here

            args.ray_timeout = on_ray.answer_timeout(args.ray_timeout)
            cluster = on_ray.connect(args.ray, args.ray_timeout)
        versions = {project: chosen.get(project) or published_versions(PROJECTS[project].dist, RANGES[project])
                    for project in sorted({f.upstream for f in fixes}) if project in RANGES or project in chosen}
        rows = matrix(fixes, versions, args.patches, args.progress, args.full_wheel, extra, history, args.refresh)
        lost = None
        if args.run and args.ray is not None:
            here, elsewhere = on_ray.runnable(fixes)
            args.progress.total = sum(len(rows[f.id]) for f in here if f.id in rows)
            try:
                runs = on_ray.run_matrix(cluster, {f.id: rows[f.id] for f in here if f.id in rows}, here,
                                         args.python, args.timeout, args.pip_arg, args.retries, args.progress,
                                         args.fresh, args.ray_timeout)
            except on_ray.ClusterLost as err:  # the report of what finished, then exit 4
                runs, lost = err.runs, f"error: --ray {args.ray}: {err}"
        elif args.run:
            here, elsewhere = behaviour.runnable(fixes)
            args.progress.total = sum(len(rows[f.id]) for f in here if f.id in rows)
            runs = behaviour.run_matrix({f.id: rows[f.id] for f in here if f.id in rows}, here, bases, args.jobs,
                                        args.timeout, args.pip_arg, args.progress, args.discard_envs, args.fresh)
    except OSError as err:  # e.g. the wheel cache unwritable: not a bug here
        raise os_error_as_user_error(err) from None
    report = markdown(rows)
    payload = {"matrix": {fix_id: [dataclasses.asdict(c) for c in cells] for fix_id, cells in rows.items()}}
    failed = any(c.status == "failed" for cells in rows.values() for c in cells)
    if args.run:
        report += "\n" + behaviour.markdown(runs, elsewhere)
        payload["runs"] = {fix_id: [dataclasses.asdict(r) for r in rs] for fix_id, rs in runs.items()}
        payload["not_run"] = elsewhere
        payload["pythons"] = [base.python for base in bases] or args.python
        failed = failed or any(r.finding for rs in runs.values() for r in rs)
    if args.out:  # before the output: the report of a minutes-long run is kept even if stdout went away
        write_report(args.out, report)
    if args.html:
        write_site(payload, args.html, fix_readmes())
    payload["markdown"] = report
    if lost:  # the one line guard.py would print; the report and --json payload still follow
        print(f"{tool_name('drift_matrix')}: {lost}", file=sys.stderr)
        payload["error"] = lost.removeprefix("error: ")
        return payload, on_ray.EXIT_LOST
    return payload, 1 if failed else 0


STATIC_OF_INSTALLED = {status.NOT_FIXED: "applied", status.FIXED: "already-applied", status.PATCHED_HERE: "applied",
                       status.NOT_APPLICABLE: "not-applicable", status.FAILED: "failed", status.BUILT_IN: "compiled"}


def diff_plan(args: argparse.Namespace) -> tuple[list, dict[str, list[str]], frozenset]:
    """--diff: its fixes, for the one project --versions names (any PyPI name) or
    its paths are in (a catalogue project's package, over its documented range);
    the strip level decided by the files of the releases checked, each read with
    the diff's paths at every level (the cells read the same cache entries)."""
    patches = args.patch_files
    paths = frozenset().union(*(all_paths(patch) for patch in patches))
    chosen = parse_versions(args.versions, None, paths)
    if len(chosen) > 1:
        raise UserError("--diff: give --versions for one project (the one its paths are in)")
    try:
        project = next(iter(chosen)) if chosen else project_of(patches[0])
    except UserError as err:
        raise UserError(f"{str(err).removesuffix('; nothing was written')}; or name it: --versions NAME=V1,V2 "
                        "(any PyPI name)") from None
    if project not in chosen and project not in RANGES:
        raise UserError(f"--diff: {project} ships no wheels to check")
    versions = chosen.get(project) or published_versions(PROJECTS[project].dist, RANGES[project])
    there: set[str] = set()
    for version in versions:
        try:
            there |= open_upstream(f"pip:{PROJECTS[project].dist}=={version}", args.full_wheel, paths,
                                   any_project=True, refresh=args.refresh).files(paths)
        except UserError:  # a release that cannot be read: its cell says why
            continue
    fixes = diff_fixes([resolve_strip(patch, there.__contains__) for patch in patches], project)
    return chosen_fixes(None, fixes), {project: versions}, paths


def over_installed(args: argparse.Namespace) -> tuple[dict, int]:
    """--run --installed: each fix's reproducer against the release installed here, beside the
    presence check on its installed files (a compiled fix: `compiled`, nothing to read)."""
    if args.versions or args.ray is not None or args.python[1:]:
        raise UserError("--installed runs against this interpreter's own releases: no --versions, --ray or "
                        "second --python")
    fixes = [f for f in discover() if f.reproduce is not None and (not args.fix or f.id in args.fix)]
    if unknown := sorted(set(args.fix or ()) - {f.id for f in discover()}):
        raise UserError(f"unknown fix id(s): {', '.join(unknown)}")
    if args.out:
        check_report_path(args.out)
    if args.html:
        check_site_folder(args.html)
    (base,) = behaviour_bases(args)
    env = Environment.of(base.python)
    rows = {fix.id: status.check_installed(fix, env=env) for fix in fixes}
    not_installed = {fid: f"{row['dist']} is not installed in {env.prefix}" for fid, row in rows.items()
                     if row["version"] is None}
    args.progress.total = len(fixes) - len(not_installed)
    cells = {fid: [Cell(row["version"], STATIC_OF_INSTALLED.get(row["installed_files"], "n/a"), "", "n/a")]
             for fid, row in rows.items() if fid not in not_installed}
    runs = behaviour.run_matrix(cells, fixes, [base], args.jobs, args.timeout, args.pip_arg, args.progress,
                                fresh=args.fresh, gpus=status.gpu_slots(env), gpu_kind=status.gpu_kind(env))
    report = behaviour.markdown(runs, not_installed)
    if args.out:
        write_report(args.out, report)
    if args.html:
        write_site({"runs": {fix_id: [dataclasses.asdict(r) for r in rs] for fix_id, rs in runs.items()},
                    "not_run": not_installed}, args.html, fix_readmes())
    payload = {"runs": {fix_id: [dataclasses.asdict(r) for r in rs] for fix_id, rs in runs.items()},
               "not_run": not_installed, "python": base.python, "markdown": report}
    return payload, 1 if any(r.finding for rs in runs.values() for r in rs) else 0


def over_history(args: argparse.Namespace) -> tuple[dict, int]:
    """--git: every argument checked before the (long) walk."""
    fixes = discover()
    if len(args.fix or []) != 1:
        raise UserError("--git takes exactly one --fix")
    (fix,) = [f for f in fixes if f.id == args.fix[0]] or [None]
    if fix is None:
        raise UserError(f"unknown fix id: {args.fix[0]} (known: {', '.join(f.id for f in fixes)})")
    if args.versions:
        raise UserError("--versions is for wheels; with --git use --range/--since/--tips")
    if args.run:
        raise UserError("--run is for published releases (wheels), not --git history")
    if args.sample is not None and args.sample < 1:
        raise UserError(f"--sample {args.sample}: must be 1 or more")
    for flag, path in (("--out", args.out), ("--csv", args.csv), ("--png", args.png)):
        if path:
            check_report_path(path, flag)
    try:
        upstream = history.open_history(args.git.expanduser().resolve(), args.base)
        project = detect_project(upstream, str(args.git))
        if not runs_on(fix.upstream, project):
            raise UserError(f"--fix {fix.id} targets {fix.upstream}; {args.git} is a {project.name} repository")
        points = history.history(upstream, fix, args.rev_range, args.since, args.sample, args.tips,
                                 args.progress)
    except OSError as err:
        raise os_error_as_user_error(err) from None
    lines = [f"### {fix.id} over {args.git} (BASE {upstream.head[:12]})", "",
             "| commit | date | branch | make_patch | its patch | static patch from BASE |", "|---|---|---|---|---|---|"]
    lines += [f"| {p.commit[:12]} | {p.date[:10]} | {p.ref} | {p.status} | {p.patch} | {p.static} |" for p in points]
    summary = history.summary(points, upstream.head)
    report = "\n".join(lines + [""] + summary) + "\n"
    for path, data in ((args.out, report.encode()), (args.csv, history.to_csv(points).encode()),
                       (args.png, history.timeline_png(points))):
        if path:
            write_report(path, data)
    payload = {"fix": fix.id, "base": upstream.head, "points": [dataclasses.asdict(p) for p in points],
               "summary": summary, "markdown": report}
    return payload, 1 if any(p.status == "failed" for p in points) else 0


def main(argv: list[str] | None = None) -> int:
    progress = Progress()

    def work(args):
        args.progress = progress
        if args.quiet:
            progress.silence()
        try:
            if args.history is not None and (not args.patch_files or not args.history.strip() or args.git is not None
                                             or args.installed):
                raise UserError("--history names a repository holding a --diff's pre-image: give it with --diff "
                                "over published releases (not --git or --installed), not empty")
            if args.git is not None:
                return over_history(args)
            return over_installed(args) if args.installed else over_wheels(args)
        finally:
            progress.clear()

    return run_command("drift_matrix", argv, parse_args, work, lambda payload, args: payload["markdown"],
                       lambda: progress.stopped("interrupted; no report was written"))


if __name__ == "__main__":
    exit_quietly(main())
