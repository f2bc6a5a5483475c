"""--validate on our fixture, the hot-fix on the installed Trainer (5.23.0 in
.venv: affected), the reproducer two-sided on it (real DDP on gloo, 127.0.0.1),
and the rank launcher's clean-up when a rank fails or hangs."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixmono.fixes.transformers.moe_aux_loss_world_size import hotfix, repro, validate
from fixmono.fixes.transformers.moe_aux_loss_world_size.fix import TARGET
from fixmono.fixes.transformers.moe_aux_loss_world_size.transform import TRANSFORM
from fixmono.runtime.child import child_env

FIXTURE = (Path(__file__).resolve().parent / "fixtures" / "trainer.py").read_text()


def test_validate_passes_the_fix_and_catches_wrong_texts():
    fixed = TRANSFORM.rewrite(FIXTURE).source
    assert validate.check({TARGET: FIXTURE}, {TARGET: fixed}) is None
    problem = validate.check({TARGET: FIXTURE}, {TARGET: FIXTURE})  # the bug itself
    assert problem and problem.startswith("coef on the model: loss 8.2 on 4 processes, expected 8.05"), problem
    dropped = fixed.replace(") + router_aux\n", ")\n")  # a "fix" that loses the aux loss
    assert "expected 8.05" in validate.check({TARGET: FIXTURE}, {TARGET: dropped})
    no_text_config = fixed.replace('"text_config", None) or router_config', '"no_such", None) or router_config')
    assert validate.check({TARGET: FIXTURE}, {TARGET: no_text_config}).startswith("coef on the text_config")
    everything = fixed.replace("and labels is None and self.compute_loss_func is None", "")
    assert validate.check({TARGET: FIXTURE}, {TARGET: everything}).startswith("compute_loss_func: loss 8.05")


def test_hotfix_on_the_installed_trainer():
    trainer = pytest.importorskip("transformers.trainer")
    original = trainer.Trainer.compute_loss
    try:
        assert hotfix.enable().startswith("enabled: Trainer.compute_loss scales the token-normalized loss only")
        assert hotfix.enable() == "already enabled"
        assert trainer.Trainer.compute_loss is not original
        assert "router_aux" in trainer.Trainer.compute_loss.__code__.co_varnames
    finally:
        assert hotfix.disable() == "disabled: Trainer.compute_loss back to the installed one"
    assert trainer.Trainer.compute_loss is original
    assert hotfix.disable() == "not enabled; nothing to do"


def ranks_left() -> list[str]:
    run = subprocess.run(["pgrep", "-f", "moe_aux_loss_world_size.ranks|fixmono_test_rank"],
                         capture_output=True, text=True)
    return run.stdout.split()


def test_reproducer_two_sided_on_the_installed_release():
    pytest.importorskip("accelerate")
    run = subprocess.run([sys.executable, "-m", repro.__name__, "--json"], capture_output=True, text=True,
                         env=child_env(), timeout=600)
    result = json.loads(run.stdout)
    if result["verdict"] == "skipped" and "(killed by SIG" in result["summary"]:
        # not the fix's doing (it is Python; its faults are exceptions): this machine killed
        # a gloo rank in both tries; the summary says what the rank printed last
        pytest.skip(f"a Trainer rank was killed by a signal here: {result['summary']}")
    assert run.returncode == 1 and result["verdict"] == "reproduced", run.stdout + run.stderr[-2000:]
    before, after = result["details"]["unpatched"], result["details"]["patched"]
    assert before["ce_rel_diff"] < 1e-5 and after["ce_rel_diff"] < 1e-5  # same data: the harness is sound
    assert abs(before["aux_ratio"] - 2) < 1e-3 and before["grad_rel_diff"] > 0.1
    assert abs(after["aux_ratio"] - 1) < 1e-4 and after["grad_rel_diff"] < 1e-4
    assert ranks_left() == []


@pytest.fixture
def fake_ranks(tmp_path, monkeypatch):
    """A rank module that fails on rank 1 (or hangs on every rank, FIXMONO_TEST_HANG) and sleeps on rank 0."""
    (tmp_path / "fixmono_test_rank.py").write_text(
        "import os, time\n"
        "import atexit, signal\n"
        "if os.environ.get('RANK') == '1' and os.environ.get('FIXMONO_TEST_KILL'):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "if os.environ.get('RANK') == '1' and os.environ.get('FIXMONO_TEST_ABORT'):  # as C++ std::terminate does\n"
        "    print(\"terminate called after throwing an instance of 'std::system_error'\", flush=True)\n"
        "    print('  what():  Resource temporarily unavailable', flush=True)\n"
        "    os.abort()\n"
        "if os.environ.get('RANK') == '1' and not os.environ.get('FIXMONO_TEST_HANG'):\n"
        "    atexit.register(print, '[W1125 warning] ProcessGroup was not destroyed')  # as torch prints\n"
        "    raise ValueError('rank 1 broke')\n"
        "time.sleep(600)\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(repro, "RANKS", "fixmono_test_rank")
    return tmp_path


def test_a_failing_rank_stops_the_group_at_once(fake_ranks, tmp_path):
    started = time.monotonic()
    (tmp_path / "run").mkdir()
    with pytest.raises(RuntimeError, match=r"^g: rank1: ValueError: rank 1 broke \(exit 1\)$"):
        repro.run_groups({"g": (2, False)}, tmp_path / "run")
    assert time.monotonic() - started < 60 and ranks_left() == []


def test_a_killed_rank_is_named_by_its_signal(fake_ranks, tmp_path, monkeypatch):
    monkeypatch.setenv("FIXMONO_TEST_KILL", "1")
    with pytest.raises(RuntimeError, match=r"^g: rank1: printed nothing \(killed by SIGKILL\)$"):
        repro.run_groups({"g": (2, False)}, tmp_path / "run")
    assert ranks_left() == []


def test_an_aborted_rank_says_what_cpp_and_python_printed(fake_ranks, tmp_path, monkeypatch):
    monkeypatch.setenv("FIXMONO_TEST_ABORT", "1")
    with pytest.raises(RuntimeError) as err:
        repro.run_groups({"g": (2, False)}, tmp_path / "run")
    assert str(err.value) == (
        "g: rank1: terminate called after throwing an instance of 'std::system_error' / what():  Resource "
        "temporarily unavailable / Fatal Python error: Aborted / "
        f'File "{fake_ranks / "fixmono_test_rank.py"}", line 8 in <module> (killed by SIGABRT)'), err.value
    assert ranks_left() == []


def test_a_hanging_group_is_killed_at_the_timeout(fake_ranks, tmp_path, monkeypatch):
    monkeypatch.setenv("FIXMONO_TEST_HANG", "1")
    monkeypatch.setattr(repro, "TIMEOUT", 3.0)
    (tmp_path / "run").mkdir()
    with pytest.raises(RuntimeError, match=r"^g: no result in 3 s$"):
        repro.run_groups({"g": (2, False)}, tmp_path / "run")
    assert ranks_left() == []


def test_bad_world_size_is_one_line():
    for bad in ("x", "1", "-2"):
        run = subprocess.run([sys.executable, "-m", repro.__name__, "--world", bad], capture_output=True,
                             text=True, env=child_env(), timeout=120)
        assert run.returncode == 77 and run.stdout.startswith(f"skipped: --world {bad}:"), run.stdout + run.stderr
        assert not run.stderr.strip() or "Traceback" not in run.stderr
