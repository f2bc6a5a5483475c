"""`status --run --jobs N` (analysis/schedule.py, shared with drift --run): CPU
reproducers overlap up to N, GPU ones never overlap each other (one at a time per
GPU, each seeing its own where there are several), one declared repro_alone
overlaps nothing, the table is in the fixes' order whatever order they finish
in, and Ctrl-C keeps what finished and leaves no reproducer running.

The fixes are made up: their reproducers write when they start and end
(time.monotonic, one clock for every process of the machine) into a folder
and wait for each other's files where a test needs two of them running at once,
so the assertions are about the recorded intervals and their order, never
about how long anything took. The scheduler's own cases run it with threads
and a logical clock."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from fixmono.analysis import schedule, status
from fixmono.cli import status as status_cli
from fixmono.model.errors import FixDeclarationError
from fixmono.model.fix import Dep3, FileChange, Fix
from fixmono.sources import processes
from fixmono.testing import REPO_ROOT
from tests.helpers import with_environ

REPRO = textwrap.dedent("""\
    import json, os, sys, time
    from pathlib import Path

    from fixmono.model.fix import ReproResult, Verdict
    from fixmono.runtime.repro import cli

    LOG = Path(os.environ["FIXMONO_TEST_JOBS_LOG"])


    def reproduce():
        (LOG / "{name}.start").write_text(repr(time.monotonic()))
        seen = {{k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_PREALLOCATE")}}
        deadline = time.monotonic() + {patience}
        while not all((LOG / w).exists() for w in {waits!r}):
            if time.monotonic() > deadline:
                return ReproResult(Verdict.SKIPPED, "gave up waiting for " + ", ".join({waits!r}))
            time.sleep(0.02)
        time.sleep({linger})  # once its waits are there: the process that wrote them has time to exit first
        (LOG / "{name}.end").write_text(repr(time.monotonic()))
        return ReproResult(Verdict.REPRODUCED, json.dumps(seen))


    def main(argv=None):
        return cli(reproduce, "made up", argv)
    """)


class NoTransform:
    engine, description = "python", "never run: the made-up fixes' targets are never installed"


def made_up(root: Path, name: str, needs: str = "cpu", alone: bool = False, waits: tuple[str, ...] = (),
            patience: float = 120.0, linger: float = 0.0) -> Fix:
    """A fix whose reproducer records its interval in $FIXMONO_TEST_JOBS_LOG, ending once the files
    `waits` are there (or after `patience` seconds, skipped). Its target is a C++ file: status reads
    nothing installed for it."""
    package = f"made_up_jobs_{name}"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "repro.py").write_text(REPRO.format(name=name, waits=list(waits), patience=patience,
                                                          linger=linger))
    return Fix(id=f"made-up-{name}", title=name, upstream="transformers", description=name,
               dep3=Dep3(origin="other", last_update="2026-11-27"), backends=(needs,),
               changes=(FileChange("csrc/made_up.cpp", NoTransform()),), reproduce=lambda: None,
               repro_needs=needs, repro_alone=alone, package=package)


@pytest.fixture
def log(tmp_path, monkeypatch):
    """The folder the reproducers write to; the made-up packages importable by them."""
    folder = tmp_path / "log"
    folder.mkdir()
    monkeypatch.setenv("FIXMONO_TEST_JOBS_LOG", str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    return folder


def intervals(log: Path) -> dict[str, tuple[float, float]]:
    return {p.stem: (float(p.read_text()), float((log / f"{p.stem}.end").read_text())) for p in log.glob("*.start")}


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def most_at_once(spans) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])  # an end before a start at a tie
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def run_status(monkeypatch, capsys, fixes: list[Fix], *args: str, gpus=None) -> tuple[int, dict, str]:
    """`fixes status --run --json ARGS` in this process over `fixes`: (exit code, the JSON, stderr)."""
    monkeypatch.setattr(status, "discover", lambda: fixes)
    monkeypatch.setattr(status_cli, "discover", lambda: fixes)
    if gpus is not None:
        monkeypatch.setattr(status, "gpu_slots", lambda env: gpus)
    code = status_cli.main(["status", "--run", "--json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def finished_order(err: str) -> list[str]:
    """The fixes in the order their progress lines came (`[n/N] id: verdict (s)`)."""
    return [line.split("] ", 1)[1].split(":")[0] for line in err.splitlines() if line.startswith("[")]


def test_cpu_reproducers_run_up_to_n_at_once_and_the_table_keeps_the_fix_order(tmp_path, log, monkeypatch, capsys):
    """c1 ends 2 s after c2 has ended and c2 only once c1 has started (so they ran at once, whichever
    interpreter started first on a loaded machine, and finished out of order: c2's process has exited
    first); c3 and c4 wait until 2 of the others started. --jobs 2: never more than 2 at once, each with
    cores/2 threads."""
    fixes = [made_up(tmp_path, "c1", waits=("c2.end",), linger=2.0), made_up(tmp_path, "c2", waits=("c1.start",)),
             made_up(tmp_path, "c3", waits=("c1.start", "c2.start")), made_up(tmp_path, "c4", waits=("c3.start",))]
    code, report, err = run_status(monkeypatch, capsys, fixes, "--jobs", "2")
    assert code == 0, err
    rows = report["fixes"]
    assert [r["fix"] for r in rows] == [f.id for f in fixes]  # the table: the fixes' order
    assert {r["reproducer"]["status"] for r in rows} == {"still-needed"}, rows  # none gave up waiting
    spans = intervals(log)
    assert overlap(spans["c1"], spans["c2"]) and most_at_once(spans.values()) == 2
    assert finished_order(err).index("made-up-c2") < finished_order(err).index("made-up-c1")
    threads = str(max(1, (os.cpu_count() or 1) // 2))
    seen = [json.loads(r["reproducer"]["detail"]) for r in rows]
    assert {(s["OMP_NUM_THREADS"], s["CUDA_VISIBLE_DEVICES"]) for s in seen} == {(threads, "")}  # and no GPU


def test_gpu_reproducers_never_overlap_each_other_and_an_alone_one_overlaps_nothing(tmp_path, log, monkeypatch,
                                                                                    capsys):
    """One GPU, --jobs 4 --per-gpu 1: the cuda and rocm reproducers one after the other, each beside CPU
    ones (g1 ends only once c1 started: they ran at once); the alone one with nothing else."""
    fixes = [made_up(tmp_path, "c1", waits=("g1.start",)), made_up(tmp_path, "g1", "cuda", waits=("c1.start",)),
             made_up(tmp_path, "a1", "cuda", alone=True), made_up(tmp_path, "g2", "rocm"),
             made_up(tmp_path, "c2"), made_up(tmp_path, "c3")]
    code, report, err = run_status(monkeypatch, capsys, fixes, "--jobs", "4", "--per-gpu", "1", gpus=[{}])
    assert code == 0, err
    assert [r["fix"] for r in report["fixes"]] == [f.id for f in fixes]
    assert {r["reproducer"]["status"] for r in report["fixes"]} == {"still-needed"}, report["fixes"]
    spans = intervals(log)
    assert not overlap(spans["g1"], spans["g2"]) and overlap(spans["g1"], spans["c1"])
    assert not any(overlap(spans["a1"], span) for name, span in spans.items() if name != "a1")
    assert json.loads(report["fixes"][2]["reproducer"]["detail"])["OMP_NUM_THREADS"] is None  # every core its own


def test_on_a_machine_of_the_other_gpu_kind_an_alone_reproducer_runs_beside_the_others(tmp_path, log, monkeypatch,
                                                                                       capsys):
    """An NVIDIA machine, one GPU, --per-gpu 2: the rocm reproducer that declares repro_alone (it times what
    only ROCm shows) runs beside the cuda one (each waits for the other's start), on the GPU."""
    fixes = [made_up(tmp_path, "g1", "cuda", waits=("r1.start",)),
             made_up(tmp_path, "r1", "rocm", alone=True, waits=("g1.start",))]
    monkeypatch.setattr(status, "gpu_kind", lambda env: "cuda")
    code, report, err = run_status(monkeypatch, capsys, fixes, "--jobs", "4", gpus=[{"CUDA_VISIBLE_DEVICES": "0"}])
    assert code == 0, err
    assert {r["reproducer"]["status"] for r in report["fixes"]} == {"still-needed"}, report["fixes"]
    assert overlap(*intervals(log).values())
    seen = [json.loads(r["reproducer"]["detail"]) for r in report["fixes"]]
    assert [s["CUDA_VISIBLE_DEVICES"] for s in seen] == ["0", "0"]
    assert [s["XLA_PYTHON_CLIENT_PREALLOCATE"] for s in seen] == ["false", "false"]  # two share the GPU


def test_per_gpu_reproducers_share_one_gpu_and_no_more(tmp_path, log, monkeypatch, capsys):
    """One GPU, --jobs 8 (default --per-gpu 2): g1 and g2 run at once (each waits for the other's start),
    never three GPU ones at once; --per-gpu 0 is one line and exit 2."""
    fixes = [made_up(tmp_path, "g1", "cuda", waits=("g2.start",)), made_up(tmp_path, "g2", "cuda", waits=("g1.start",)),
             made_up(tmp_path, "g3", "cuda"), made_up(tmp_path, "g4", "cuda")]
    code, report, err = run_status(monkeypatch, capsys, fixes, "--jobs", "8", gpus=[{}])
    assert code == 0, err
    assert most_at_once(intervals(log).values()) == 2
    run = subprocess.run([sys.executable, "-m", "fixmono.cli.status", "--run", "--per-gpu", "0"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")})
    assert run.returncode == 2 and run.stderr.splitlines() == ["fixes: error: --per-gpu 0: must be 1 or more"]


def test_schedule_task_holds_a_gpu_of_the_kind_it_needs():
    def fix(needs, alone=False):
        return Fix(id="x", title="x", upstream="transformers", description="x", dep3=Dep3(origin="other", last_update="2026-11-27"),
                   backends=(needs,), changes=(FileChange("csrc/x.cpp", NoTransform()),), reproduce=lambda: None,
                   repro_needs=needs, repro_alone=alone, package="x")

    assert schedule.task(0, fix("rocm"), "cuda") == schedule.Task(0, gpu=True)
    assert schedule.task(0, fix("cuda"), "rocm") == schedule.Task(0, gpu=True)
    assert schedule.task(0, fix("rocm", alone=True), "cuda") == schedule.Task(0, gpu=True, alone=False)
    assert schedule.task(0, fix("rocm", alone=True), "rocm") == schedule.Task(0, gpu=True, alone=True)
    for here in ("rocm", None):  # its own kind, or no GPU known here: as declared
        assert schedule.task(0, fix("rocm"), here) == schedule.Task(0, gpu=True)
    assert schedule.task(0, fix("cpu"), "cuda") == schedule.Task(0, gpu=False)


def test_with_two_gpus_each_gpu_reproducer_sees_its_own(tmp_path, log, monkeypatch, capsys):
    """Two GPUs, --per-gpu 1: g1 and g2 run at once (each waits for the other's start), each with its own
    device; g3 waits for one of them to end (with the default --per-gpu 2 it may start beside them: the
    test was flaky in CI while it left the default)."""
    fixes = [made_up(tmp_path, "g1", "cuda", waits=("g2.start",)), made_up(tmp_path, "g2", "cuda", waits=("g1.start",)),
             made_up(tmp_path, "g3", "cuda")]
    gpus = [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    code, report, err = run_status(monkeypatch, capsys, fixes, "--jobs", "4", "--per-gpu", "1", gpus=gpus)
    assert code == 0, err
    seen = [json.loads(r["reproducer"]["detail"])["CUDA_VISIBLE_DEVICES"] for r in report["fixes"]]
    assert sorted(seen[:2]) == ["0", "1"] and seen[2] in ("0", "1")
    assert most_at_once(intervals(log).values()) == 2


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_jobs_below_one_is_one_line_and_exit_2(jobs):
    run = subprocess.run([sys.executable, "-m", "fixmono.cli.status", "--run", "--jobs", jobs], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")})
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [f"fixes: error: --jobs {jobs}: must be 1 or more"]


def test_jobs_without_run_is_one_line_and_exit_2(capsys):
    assert status_cli.main(["status", "--jobs", "2"]) == 2
    assert capsys.readouterr().err.splitlines() == ["fixes: error: --jobs is for --run"]


def test_repro_alone_is_declared_with_what_it_runs_on():
    with pytest.raises(FixDeclarationError, match="repro_alone"):
        Fix(id="made-up", title="t", upstream="transformers", description="d",
            dep3=Dep3(origin="other", last_update="2026-11-27"), backends=("cpu",),
            changes=(FileChange("csrc/x.cpp", NoTransform()),), repro_alone=True)
    with pytest.raises(FixDeclarationError, match="repro_alone"):
        Fix(id="made-up", title="t", upstream="transformers", description="d",
            dep3=Dep3(origin="other", last_update="2026-11-27"), backends=("cpu",),
            changes=(FileChange("csrc/x.cpp", NoTransform()),), reproduce=print, repro_needs="cpu",
            repro_alone="yes")


def test_ctrl_c_keeps_what_finished_and_leaves_no_reproducer(tmp_path, log):
    """c1 finishes; c2 and c3 wait for a file that never comes. SIGINT once c1's line is out: exit
    130, c1 in the table of what finished, c2 and c3 neither there nor running."""
    marker = f"{time.time_ns()}"
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from fixmono.analysis import status
        from fixmono.cli import status as cli
        from tests.test_status_run_jobs import made_up
        root = Path({str(tmp_path / "fixes")!r})
        fixes = [made_up(root, "c1"), made_up(root, "c2", waits=("never",)), made_up(root, "c3", waits=("never",))]
        status.discover = cli.discover = lambda: fixes
        sys.exit(cli.main(["status", "--run", "--jobs", "3"]))
        """)
    path = os.pathsep.join([str(tmp_path / "fixes"), str(REPO_ROOT / "tools"), str(REPO_ROOT)])
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": path,
                                                                 "FIXMONO_TEST_JOBS_MARK": marker},
                            stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr))
    reader.start()
    try:
        for _ in range(2400):  # the reproducers' start-up: up to two minutes on a loaded machine
            if any("made-up-c1: still-needed" in line for line in lines) and (log / "c2.start").exists() \
                    and (log / "c3.start").exists():
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
    finally:
        proc.kill()
    reader.join(10)
    assert lines[-1].rstrip() == "fixes: interrupted", lines
    table = lines[lines.index("finished before it stopped (1 of 3):\n"):-1]
    assert [row.split()[:2] for row in table[1:]] == [["made-up-c1", "still-needed"]]
    assert with_environ(marker) == [] and not (log / "c2.end").exists()


# the scheduler itself, with threads: a logical clock (a counter) orders what the tasks saw


class Clock:
    def __init__(self):
        self.now, self.lock, self.spans, self.envs = 0, threading.Lock(), {}, {}

    def tick(self) -> int:
        with self.lock:
            self.now += 1
            return self.now

    def work(self, meet: dict | None = None):
        """A task's work: its span on the clock; the tasks in `meet` wait for each other (a barrier)."""
        def run(task, env):
            start = self.tick()
            if meet and task.key in meet:
                meet[task.key].wait(30)  # BrokenBarrierError unless they all run at once
            self.spans[task.key], self.envs[task.key] = (start, self.tick()), env
            return task.key
        return run


def test_schedule_gives_the_results_in_the_given_order_n_at_a_time():
    clock = Clock()
    tasks = [schedule.Task(i) for i in range(7)]
    barrier = threading.Barrier(3)
    out = schedule.run(tasks, clock.work({0: barrier, 1: barrier, 2: barrier}), 3)
    assert list(out) == list(range(7)) and list(out.values()) == list(range(7))
    assert most_at_once(clock.spans.values()) == 3


def test_schedule_one_task_per_gpu_and_alone_ones_by_themselves():
    clock = Clock()
    tasks = [schedule.Task("cpu1"), schedule.Task("gpu1", gpu=True), schedule.Task("alone1", gpu=True, alone=True),
             schedule.Task("gpu2", gpu=True), schedule.Task("gpu3", gpu=True), schedule.Task("alone2", alone=True),
             schedule.Task("cpu2"), schedule.Task("cpu3")]
    gpus = [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    schedule.run(tasks, clock.work(), 8, gpus)
    spans = clock.spans
    for name in ("alone1", "alone2"):
        assert not any(overlap(spans[name], span) for other, span in spans.items() if other != name)
        assert clock.envs[name] == {}
    on = [clock.envs[g]["CUDA_VISIBLE_DEVICES"] for g in ("gpu1", "gpu2", "gpu3")]
    for a, b in ((0, 1), (0, 2), (1, 2)):  # two at once never share a GPU
        assert not overlap(spans[f"gpu{a + 1}"], spans[f"gpu{b + 1}"]) or on[a] != on[b]
    assert most_at_once([spans[g] for g in ("gpu1", "gpu2", "gpu3")]) <= 2
    assert all(clock.envs[c]["CUDA_VISIBLE_DEVICES"] == "" for c in ("cpu1", "cpu2", "cpu3"))  # no GPU


def test_schedule_stops_at_the_first_error_and_commands_may_start_again():
    def work(task, env):
        if task.key == 1:
            raise KeyboardInterrupt  # as a Ctrl-C that lands in a double
        return task.key

    with pytest.raises(KeyboardInterrupt):
        schedule.run([schedule.Task(i) for i in range(4)], work, 1)
    assert processes.bounded(["true"], timeout=30).returncode == 0  # stop_all's refusal was lifted
    assert schedule.run([schedule.Task(i) for i in (0, 2)], work, 2) == {0: 0, 2: 2}


def test_gpu_slots_follow_the_visible_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert schedule.gpu_slots("cuda", 1) == [{}] and schedule.gpu_slots("cpu", 4) == [{}]
    assert schedule.gpu_slots("cuda", 2) == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert schedule.gpu_slots("cuda", 2) == [{"CUDA_VISIBLE_DEVICES": "3"}, {"CUDA_VISIBLE_DEVICES": "5"}]
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    assert schedule.gpu_slots("rocm", 2) == [{"HIP_VISIBLE_DEVICES": "0"}, {"HIP_VISIBLE_DEVICES": "1"}]
