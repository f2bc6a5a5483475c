"""A run's series and branch put in place together, all or nothing: everything
is built in scratch space first, then put in place in one uninterruptible
step that is undone as a whole if any part of it fails."""
from __future__ import annotations

import signal
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fixmono.model.fix import Fix
from fixmono.model.outcome import FixOutcome, Status
from fixmono.output.branch import create_branch, delete_branch
from fixmono.output.out_dir import SeriesWrite
from fixmono.output.series import Entry, build_commits, series_files
from fixmono.sources.scratch import pause_point
from fixmono.sources.upstream import Upstream

WRITTEN = False  # set once the series/branch are in place: an interrupt after that changes nothing


@dataclass
class Job:
    """One upstream's run, opened and checked before anything is written."""

    group: list[Fix]  # the requested fixes planned for this upstream
    upstream: Upstream | None = None  # None: no default upstream for the project
    fixes: list[Fix] = field(default_factory=list)  # those for the upstream's project
    out: Path | None = None  # where the series goes (checked, resolved); None: no series
    shown_out: str | None = None  # `out` as the user named it
    outcomes: list[FixOutcome] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)  # the patch files written
    branch_tip: str | None = None  # the new branch's commit, once created

    @property
    def entries(self) -> list[Entry]:
        return [Entry(o.fix, o.new_files, o.message_note) for o in self.outcomes if o.status is Status.APPLIED]


def write(jobs: list[Job], branch: str | None) -> None:
    """Every job's series, and the branch `branch` in each job's checkout."""
    writes: list[SeriesWrite] = []
    branches: list[tuple[Job, str]] = []
    try:
        for job in jobs:
            entries = job.entries if job.upstream else []
            if job.out:
                files = series_files(job.upstream, entries)
                writes.append(SeriesWrite(job.out))
                writes[-1].stage(files)
                job.patches = [name for name in files if name.endswith(".patch")]
            if branch and entries:
                branches.append((job, build_commits(job.upstream, entries)[-1]))
        pause_point("staged")
        with signals_held():
            created = []
            try:
                for job, tip in branches:
                    create_branch(job.upstream, tip, branch)
                    created.append((job, tip))
                    job.branch_tip = tip
                    pause_point("branch-created")
                for series in writes:
                    series.commit()
                    pause_point("series-swapped")
            except BaseException:  # undone while signals are still held
                for series in reversed(writes):
                    series.rollback()
                for job, tip in reversed(created):
                    delete_branch(job.upstream, tip, branch)
                raise
            for series in writes:  # the holders go too before a held signal lands: none is left behind
                series.finish()
    except BaseException:
        for series in reversed(writes):
            series.discard()
        for job in jobs:
            job.branch_tip, job.patches = None, []
        raise
    pause_point("written")


@contextmanager
def signals_held():
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is over. Once it
    succeeded the run is complete: a signal that came meanwhile is dropped
    (the series and branch stay, the report is printed, exit 0)."""
    global WRITTEN
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # delivered now: undone, so "not changed" holds
        raise
    WRITTEN = True
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in held}
    signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a pending signal is dropped here
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
