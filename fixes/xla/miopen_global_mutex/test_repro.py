"""The JAX reproducer on CPU (8 host devices), and its crash verdict through a
fault-injecting double (the child kills itself with SIGSEGV)."""

from fixmono.model.fix import Verdict
from fixmono.fixes.xla.miopen_global_mutex import repro


def test_cpu_devices_not_reproduced_and_mitigation_measured():
    result = repro.reproduce(timeout=240)
    assert result.verdict is Verdict.NOT_REPRODUCED, result.summary
    cold, warm = result.details["cold"], result.details["warm"]
    assert cold["devices"] == repro.HOST_DEVICES and cold["platform"] == "cpu"
    assert max(cold["max_abs_diff_vs_device0"]) == 0.0
    assert len(warm["warm_up_s"]) == repro.HOST_DEVICES
    assert result.needs == repro.NEEDS


def test_a_segfaulting_child_is_a_verdict(monkeypatch):
    monkeypatch.setenv(repro.SEGFAULT_DOUBLE, "1")
    result = repro.reproduce(devices=2, timeout=240)
    assert result.verdict is Verdict.REPRODUCED
    assert "SIGSEGV" in result.summary


def test_in_flight_peak():
    assert repro.in_flight_peak([(0, 2), (1, 3), (2.5, 4)]) == 2
    assert repro.in_flight_peak([(0, 1), (2, 3)]) == 1
