#!/usr/bin/env python3
"""Start-up cost of the wheel's fixmono-hotfixes.pth, measured side by side in
one run: a fresh venv with the built wheel, `python -c pass` RUNS times in
each of three states, interleaved: the .pth moved away (the baseline), the
.pth with FIXMONO_HOTFIXES unset, and set (the import hook installed; the
catalogue is read only when an upstream project is imported).

    .venv/bin/python tools/bench_startup.py [--runs 40]
"""
import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=40)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        wheel = subprocess.run([sys.executable, str(ROOT / "tools" / "build_wheel.py"), "--out", tmp],
                               capture_output=True, text=True, check=True).stdout.strip()
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel],
                       check=True, env={**os.environ, "PIP_CONSTRAINT": ""})
        site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        (site / "libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # libcst etc. from this venv
        pth, away = site / "fixmono-hotfixes.pth", site / "fixmono-hotfixes.pth.away"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FIXMONO_"))}
        states = {"no .pth": (False, base), ".pth, FIXMONO_HOTFIXES unset": (True, base),
                  ".pth, FIXMONO_HOTFIXES=all": (True, {**base, "FIXMONO_HOTFIXES": "all"})}
        times: dict[str, list[float]] = {name: [] for name in states}
        for _ in range(args.runs):
            for name, (with_pth, env) in states.items():
                if with_pth != pth.exists():
                    (away.rename(pth) if with_pth else pth.rename(away))
                start = time.perf_counter()
                subprocess.run([python, "-c", "pass"], env=env, check=True)
                times[name].append(time.perf_counter() - start)
    baseline = statistics.median(times["no .pth"])
    print(f"python -c pass, median of {args.runs} interleaved runs each ({sys.version.split()[0]}):")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"  {name:<30} {median * 1000:7.2f} ms   {(median - baseline) * 1000:+6.2f} ms   x{median / baseline:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
