"""The files `fixmono import` writes into a fix folder besides the diff: fix.py, the
reproducer and test skeletons, README.md and BUILD.bazel, and the steps left to the author.
What only the author knows is marked "(fill in ...)": tests/test_docs.py fails a fix while
one is left. Every Python file is compiled before anything is written."""
from __future__ import annotations

import json
from pathlib import Path

from fixmono.model.errors import UserError, one_line
from fixmono.model.patchfile import PatchFile
from fixmono.model.projects import PROJECTS

EXAMPLE = "fixes/transformers/generate_prefix_constraint_rows"  # an imported fix with all of it written
NETWORK_TAGS = '["network", "requires-network"]'  # what .bazelrc keeps out of offline runs


def folder_files(patch: PatchFile, fix, folder: Path, source: str) -> dict[str, str]:
    """Every generated file of the folder, by name (fix.patch aside)."""
    project = PROJECTS[fix.upstream]
    module = "fixmono." + folder.as_posix().replace("/", ".")
    files = {"fix.py": fix_py(patch, fix.id, fix.upstream, source), "repro.py": repro_py(fix, module),
             "test_fix.py": test_fix_py(module, project.dist), "README.md": readme(patch, fix), "__init__.py": ""}
    if project.dist:  # its status on published wheels
        files["test_real_wheels.py"] = test_real_wheels_py(fix.id, project.dist)
    files["BUILD.bazel"] = build(with_wheel_test="test_real_wheels.py" in files)
    for name, text in files.items():
        if name.endswith(".py"):
            compiled(text, folder / name)
    return files


def docstring_safe(text: str) -> str:
    """`text` as it may stand inside a \"\"\"docstring\"\"\": backslashes and quotes escaped,
    characters that are not printable written as escapes (its value is `text` again)."""
    return "".join("\\" + c if c in '\\"' else c if c.isprintable() else repr(c)[1:-1] for c in text)


def fix_py(patch: PatchFile, fix_id: str, project: str, source: str) -> str:
    title = docstring_safe(patch.subject or Path(source).name)
    where = docstring_safe(Path(source).name if "://" not in source else source)
    return f'''"""{title}

Imported by `fixmono import` from {where}: fix.patch is the
fix, ported by syntax to each release; its fixture, cases and check are made
from the diff (fixmono.engines.imported). Written by hand: repro.py and the
fields below.
"""
from fixmono.engines.imported import declare
from fixmono.model.fix import lazy

FIX = declare(__file__, id={json.dumps(fix_id)}, upstream={json.dumps(project)},
              # where repro.py shows the bug: "cpu" (run by drift --run and CI here), "cuda" or "rocm"
              reproduce=lazy(f"{{__package__}}.repro:reproduce"), repro_needs="cpu")
'''


def repro_py(fix, module: str) -> str:
    project = PROJECTS[fix.upstream]
    library = project.dist or project.name
    paths = ", ".join(c.path for c in fix.changes)
    return f'''"""Reproducer: (fill in: the bug in one line, as a user sees it).

    python -m {module}.repro [--json]

(fill in: what measure() runs and what it counts.) Measured on the installed
{library}, then in a fresh interpreter with the hot-fix
(fixmono.runtime.repro.two_sided). Exit 1 reproduced, 0 not, 77 skipped.
"""
from __future__ import annotations

import sys

from fixmono.runtime.repro import cli, two_sided

FIX_ID = {json.dumps(fix.id)}


def measure() -> dict:
    """Run the code the fix changes ({paths}) on the installed release and return
    JSON-able numbers. Import the library in here: the hot-fix goes on first."""
    raise NotImplementedError("(fill in: measure())")


def wrong(side: dict) -> str:
    """What is wrong in one side's numbers, in one line; "" when nothing is."""
    raise NotImplementedError("(fill in: wrong())")


def reproduce():
    return two_sided(f"{{__package__}}.repro", FIX_ID, wrong, needs="(fill in: e.g. {library} on CPU)")


def main(argv: list[str] | None = None) -> int:
    return cli(reproduce, __doc__, argv, measure=measure)


if __name__ == "__main__":
    sys.exit(main())
'''


def test_fix_py(module: str, dist: str) -> str:
    release = f'("{dist}", "X.Y.Z")' if dist else "(DIST, VERSION)"
    return f'''"""The reproducer both ways: the bug without the fix, nothing wrong with its hot-fix."""
from fixmono.testing import reproduced_and_fixed

REPRO = "{module}.repro"


def test_reproduced_without_the_fix_and_right_with_its_hot_fix():
    # where the installed release has the fix already: on={release}, a release with the bug
    reproduced_and_fixed(REPRO)
'''


def test_real_wheels_py(fix_id: str, dist: str) -> str:
    return f'''"""Its status on published {dist} wheels (tag network, BUILD.bazel): a release
with the bug, and the first with the fix."""
import pytest

from fixmono.testing import release_result

FIX_ID = {json.dumps(fix_id)}
EXPECTED = {{"(fill in: a release with the bug)": "applied",
            "(fill in: the first release with the fix)": "already-applied"}}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_a_published_release(version):
    result = release_result(FIX_ID, "{dist}", version)
    assert result["status"] == EXPECTED[version], result
'''


def build(with_wheel_test: bool) -> str:
    tags = f'\n    test_tags = {{"test_real_wheels": {NETWORK_TAGS}}},\n' if with_wheel_test else ""
    return f'load("//tools:defs.bzl", "fix_module")\n\nfix_module({tags})\n'


def compiled(text: str, path: Path) -> str:
    """`text`, a file import generates, once Python compiles it: a generated file
    must never leave the catalogue unloadable."""
    try:
        compile(text, str(path), "exec")
    except (SyntaxError, ValueError) as err:
        raise UserError(f"{path}: the generated file does not compile ({one_line(err)}); this is a bug of "
                        "fixmono import; nothing was written") from None
    return text


def readme(patch: PatchFile, fix) -> str:
    files = "".join(f"- `{c.path}`: {c.sites} hunk(s)\n" for c in fix.changes)
    origin = patch.origin or "(fill in: the upstream commit or pull request)"
    return f"""# {fix.title}

Fix id: `{fix.id}` · imported with `fixmono import` · origin: {origin}

## Symptom
(fill in: what a user sees, on which backends and releases)

## Mechanism
(fill in)

## The fix
`fix.patch`, ported by the port engine to each release (`tools/make_patch {fix.id} --upstream ...`):
{files}
## Upstream status
(fill in: the issue, the pull request, the first release that has it)

## Versions
`fixmono drift --fix {fix.id}` (or `tools/drift_matrix --fix {fix.id}`) gives the status on every published release.
"""


def next_steps(folder: str, fix_id: str) -> list[str]:
    """What is left to write by hand, in order (docs/adding-a-fix.md, 'Importing an upstream fix')."""
    return [f"next, for {fix_id} (docs/adding-a-fix.md, 'Importing an upstream fix'; fix.py's fields and the "
            f"tests as {EXAMPLE}/ has them):",
            f"  1. {folder}/repro.py: measure() runs the code the fix changes and returns numbers, wrong() says "
            "what is wrong in them; two_sided() runs it without and with the hot-fix",
            f"  2. {folder}/fix.py: reproduce=, repro_needs= (cpu, cuda or rocm) are set; add dep3= (where the "
            "fix comes from and which release has it) and backends= where the default (rocm, cuda, cpu) is wrong",
            f"  3. {folder}/test_fix.py runs the reproducer both ways (on= where the installed release has the "
            "fix); test_real_wheels.py: a release with the bug and the first with the fix (release_result)",
            f"  4. {folder}/README.md: every '(fill in ...)'; README.md: the release column of its row "
            f"(tools/drift_matrix --fix {fix_id} gives the status on every release)",
            f"  5. tools/check_fix {fix_id}; then patches/: tools/make_patch --all --upstream default --out patches",
            f"undo the import: rm -r {folder}, and take its row out of README.md"]
