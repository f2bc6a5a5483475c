#!/usr/bin/env python3
"""The Bazel targets that check one fix (tools/check_fix): its folder's, and
every target of tests/ whose source has cases of single fixes (made by
fixmono.testing.for_fix) or checks of the whole catalogue (marked
`catalogue`), read from tests/ when it runs. tools/check_fix runs those with
`--fix FIX_ID` (tools/pytest_main.py): only that fix's cases and the catalogue
checks.

    .venv/bin/python tools/fix_targets.py FIX_ID    # the folder's targets, then the tests/ targets: two lines
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a line that imports for_fix from fixmono.testing, or one that marks a test @pytest.mark.catalogue
PER_FIX = re.compile(r"^(?:from fixmono\.testing import (?:\([^)]*|[^\n]*)\bfor_fix\b|@pytest\.mark\.catalogue\b)", re.M)
TARGET = re.compile(r'pytest_test\(\s*name\s*=\s*"([^"]+)",\s*srcs\s*=\s*\["([^"]+)"')


def cross_cutting(tests: Path = ROOT / "tests") -> dict[str, str]:
    """{//tests target: its test file} of those whose sources have cases of single fixes or checks of
    the whole catalogue."""
    build = (tests / "BUILD.bazel").read_text(encoding="utf-8")
    return {f"//tests:{name}": src for name, src in TARGET.findall(build)
            if PER_FIX.search((tests / src).read_text(encoding="utf-8"))}


def fix_files(root: Path = ROOT) -> list[Path]:
    """fixes/<project>/<name>/fix.py, but in dot-folders (as fixmono.model.registry.fix_files)."""
    return [p for p in sorted((root / "fixes").glob("*/*/fix.py"))
            if not any(part.startswith(".") for part in p.relative_to(root / "fixes").parts[:2])]


def folder_of(fix_id: str, root: Path = ROOT) -> str | None:
    """fixes/<project>/<name> of a fix id, from the declarations (read as text, as `fixmono import` does)."""
    for fix_py in fix_files(root):
        text = fix_py.read_text(encoding="utf-8", errors="replace")
        if re.search(rf'\bid\s*=\s*"{re.escape(fix_id)}"', text):
            return fix_py.parent.relative_to(root).as_posix()
    return None


def main(argv: list[str], root: Path = ROOT) -> int:
    if len(argv) != 1:
        print("usage: tools/fix_targets.py FIX_ID", file=sys.stderr)
        return 2
    folder = folder_of(argv[0], root)
    if folder is None:
        known = sorted(m for p in fix_files(root)
                       for m in re.findall(r'\bid\s*=\s*"([a-z0-9-]+)"', p.read_text(encoding="utf-8", errors="replace")))
        print(f"check_fix: error: unknown fix id {argv[0]!r} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    print(f"//{folder}/...")
    print(" ".join(cross_cutting(root / "tests")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
