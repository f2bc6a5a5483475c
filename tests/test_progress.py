"""Long runs say where they are (output/progress.py): with stderr not a
terminal, one line per finished step (`[n/N] step: verdict (s)`), on a terminal
one redrawn line with a bar; stopped by Ctrl-C, the table of what finished
comes before the last line. The commands are run in-process with their
reproducers replaced by doubles (FakeReproducer: instant verdicts, and a
Ctrl-C at a chosen step): the real reproducers take minutes."""
import io
import re

import pytest

from fixmono.analysis import behaviour, status
from fixmono.cli import drift, make_patch
from fixmono.cli import status as status_cli
from fixmono.model.registry import discover
from fixmono.output.progress import STEP_LINE, Progress
from fixmono.testing import make_repo
from tests.helpers import pytorch_files

STEP = re.compile(r"^\[ *(\d+)/(\d+)\] (\S+)(?: @ \S+)?: (.+) \((\d+\.\d) s\)$")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def steps(err: str) -> list[tuple]:
    return [m.groups() for line in err.splitlines() if (m := STEP.match(line))]


def test_not_a_terminal_one_line_per_finished_step():
    out = io.StringIO()
    p = Progress(total=3, stream=out)
    p("building the environment")  # a note: not a line in a log
    p.finished("a", "reproduced", 1.25)
    p.finished("b", "not-reproduced", 0.5)
    assert out.getvalue() == "[1/3] a: reproduced (1.2 s)\n[2/3] b: not-reproduced (0.5 s)\n"
    assert all(STEP_LINE.match(line) for line in out.getvalue().splitlines())
    assert not STEP_LINE.match("make_patch: error: --out /x: cannot write there")


def test_a_terminal_gets_one_redrawn_line_with_a_bar():
    out = Terminal()
    p = Progress(total=4, stream=out)
    p("starting a")
    p.finished("a", "reproduced", 2.0)
    p.clear()
    text = out.getvalue()
    assert "\n" not in text and text.count("\r\033[K") == 3
    assert "[#####---------------] [1/4] a: reproduced" in text


def test_stopped_prints_what_finished_and_returns_the_last_line():
    out = io.StringIO()
    p = Progress(total=5, stream=out)
    p.finished("first-fix", "reproduced", 3.0)
    assert p.stopped("interrupted") == "interrupted"
    assert out.getvalue().endswith("finished before it stopped (1 of 5):\n  first-fix  reproduced (3.0 s)\n")
    empty = Progress(stream=io.StringIO())
    assert empty.stopped() == "interrupted" and empty.table() == ""


def schedule_order(fixes):
    """The order --jobs 1 runs them in: those that run alone, then those needing a GPU, then the rest."""
    return sorted(fixes, key=lambda f: (not f.repro_alone, f.repro_needs not in ("cuda", "rocm")))


class FakeReproducer:
    """still_needed.check's double: a verdict at once, Ctrl-C at call `stop_at`."""

    def __init__(self, stop_at=None):
        self.calls, self.stop_at = 0, stop_at

    def __call__(self, fix, timeout, python=None, **kwargs):
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return {"status": "still-needed", "detail": f"double for {fix.id}"}


def test_status_run_prints_a_line_per_reproducer(monkeypatch, capsys):
    monkeypatch.setattr(status, "check", FakeReproducer())
    assert status_cli.main(["status", "--run", "--jobs", "1"]) == 0  # one at a time: the lines in fix order
    err = capsys.readouterr().err
    found = steps(err)
    n = len(discover())
    assert [int(s[0]) for s in found] == list(range(1, n + 1)) and {s[1] for s in found} == {str(n)}
    assert [s[2] for s in found] == [f.id for f in schedule_order(discover())]
    assert {s[3] for s in found} == {"still-needed"}


def test_status_run_interrupted_prints_the_table_of_what_finished(monkeypatch, capsys):
    monkeypatch.setattr(status, "check", FakeReproducer(stop_at=3))
    assert status_cli.main(["status", "--run", "--jobs", "1"]) == 130
    err = capsys.readouterr().err.splitlines()
    first, second = (f.id for f in schedule_order(discover())[:2])
    assert err[-1].endswith(": interrupted")
    table = err[err.index(f"finished before it stopped (2 of {len(discover())}):"):-1]
    assert [row.split()[:2] for row in table[1:]] == [[first, "still-needed"], [second, "still-needed"]]


def fake_run_one(stop_at=None):
    calls = []

    def run_one(fix, version, static, bases, timeout, pip_args, progress, fresh=False, env=None):
        calls.append(fix.id)
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return behaviour.Run(version, static, behaviour.REPRODUCED, "double", "", 0.1)
    return run_one


def test_drift_run_installed_prints_a_line_per_run_and_the_table_on_ctrl_c(monkeypatch, capsys):
    monkeypatch.setattr(behaviour, "run_one", fake_run_one())
    code = drift.main(["--run", "--installed"])
    assert code in (0, 1)
    err = capsys.readouterr().err
    lines = steps(err)
    assert lines and all(s[3] == "reproduced" for s in lines) and len(lines) == int(lines[0][1])
    monkeypatch.setattr(behaviour, "run_one", fake_run_one(stop_at=2))
    assert drift.main(["--run", "--installed"]) == 130
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "drift_matrix: interrupted; no report was written"
    assert err[-3].startswith("finished before it stopped (1 of ") and "reproduced" in err[-2]


def test_drift_run_matrix_reports_each_run_from_its_worker_threads():
    fixes = [f for f in discover() if f.upstream == "transformers"][:2]
    cells = {f.id: [type("Cell", (), {"version": v, "status": "applied"})() for v in ("5.0.0", "5.1.0", "5.2.0")]
             for f in fixes}
    out = io.StringIO()
    progress = Progress(total=6, stream=out)
    original = behaviour.run_one
    behaviour.run_one = fake_run_one()
    try:
        behaviour.run_matrix(cells, fixes, [], 2, 10.0, [], progress)
    finally:
        behaviour.run_one = original
    found = steps(out.getvalue())
    assert sorted(int(s[0]) for s in found) == list(range(1, 7)) and len(out.getvalue().splitlines()) == 6


def test_make_patch_all_prints_a_line_per_fix(tmp_path, capsys):
    repo = make_repo(tmp_path / "pytorch", pytorch_files())
    assert make_patch.main(["--all", "--upstream", str(repo), "--check"]) == 0
    found = steps(capsys.readouterr().err)
    pytorch = [f.id for f in discover() if f.upstream == "pytorch"]
    assert [s[2] for s in found] == pytorch and found[-1][:2] == (str(len(pytorch)), str(len(pytorch)))


def test_quiet_prints_no_step_and_no_table(monkeypatch, capsys):
    monkeypatch.setattr(status, "check", FakeReproducer(stop_at=3))
    assert status_cli.main(["status", "--run", "--quiet", "--jobs", "1"]) == 130
    assert capsys.readouterr().err.splitlines() == ["fixes: interrupted"]
    monkeypatch.setattr(status, "check", FakeReproducer())
    assert status_cli.main(["status", "--run", "-q"]) == 0 and capsys.readouterr().err == ""


def test_a_closed_stderr_writes_nothing_and_fails_nothing(monkeypatch, capsys):
    monkeypatch.setattr(status, "check", FakeReproducer())
    monkeypatch.setattr("sys.stderr", None)  # `2>&-`: Python has no sys.stderr
    p = Progress(total=2)
    p("note")
    p.finished("a", "reproduced", 1.0)
    assert p.stopped() == "interrupted" and p.quiet
    closed = io.StringIO()
    closed.close()
    q = Progress(total=1, stream=closed)
    q.finished("a", "reproduced", 1.0)  # a closed stream is no terminal, and a write to it is dropped
    assert not q.tty


def test_the_bar_fits_the_terminal_stderr_is_on(monkeypatch):
    out = Terminal()
    monkeypatch.setattr("os.get_terminal_size", lambda fd: __import__("os").terminal_size((40, 20)))
    out.fileno = lambda: 2
    p = Progress(total=7, stream=out)
    p.finished("pytorch-batchnorm-negative-running-var", "applied", 0.1)
    drawn = out.getvalue().split("\r\033[K")[-1]
    assert len(drawn) <= 39 and drawn.startswith("[##")


def test_an_error_after_the_bar_starts_on_its_own_line(monkeypatch):
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr(status, "check", FakeReproducer())

    def broken(*args, **kwargs):
        status_cli.Progress.__call__(progress_seen[0], "running something")
        raise status.UserError("--python /x: no such file")
    progress_seen = []
    original = status_cli.Progress

    class Seen(original):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            progress_seen.append(self)
    monkeypatch.setattr(status_cli, "Progress", Seen)
    monkeypatch.setattr(status_cli, "collect", broken)
    assert status_cli.main(["status", "--run"]) == 2
    text = err.getvalue()
    assert text.endswith("\r\033[Kfixes: error: --python /x: no such file\n"), repr(text[-120:])


def test_a_lost_ray_run_is_a_step_line():
    from fixmono.analysis import on_ray
    out = io.StringIO()
    p = Progress(total=2, stream=out)
    run = on_ray.lost("5.1.0", "applied", 1, "lost: node died")
    on_ray.step_done(p, "transformers-x @ 5.1.0", "lost: its node died", run.seconds)
    assert STEP_LINE.match(out.getvalue().strip()), out.getvalue()


def test_make_patch_all_interrupted_prints_the_table_and_leaves_the_checkout(tmp_path, monkeypatch, capsys):
    from fixmono.apply import run as apply_run
    from fixmono.testing import snapshot
    repo = make_repo(tmp_path / "pytorch", pytorch_files())
    before = snapshot(repo)
    real, calls = apply_run.apply_fix, []

    def stop_at_the_third(fix, read, *rest):
        calls.append(fix.id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(fix, read, *rest)
    monkeypatch.setattr(apply_run, "apply_fix", stop_at_the_third)
    assert make_patch.main(["--all", "--upstream", str(repo), "--out", str(tmp_path / "series")]) == 130
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "make_patch: interrupted; the checkout was not changed"
    table = err[err.index(f"finished before it stopped (2 of {len(discover_pytorch())}):"):-1]
    assert [row.split()[0] for row in table[1:]] == calls[:2]
    assert snapshot(repo) == before and not (tmp_path / "series").exists()


def discover_pytorch():
    return [f for f in discover() if f.upstream == "pytorch"]
