"""The behavioural matrix (drift --run): each fix whose reproducer shows the
mechanism on a CPU, run against every release in its range, each in that
release's own environment (envs.py), beside what make_patch reads in the
same release's wheel. A disagreement between the two is a finding:

- make_patch `applied` (the buggy code is there) but not reproduced: the
  presence check misses a fix that upstream made in another form, or the
  reproducer misses the bug;
- `already-applied` or `not-applicable` but reproduced: the presence check
  takes a release for fixed that is not.

`cannot-run-here` (no wheel for this Python, pip's reason, a timeout) is
never a finding and never counted as a verdict; nor is `lost` (a cluster run
whose node died more times than it may be retried: on_ray.py). A verdict is
reused by the next run with the same inputs (results.py; --fresh runs again).
"""
from __future__ import annotations

import collections
import dataclasses
import threading
import time
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name
from packaging.version import Version

from fixmono.analysis import schedule
from fixmono.analysis import results
from fixmono.analysis.envs import Base, EnvironmentFailed, discard, environment
from fixmono.analysis.still_needed import CANNOT_RUN, FIXED_UPSTREAM, STILL_NEEDED, check
from fixmono.model.fix import Fix
from fixmono.model.projects import PROJECTS
from fixmono.output.progress import step_done
from fixmono.sources.installed import dist_name

REPRODUCED, NOT_REPRODUCED, LOST = "reproduced", "not-reproduced", "lost"
VERDICTS = {STILL_NEEDED: REPRODUCED, FIXED_UPSTREAM: NOT_REPRODUCED, CANNOT_RUN: CANNOT_RUN}


@dataclass
class Run:
    version: str
    static: str  # make_patch's status on the release's files
    verdict: str  # reproduced, not-reproduced, cannot-run-here
    detail: str
    finding: str  # "" when the two agree
    seconds: float
    python: str = ""  # the interpreter it ran under
    python_version: str = ""
    node: dict = field(default_factory=dict)  # results.where(): host, Ray node, accelerator, driver
    attempts: int = 1  # more than 1: its node died and it ran again elsewhere (on_ray.py)
    reused: bool = False  # the verdict of an earlier run with the same inputs
    figures: dict = field(default_factory=dict)  # the reproducer's numbers behind the verdict (its `details`)


def runnable(fixes: list[Fix]) -> tuple[list[Fix], dict[str, str]]:
    """(fixes run here, {fix id: why not} for the others)."""
    here, elsewhere = [], {}
    for fix in fixes:
        if fix.repro_needs == "cpu":
            here.append(fix)
        else:
            elsewhere[fix.id] = not_run_here(fix)
    return here, elsewhere


def not_run_here(fix: Fix) -> str:
    if fix.reproduce is None:
        return "it has no reproducer (fix.py declares no reproduce=)"
    if not fix.repro_needs:
        return "its reproducer names no machine (fix.py declares no repro_needs=: cpu, cuda or rocm)"
    return f"its reproducer needs {fix.repro_needs}"


def finding(static: str, verdict: str) -> str:
    if verdict == NOT_REPRODUCED and static == "applied":
        return "make_patch finds the bug's code (applied), the reproducer does not reproduce the bug"
    if verdict == REPRODUCED and static in ("already-applied", "not-applicable"):
        return f"make_patch says {static}, the reproducer reproduces the bug"
    return ""


def same_release(installed: str | None, version: str) -> bool:
    """The base has this release already (2.13.0+cpu is torch 2.13.0): no environment needed."""
    return installed is not None and Version(installed).public == Version(version).public


def run_one(fix: Fix, version: str, static: str, bases: list[Base], timeout: float, pip_args: list[str],
            progress, fresh: bool = False, env: dict[str, str] | None = None) -> Run:
    """The fix's reproducer against `version`, under the first of `bases`
    whose Python the release installs on (jax 0.11 needs 3.12); the verdict
    of an earlier run with the same inputs unless `fresh`. `env`: variables
    its reproducer runs with (schedule.py: its threads, its GPU)."""
    result_key = results.key(fix, version, [base.key for base in bases])
    earlier = None if fresh else results.load(result_key)
    if earlier is not None:
        verdict = earlier["verdict"]
        return Run(**{**earlier, "static": static, "finding": finding(static, verdict), "reused": True})
    run = run_here(fix, version, static, bases, timeout, pip_args, progress, env)
    if run.verdict in (REPRODUCED, NOT_REPRODUCED):
        results.store(result_key, dataclasses.asdict(run))
    return run


def run_here(fix: Fix, version: str, static: str, bases: list[Base], timeout: float, pip_args: list[str],
             progress, env: dict[str, str] | None = None) -> Run:
    start = time.monotonic()
    dist = dist_name(PROJECTS[fix.upstream])  # XLA ships inside jaxlib
    refused = []
    for base in bases:
        try:
            before = () if same_release(base.installed.get(canonicalize_name(dist)), version) else \
                (str(environment(base, dist, version, pip_args, progress)),)
        except EnvironmentFailed as err:
            refused.append(f"Python {base.version}: {err}")
            if err.wrong_python:
                continue  # the next interpreter may be the one it needs
            break
        progress(f"{fix.id} @ {version}: running the reproducer")
        result = check(fix, timeout, python=base.python, before=before, env=env)
        verdict = VERDICTS[result["status"]]
        return Run(version, static, verdict, result["detail"], finding(static, verdict), time.monotonic() - start,
                   base.python, base.version, results.where(), figures=result["figures"])
    last = bases[len(refused) - 1]
    return Run(version, static, CANNOT_RUN, f"no environment: {'; '.join(refused)}", "", time.monotonic() - start,
               last.python, last.version, results.where())


def run_matrix(statics: dict, fixes: list[Fix], bases: list[Base], jobs: int, timeout: float, pip_args: list[str],
               progress=lambda m: None, discard_envs: bool = False, fresh: bool = False,
               gpus: list[dict[str, str]] | None = None, gpu_kind: str | None = None) -> dict[str, list[Run]]:
    """Every (fix, version) of `statics` ({fix id: [drift.Cell]}), `jobs` at a
    time as schedule.py orders them (`gpus`: one environment per GPU, schedule.gpu_slots);
    with `discard_envs`, a release's environment is removed once its last run
    is over. Ctrl-C (or any error) stops every reproducer and pip it started
    and waits for their clean-up before it propagates."""
    by_id = {f.id: f for f in fixes}

    def release(fix_id: str, version: str) -> tuple[str, str]:
        return dist_name(PROJECTS[by_id[fix_id].upstream]), version

    left = collections.Counter(release(fix_id, c.version) for fix_id, cells in statics.items() for c in cells)
    counting = threading.Lock()
    cells = {(fix_id, i): c for fix_id, cs in statics.items() for i, c in enumerate(cs)}

    def one(task: schedule.Task, env: dict[str, str]) -> Run:
        fix_id, c = task.key[0], cells[task.key]
        try:
            run = run_one(by_id[fix_id], c.version, c.status, bases, timeout, pip_args, progress, fresh, env)
            step_done(progress, f"{fix_id} @ {c.version}", run.verdict + (" (an earlier run's)" if run.reused else ""),
                      run.seconds)
            return run
        finally:
            with counting:
                left[release(fix_id, c.version)] -= 1
                last = left[release(fix_id, c.version)] == 0
            if discard_envs and last:
                for base in bases:
                    discard(base, *release(fix_id, c.version))

    out = schedule.run([schedule.task(key, by_id[key[0]], gpu_kind) for key in cells], one, jobs, gpus or [{}])
    return {fix_id: [out[(fix_id, i)] for i in range(len(cs))] for fix_id, cs in statics.items()}


def summary(runs: dict[str, list[Run]]) -> str:
    every = [r for rs in runs.values() for r in rs]
    count = {v: sum(r.verdict == v for r in every) for v in (REPRODUCED, NOT_REPRODUCED, CANNOT_RUN, LOST)}
    findings = sum(bool(r.finding) for r in every)
    again = [r for r in every if r.attempts > 1]
    reused = sum(r.reused for r in every)
    return (f"reproducers: {len(every)} runs ({count[REPRODUCED]} reproduced, {count[NOT_REPRODUCED]} not-reproduced, "
            f"{count[CANNOT_RUN]} cannot-run-here" + (f", {count[LOST]} lost" if count[LOST] else "") + ")"
            + (f"; {len(again)} ran again after their node died" if again else "")
            + (f"; {reused} verdict(s) reused from an earlier run" if reused else "")
            + f"; {findings} disagreement(s) with make_patch")


def ran_on(run: Run) -> str:
    """host, Ray node (first 8 of its id), accelerator; 'reused' or the attempts when that applies."""
    where = " ".join(filter(None, (run.node.get("host"), run.node.get("ray_node", "")[:8], run.node.get("accelerator"))))
    notes = ["reused"] if run.reused else []
    notes += [f"attempt {run.attempts}"] if run.attempts > 1 else []
    return " ".join([where, *(f"({n})" for n in notes)]).strip()


def markdown(runs: dict[str, list[Run]], elsewhere: dict[str, str]) -> str:
    out = []
    for fix_id, rs in runs.items():
        out += [f"### {fix_id} (reproducer run on each release)", "",
                "| version | make_patch (read) | reproducer (ran) | Python | ran on | s | finding / detail |",
                "|---|---|---|---|---|---|---|"]
        for r in rs:
            note = f"**{r.finding}**: {r.detail}" if r.finding else r.detail
            out.append(f"| {r.version} | {r.static} | {r.verdict} | {r.python_version} | {ran_on(r)} | "
                       f"{r.seconds:.1f} | {note.replace('|', '/')} |")
        out.append("")
    out += [f"- {fix_id}: not run here, {why}" for fix_id, why in elsewhere.items()]
    return "\n".join(out + ([""] if elsewhere else []) + [summary(runs)]) + "\n"
