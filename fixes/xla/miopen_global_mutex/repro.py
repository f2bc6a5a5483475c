"""Reproducer: every local device runs its first convolution at the same moment.

    python -m fixmono.fixes.xla.miopen_global_mutex.repro [--devices N] [--timeout S] [--json]

XLA creates convolution runners lazily, at each device's first execution, on
that device's thread (LazyOpRunner -> MIOpenSupport::ConvolveRunnerFromDesc).
The child process compiles one convolution per device one after the other,
then starts one thread per device behind a barrier so that all first
executions, and so all runner creations, overlap. It reports per-device
timing, whether the calls really overlapped, and whether every device gave
the same result. A crash of the child (SIGSEGV in miopen::kernels() on
8x MI300X, ROCm/xla#777) is the verdict `reproduced`, not a failure of this
tool. A second run warms the devices up one at a time first (mitigation.py)
and reports what that costs.

On CPU (8 host devices via --xla_force_host_platform_device_count) and CUDA
there is no MIOpen: the verdict is `not-reproduced` and names what is needed.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

from fixmono.runtime.child import child_env, module_command
from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import report

HOST_DEVICES = 8
# Fault-injecting double for tests: the child dies with SIGSEGV inside the
# concurrent first runs, as MIOpen did in ROCm/xla#777. Not a ROCm run.
SEGFAULT_DOUBLE = "FIXMONO_XLA_SEGFAULT_DOUBLE"
NEEDS = "ROCm GPUs (2 or more; reported on 8x MI300X) with a jaxlib built without the fix"


def child(devices: int | None, warm_up: bool) -> dict:
    """Runs in the subprocess; returns what it saw (or raises)."""
    import jax
    import numpy as np

    from .mitigation import warm_up_one_device_at_a_time

    devs = jax.local_devices()[:devices] if devices else jax.local_devices()
    version = getattr(devs[0].client, "platform_version", "") or ""
    platform = "rocm" if "rocm" in version.lower() else devs[0].platform
    rng = np.random.RandomState(0)
    x = rng.standard_normal((8, 32, 32, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16, 32)).astype(np.float32)

    def conv(a, b):
        return jax.lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    args = [(jax.device_put(x, d), jax.device_put(w, d)) for d in devs]
    step = jax.jit(conv)
    compiled = [step.lower(*a).compile() for a in args]  # one at a time: the race is at first run
    warm = warm_up_one_device_at_a_time(lambda c, a, b: c(a, b), [(c, *a) for c, a in zip(compiled, args)]) \
        if warm_up else []

    barrier, results, errors = threading.Barrier(len(devs)), [None] * len(devs), []
    spans = [None] * len(devs)

    def first_run(i):
        try:
            barrier.wait()
            if os.environ.get(SEGFAULT_DOUBLE) and i == len(devs) - 1:
                os.kill(os.getpid(), signal.SIGSEGV)  # the double: die as MIOpen did in #777
            start = time.perf_counter()
            out = jax.block_until_ready(compiled[i](*args[i]))
            spans[i] = (start, time.perf_counter())
            results[i] = np.asarray(out)
        except Exception as err:  # an XLA/MIOpen error on this device
            errors.append(f"device {i}: {type(err).__name__}: {str(err).splitlines()[0][:200]}")

    threads = [threading.Thread(target=first_run, args=(i,)) for i in range(len(devs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        return {"platform": platform, "devices": len(devs), "errors": errors}
    t0 = min(s for s, _ in spans)
    return {
        "platform": platform, "platform_version": version, "devices": len(devs),
        "device_kind": devs[0].device_kind, "warm_up_s": warm,
        "first_call_ms": [round(1e3 * (e - s), 3) for s, e in spans],
        "start_offset_ms": [round(1e3 * (s - t0), 3) for s, _ in spans],
        "in_flight_peak": in_flight_peak(spans),
        "max_abs_diff_vs_device0": [float(np.abs(r - results[0]).max()) for r in results],
        "errors": [],
    }


def in_flight_peak(spans: list[tuple[float, float]]) -> int:
    """The most first calls running at the same moment."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def run_child(devices: int | None, warm_up: bool, timeout: float) -> dict:
    env = child_env()
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={HOST_DEVICES}").strip()
    cmd = module_command(f"{__package__}.repro", "--child")
    cmd += (["--devices", str(devices)] if devices else []) + (["--warm-up"] if warm_up else [])
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"crash": f"no answer within {timeout:.0f} s (hang?)"}
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return {"crash": f"child killed by {name} during the concurrent first convolutions"}
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"setup_error": f"exit {proc.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


def describe(run: dict) -> str:
    ms = run["first_call_ms"]
    return (f"{run['devices']} {run['platform']} devices, first calls {min(ms):.1f}-{max(ms):.1f} ms, "
            f"up to {run['in_flight_peak']} in flight at once, "
            f"max diff vs device 0 {max(run['max_abs_diff_vs_device0']):.2g}")


def reproduce(devices: int | None = None, timeout: float = 300.0) -> ReproResult:
    cold = run_child(devices, warm_up=False, timeout=timeout)
    if "setup_error" in cold:
        return ReproResult(Verdict.SKIPPED, f"could not set up JAX: {cold['setup_error']}", cold, needs=NEEDS)
    if "crash" in cold or cold["errors"]:
        what = cold.get("crash") or "; ".join(cold["errors"])
        return ReproResult(Verdict.REPRODUCED, what, {"cold": cold})
    wrong = [i for i, d in enumerate(cold["max_abs_diff_vs_device0"]) if d > 1e-3]
    if wrong:
        return ReproResult(Verdict.REPRODUCED, f"devices {wrong} computed a different result; {describe(cold)}",
                           {"cold": cold})
    warm = run_child(devices, warm_up=True, timeout=timeout)
    mitigation = ("warm-up run failed: " + str(warm.get("crash") or warm.get("setup_error") or warm["errors"])
                  if "crash" in warm or "setup_error" in warm or warm["errors"] else
                  f"sequential warm-up took {sum(warm['warm_up_s']):.2f} s in all "
                  f"({', '.join(f'{s:.2f}' for s in warm['warm_up_s'])} s per device), then {describe(warm)}")
    needs = None if cold["platform"] == "rocm" and cold["devices"] > 1 else NEEDS
    return ReproResult(Verdict.NOT_REPRODUCED, f"{describe(cold)}; with warm-up: {mitigation}",
                       {"cold": cold, "warm": warm}, needs=needs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, help="use the first N local devices (default: all)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before a hang is reported")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--warm-up", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.devices, args.warm_up)))
        return 0
    return report(reproduce(args.devices, args.timeout), args.json)


if __name__ == "__main__":
    sys.exit(main())
