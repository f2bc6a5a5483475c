"""`make_patch --check-upstream`: is the fix still needed by what is installed here?

Each selected fix's reproducer runs in a subprocess with a time limit, against
the libraries installed in this environment (unpatched upstream). Verdicts map
to: reproduced -> still-needed; not-reproduced on the backend the bug needs ->
fixed-upstream; skipped, or not-reproduced while the reproducer says it needs
another backend -> cannot-run-here (with what it needs).
"""
from __future__ import annotations

import json
import subprocess

from fixmono.sources.processes import bounded
from fixmono.model.fix import Fix
from fixmono.runtime.child import child_env, module_command

STILL_NEEDED, FIXED_UPSTREAM, CANNOT_RUN = "still-needed", "fixed-upstream", "cannot-run-here"


def classify(exit_code: int, report: dict | None) -> tuple[str, str]:
    """(status, detail) from a reproducer's exit code and JSON report (one of another shape: none)."""
    if not isinstance(report, dict):
        report = None
    summary = str((report or {}).get("summary", ""))
    needs = (report or {}).get("needs")
    if exit_code == 1 and (report or {}).get("verdict") == "reproduced":
        return STILL_NEEDED, summary
    if exit_code == 77:
        return CANNOT_RUN, f"needs {needs or 'another machine'}: {summary}"
    if exit_code == 0 and needs:
        return CANNOT_RUN, f"not reproduced here, and it needs {needs}: {summary}"
    if exit_code == 0:
        return FIXED_UPSTREAM, summary
    return CANNOT_RUN, f"reproducer failed (exit {exit_code})"


def check(fix: Fix, timeout: float, python: str | None = None, before: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> dict:
    """The fix's reproducer under `python` (default: this interpreter), which
    imports this fixmono from where it is, and first what the folders `before`
    hold (drift --run: one release's environment); `env`: variables set for it
    (schedule.py: its threads, its GPU). Killed with all it
    started on timeout or Ctrl-C (processes.bounded). `figures`: the numbers
    its verdict rests on (the reproducer's `details`), {} where it gave none."""
    module = f"{fix.package}.repro"
    try:
        proc = bounded(module_command("fixmono.runtime.run_repro", module, "--json", python=python),
                       env={**child_env(before=before), **(env or {})}, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"fix": fix.id, "status": CANNOT_RUN, "detail": f"reproducer ran past {timeout:g} s", "figures": {}}
    start = proc.stdout.find("{")
    try:
        report = json.loads(proc.stdout[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        report = None
    status, detail = classify(proc.returncode, report)
    figures = report.get("details") if isinstance(report, dict) else None
    return {"fix": fix.id, "status": status, "detail": detail, "figures": figures if isinstance(figures, dict) else {}}
