"""Shared pieces of the reproducers: backend detection, the verdict printer,
and each side of a two-sided run measured in a fresh interpreter."""
from __future__ import annotations

import json
import subprocess
from typing import Callable

from fixmono.model.fix import ReproResult, Verdict


def torch_backend() -> str:
    """'rocm', 'cuda' or 'cpu': the accelerator this torch build would use."""
    import torch

    if torch.cuda.is_available():
        return "rocm" if getattr(torch.version, "hip", None) else "cuda"
    return "cpu"


def report(result: ReproResult, as_json: bool = False) -> int:
    """Print the verdict (one line, or JSON) and return the CLI exit code:
    1 reproduced, 0 not reproduced, 77 skipped."""
    if as_json:
        print(json.dumps({"verdict": result.verdict.value, "summary": result.summary,
                          "needs": result.needs, "details": result.details}, indent=2, default=str))
    else:
        print(f"{result.verdict.value}: {result.summary}")
        if result.needs:
            print(f"needs: {result.needs}")
    return result.verdict.exit_code


def cli(reproduce, doc: str, argv: list[str] | None = None, options: tuple = (), measure=None) -> int:
    """A reproducer's command line: --json, plus `options` ((flag, help) pairs
    whose values go to reproduce() by name); exit code as report(). With
    `measure` (a function returning a JSON-able dict), also the child side of
    measured_apart: `--measure [--hotfix ID]` prints its result as one line."""
    import argparse

    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    for flag, help_text in options:
        p.add_argument(flag, help=help_text)
    p.add_argument("--json", action="store_true")
    if measure is not None:
        p.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
        p.add_argument("--hotfix", help=argparse.SUPPRESS)
    args = vars(p.parse_args(argv))
    as_json = args.pop("json")
    if args.pop("measure", False):
        return measured(measure, args.pop("hotfix"))
    args.pop("hotfix", None)
    return report(reproduce(**args), as_json)


def measured(measure, fix_id: str | None) -> int:
    """The child side: the hot-fix on first (before the library traces or caches
    anything), then one JSON line: {"hotfix": its message or null, **measure()}."""
    message = None
    if fix_id:
        from fixmono.runtime.hotfixes import enable_hotfixes

        (message,) = enable_hotfixes([fix_id])
    print(MEASURED + json.dumps({"hotfix": message, **measure()}), flush=True)
    return 0


MEASURED = "fixmono-measured: "  # the child's result line, found among whatever else a library prints


class MeasureFailed(Exception):
    """A side of a two-sided run could not be measured here (its last line says why)."""


def measured_apart(module: str, fix_id: str | None = None, timeout: float = 300.0) -> dict:
    """`python -m module --measure [--hotfix fix_id]` in a fresh interpreter: what
    it measured. Each side apart, so that nothing a library traced or cached
    without the fix (jax's jit caches, registered rules) is reused with it."""
    from fixmono.runtime.child import child_env, module_command

    env = {k: v for k, v in child_env().items() if k != "FIXMONO_HOTFIXES"}
    command = module_command(module, "--measure", *(["--hotfix", fix_id] if fix_id else []))
    try:
        run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise MeasureFailed(f"no result in {timeout:.0f} s") from None
    found = [line[len(MEASURED):] for line in run.stdout.splitlines() if line.startswith(MEASURED)]
    if run.returncode != 0 or not found:
        said = [line for line in run.stderr.strip().splitlines() if line.strip()]
        raise MeasureFailed(said[-1][:300] if said else f"exit {run.returncode}, no result printed")
    try:
        return json.loads(found[-1])
    except ValueError as err:
        raise MeasureFailed(f"its result is not JSON ({err})") from None


def two_sided(module: str, fix_id: str, wrong: Callable[[dict], str], needs: str) -> ReproResult:
    """The usual reproducer: `module`'s measure() without and with the fix's hot-fix, each in a fresh
    interpreter (measured_apart); `wrong(side)` says in one line what is wrong in one side's numbers, ""
    when nothing is. Reproduced where the side without the fix is wrong; skipped where a side cannot be
    measured here (`needs`: what it takes, e.g. "torch and transformers (CPU)"). Its details: both sides,
    and `fixed`, whether nothing is wrong with the hot-fix."""
    try:
        before = measured_apart(module)
        after = measured_apart(module, fix_id)
    except MeasureFailed as err:
        return ReproResult(Verdict.SKIPPED, f"needs {needs}: {err}")
    bug, left = wrong(before), wrong(after)
    details = {"unpatched": before, "patched": after, "fixed": not left}
    if not bug:
        return ReproResult(Verdict.NOT_REPRODUCED, "nothing wrong without the fix: " + describe(before), details)
    fixed = "nothing wrong with the hot-fix" if not left else f"with the hot-fix still: {left} ({after['hotfix']})"
    return ReproResult(Verdict.REPRODUCED, f"{bug}; {fixed}", details)


def describe(side: dict) -> str:
    """One side's numbers, one line (what a not-reproduced verdict shows)."""
    return ", ".join(f"{k} {v}" for k, v in side.items() if k != "hotfix")[:300]
