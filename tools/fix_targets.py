#!/usr/bin/env python3
"""The Bazel targets that check one fix (tools/check_fix): its folder's, and
every target of tests/ whose source loops over the catalogue (calls
discover(), fixture_changes() or catalogue_tree()), read from tests/ when it
runs.

    .venv/bin/python tools/fix_targets.py FIX_ID    # prints the targets, one line
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOPS = re.compile(r"\b(?:discover|fixture_changes|catalogue_tree)\(")
TARGET = re.compile(r'pytest_test\(\s*name\s*=\s*"([^"]+)",\s*srcs\s*=\s*\["([^"]+)"')


def cross_cutting(tests: Path = ROOT / "tests") -> list[str]:
    """//tests targets whose sources loop over the catalogue."""
    build = (tests / "BUILD.bazel").read_text(encoding="utf-8")
    return [f"//tests:{name}" for name, src in TARGET.findall(build)
            if LOOPS.search((tests / src).read_text(encoding="utf-8"))]


def fix_files() -> list[Path]:
    """fixes/<project>/<name>/fix.py, but in dot-folders (as fixmono.model.registry.fix_files)."""
    return [p for p in sorted((ROOT / "fixes").glob("*/*/fix.py"))
            if not any(part.startswith(".") for part in p.relative_to(ROOT / "fixes").parts[:2])]


def folder_of(fix_id: str) -> str | None:
    """fixes/<project>/<name> of a fix id, from the declarations (read as text, as `fixmono import` does)."""
    for fix_py in fix_files():
        text = fix_py.read_text(encoding="utf-8", errors="replace")
        if re.search(rf'\bid\s*=\s*"{re.escape(fix_id)}"', text):
            return fix_py.parent.relative_to(ROOT).as_posix()
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: tools/fix_targets.py FIX_ID", file=sys.stderr)
        return 2
    folder = folder_of(argv[0])
    if folder is None:
        known = sorted(m for p in fix_files()
                       for m in re.findall(r'\bid\s*=\s*"([a-z0-9-]+)"', p.read_text(encoding="utf-8", errors="replace")))
        print(f"check_fix: error: unknown fix id {argv[0]!r} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    print(" ".join([f"//{folder}/...", *cross_cutting()]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
