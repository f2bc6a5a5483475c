"""`fixmono new PROJECT NAME --target PATH --function QUALNAME`: the folder of
a hand-written fix, green from the first run: a working example transformation
of the named function (its `return None` becomes `return 0.0`), a fixture
shaped like the target, applied / already-applied / not-applicable cases, the
check --validate runs (the function defined from the patched text and called),
a README skeleton, BUILD.bazel, and the fix's row in the top README's table.
Replace the example's edit with the fix's own (docs/adding-a-fix.md); then
`tools/check_fix ID` runs every check a fix must pass.

Exit codes: 0 written; 2 bad input (one line, nothing written)."""
from __future__ import annotations

import argparse
import datetime
import keyword
import re
from pathlib import Path

from fixmono.cli.early import exit_quietly
from fixmono.cli.guard import ArgumentParser, run_command
from fixmono.cli.import_patch import own_checkout, readme_row, taken_ids, write
from fixmono.cli.imported_files import build
from fixmono.model.errors import UserError
from fixmono.model.projects import PROJECTS

NAME = re.compile(r"[a-z][a-z0-9_]*")
TARGET = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*\.py")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(prog="fixmono new", description=__doc__.split("\n\n")[0])
    p.add_argument("project", help=f"the upstream project ({', '.join(sorted(PROJECTS))})")
    p.add_argument("name", help="the folder's name, snake_case: fixes/<project>/<name>/")
    p.add_argument("--target", required=True, metavar="PATH",
                   help="the upstream file the fix edits, as the repository names it (torch/_foo.py)")
    p.add_argument("--function", required=True, metavar="QUALNAME",
                   help="the function it edits: name, or Class.method")
    p.add_argument("--into", default=str(own_checkout() or "."), metavar="DIR",
                   help="the checkout of this repository (default: the one this fixmono runs from, else .)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.project not in PROJECTS:
        raise UserError(f"unknown project {args.project!r} (known: {', '.join(sorted(PROJECTS))})")
    if not NAME.fullmatch(args.name):
        raise UserError(f"{args.name!r}: the name is a folder and a module: lower case, digits and _")
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in args.function.split(".")):
        raise UserError(f"--function {args.function!r}: a function's name, or Class.method (no keywords)")
    if not args.target.endswith(".py"):
        raise UserError(f"--target {args.target}: the scaffold writes Python transformations (C++: subclass "
                        "CppTransform, docs/adding-a-fix.md)")
    if not TARGET.fullmatch(args.target) or any(part in (".", "..") for part in args.target.split("/")):
        raise UserError(f"--target {args.target!r}: a path inside the upstream repository, as git names it "
                        "(torch/_foo.py: letters, digits, _ . -, no ./ or ..)")
    root = Path(args.into)
    if not (root / "fixes").is_dir() or not (root / "tools" / "fixmono").is_dir():
        raise UserError(f"--into {args.into}: not a checkout of this repository (no fixes/ and tools/fixmono/)")
    args.folder = Path("fixes") / args.project.replace("-", "_") / args.name
    args.fix_id = f"{args.project}-{args.name.replace('_', '-')}"
    if (root / args.folder).exists():
        raise UserError(f"{args.folder}: already there; nothing was written")
    if args.fix_id in taken_ids(root):
        raise UserError(f"{args.fix_id}: a fix of the catalogue has that id; nothing was written")
    return args


def snippet(qualname: str, body: list[str]) -> str:
    """`body` as the body of `qualname`: the names before the last are classes."""
    *classes, function = qualname.split(".")
    lines = [f"{'    ' * n}class {name}:" for n, name in enumerate(classes)]
    depth = len(classes)
    lines.append(f"{'    ' * depth}def {function}({'self, ' if classes else ''}x):")
    lines += [f"{'    ' * (depth + 1)}{line}" for line in body]
    return "\n".join(lines) + "\n"


def files(args) -> dict[str, str]:
    function, last = args.function, args.function.split(".")[-1]
    camel = "".join(part.title() for part in args.name.split("_")) + "Fix"  # never a keyword or an import
    fixture = Path(args.target).name
    before, after = snippet(function, ["y = x + 1", "return None"]), snippet(function, ["y = x + 1", "return 0.0"])
    neighbour = "neighbour" if last != "neighbour" else "other"  # a def the fix must leave alone
    other = f"\n\ndef {neighbour}():\n    return None\n"
    today = datetime.date.today().isoformat()
    transform = f'''"""(fill in: what the fix changes, in one line.)

Scaffolded by `fixmono new`: an example that makes {function} return 0.0
instead of None. Replace OLD/NEW and plan() with the fix's own change; the
helpers are in fixmono.engines.python (docs/adding-a-fix.md shows each).
"""
import libcst as cst

from fixmono.engines.python import LinePlanTransformer, PythonTransform, code, find_all

FUNCTION = "{function}"
OLD, NEW = "return None", "return 0.0"  # the example's edit: one statement line of FUNCTION, as text


class {camel}(LinePlanTransformer):
    # every def/class this transformer reads names it: libcst parses only those (the rest is set aside)
    mentioning = rf"\\b{last}\\b"

    def targets(self, qualname: str) -> bool:
        return qualname == FUNCTION

    def plan(self, function: cst.FunctionDef) -> dict:
        """Count the site (change / found / problems) and say which lines to replace."""
        self.anchors += 1
        # code() of a line includes the comment lines above it: compare the statement alone
        lines = [line for line in find_all(function.body, cst.SimpleStatementLine)
                 if code(line.with_changes(leading_lines=())).strip() in (OLD, NEW)]
        texts = [code(line.with_changes(leading_lines=())).strip() for line in lines]
        if texts == [NEW]:
            self.found(FUNCTION)
            return {{}}
        if texts != [OLD]:
            self.problems.append(f"{{FUNCTION}}: expected one `{{OLD}}`, found {{texts or 'none'}}")
            return {{}}
        self.change(FUNCTION)
        # a callable gets the updated line: its comments and blank lines above stay
        return {{lines[0]: lambda line: line.with_changes(body=cst.parse_statement(NEW + "\\n").body)}}


TRANSFORM = PythonTransform({camel}, description="(fill in: the edit, in a few words)", anchor=f"function {{FUNCTION}}")
'''
    call = "function(None, 1)" if "." in function else "function(1)"
    validate = f'''"""--validate: {function} defined alone from the patched text and called: the
example's fix makes it return 0.0. Replace with the fix's own check: run the
fixed code on an input that shows the bug (docs/adding-a-fix.md).
"""
from __future__ import annotations

from typing import Mapping

from fixmono.runtime.define import define

TARGET, FUNCTION = {args.target!r}, {function!r}


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    """None when the patched text does what the fix is for, else the problem in one line."""
    function = define(after[TARGET], FUNCTION, {{}})
    got = {call}
    return None if got == 0.0 else f"{{FUNCTION}}(1) returned {{got!r}}, not 0.0"
'''
    fix_py = f'''"""(fill in: the bug in one line; the fix's README says the rest.)"""
from fixmono.model import Case, Dep3, FileChange, Fix, Fixture

from .transform import TRANSFORM
from .validate import check

TARGET = {args.target!r}

FIX = Fix(
    id="{args.fix_id}",
    title="(fill in: the bug, in one line)",
    upstream="{args.project}",
    description="(fill in: the symptom and the mechanism, in two sentences.)",
    dep3=Dep3(origin="vendor", last_update="{today}"),  # origin: upstream, backport or vendor
    backends=("cuda", "rocm", "cpu"),  # the ones the bug hits
    changes=(FileChange(TARGET, TRANSFORM, sites=1,
                        fixture=Fixture("fixtures/{fixture}", mutate=("{function}",), edit="replace")),),
    cases=(
        Case("the example's edit", path=TARGET, before={before!r},
             after={after!r}),
        Case("already fixed", path=TARGET, before={after!r},
             expect="already-applied"),
        Case("no {last} here", path=TARGET, before="def {neighbour}():\\n    return None\\n", expect="not-applicable"),
    ),
    validate=check,
)
'''
    readme = f"""# (fill in: the bug, in one line)

Fix id: `{args.fix_id}` · scaffolded with `fixmono new` · target: `{args.target}`, `{function}`

## Symptom
(fill in: what a user sees, on which backends and releases)

## Mechanism
(fill in)

## The fix
(fill in: what transform.py changes, and why that way)

## Reproduce
(fill in: `python -m fixmono.fixes.{args.project.replace('-', '_')}.{args.name}.repro`, exit 1 reproduced, 0 not,
77 cannot run here)

## Upstream status
(fill in: the issue, the pull request, the first release that has it)

## Versions
`fixmono drift --fix {args.fix_id}` gives the status on every published release.
"""
    return {"__init__.py": "", "BUILD.bazel": build(with_wheel_test=False), "transform.py": transform,
            "validate.py": validate, "fix.py": fix_py,
            "README.md": readme, f"fixtures/{fixture}": f"# shaped like upstream's {args.target}: written by us\n\n\n"
                                                          + before + other}


def work(args):
    written = files(args)
    row = write(Path(args.into), [(args.folder, written)], [readme_row(args.fix_id, args.folder, "Python")])
    return {"folder": str(args.folder), "fix": args.fix_id, "files": sorted(written), "readme_row": row}, 0


def render(made: dict, args) -> str:
    row = ("its row added to README.md's table" if made["readme_row"] else
           "README.md has no table of fixes here: add its row by hand")
    return (f"{made['folder']}/: {made['fix']}, a working example on its own fixture "
            f"({', '.join(made['files'])}); {row}\n"
            f"next: replace the example's edit in transform.py, the fixture and cases in fix.py with the fix's own, "
            f"write each '(fill in ...)' (fix.py, transform.py, README.md, its row's release column: tools/check_fix "
            f"fails while one is left), then: tools/check_fix {made['fix']}\n")


def main(argv: list[str] | None = None) -> int:
    return run_command("fixmono new", argv, parse_args, work, render)


if __name__ == "__main__":
    exit_quietly(main())
