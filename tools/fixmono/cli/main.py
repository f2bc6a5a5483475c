"""`fixmono COMMAND ...`: the console script of the installed package, one
subcommand per tool (the repository's tools/* launchers run the same mains).

    fixmono status [--run] [--json]
    fixmono make-patch --all --upstream PATH_OR_SPEC [--out DIR] ...
    fixmono patch-wheel WHEEL SERIES_DIR [--out DIR] | --verify OUTPUT
    fixmono patch-env [--python PATH] FIX...|--all [--check] | --undo [FIX...]
    fixmono drift [--fix ID] [--versions PROJECT=V1,V2] | --git CHECKOUT --fix ID
    fixmono import PATCH... | --series DIR | --from URL | --from-commit CHECKOUT@REV
    fixmono new PROJECT NAME --target PATH --function QUALNAME
    fixmono compare-weights A B
    fixmono report --html DIR [REPORT.json]
"""
from __future__ import annotations

import importlib
import sys

from fixmono.cli.early import exit_quietly, interrupt_before_start

COMMANDS = {  # subcommand -> (module, what it does)
    "status": ("fixmono.cli.status", "which known bugs affect this environment's installed packages"),
    "make-patch": ("fixmono.cli.make_patch", "turn fixes into git patches against a checkout, wheel or remote ref"),
    "patch-wheel": ("fixmono.cli.patch_wheel", "carry a series' Python fixes into a built wheel, or --verify one"),
    "patch-env": ("fixmono.cli.patch_env", "apply fixes to an environment's installed files in place, or --undo"),
    "drift": ("fixmono.cli.drift", "the fixes over published versions, or one fix over git history"),
    "import": ("fixmono.cli.import_patch", "make fix folders of the patch files a team carries (ported by syntax)"),
    "new": ("fixmono.cli.new_fix", "the folder of a hand-written fix: a working example to edit, green at once"),
    "compare-weights": ("fixmono.cli.compare_weights", "two safetensors checkpoints, tensor by tensor"),
    "report": ("fixmono.cli.report", "a saved drift run (--json) as a static HTML site"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "".join(f"  {name:<{width}}  {about}\n" for name, (_, about) in COMMANDS.items())
    return f"usage: fixmono COMMAND [ARGS...]  (fixmono COMMAND --help)\n\ncommands:\n{rows}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        import fixmono

        print(f"fixmono {fixmono.__version__}")
        return 0
    if argv[0] not in COMMANDS:
        print(f"fixmono: error: unknown command {argv[0]!r} (commands: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    module, _ = COMMANDS[argv[0]]
    sys.argv[0] = f"fixmono {argv[0]}"
    rest = argv[1:]
    if argv[0] == "status" and rest[:1] != ["status"]:
        rest = ["status", *rest]  # the status command's own parser takes `status` first, like tools/fixes
    return importlib.import_module(module).main(rest)


def entry() -> None:
    """The console script: signals handled from the first line, the exit as the tools' own."""
    interrupt_before_start("fixmono")
    exit_quietly(main())


if __name__ == "__main__":
    entry()
