"""Shared pieces of the reproducers: backend detection, the verdict printer."""
from __future__ import annotations

import json

from fixmono.model.fix import ReproResult


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


def cli(reproduce, doc: str, argv: list[str] | None = None, options: tuple = ()) -> int:
    """A reproducer's command line: --json, plus `options` ((flag, help) pairs
    whose values go to reproduce() by name); exit code as report()."""
    import argparse

    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    for flag, help_text in options:
        p.add_argument(flag, help=help_text)
    p.add_argument("--json", action="store_true")
    args = vars(p.parse_args(argv))
    as_json = args.pop("json")
    return report(reproduce(**args), as_json)
