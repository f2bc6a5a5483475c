"""`python -m fixmono.runtime.run_repro MODULE [ARGS...]`: a fix's reproducer,
the way still_needed (make_patch --check-upstream, status --run) runs it. A
library the reproducer imports that is not installed (torch in an
environment without it) is `skipped`, exit 77, naming it: never a traceback,
whose exit 1 would read as a reproduced bug."""
from __future__ import annotations

import importlib
import sys

from fixmono.model.fix import ReproResult, Verdict
from fixmono.runtime.repro import report


def main(argv: list[str]) -> int:
    module_name, *rest = argv
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        missing = (err.name or "").partition(".")[0]
        if not missing or missing == "fixmono" or module_name.startswith(err.name + "."):
            raise  # the reproducer itself is missing: a bug here, not the environment
        return report(ReproResult(Verdict.SKIPPED, f"{err.name} is not installed in {sys.prefix}", needs=missing),
                      "--json" in rest)
    sys.argv = [module_name, *rest]
    return module.main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
