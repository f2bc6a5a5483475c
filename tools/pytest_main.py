"""Entry point of every py_test: run pytest on the files given as arguments.

Leading NAME=VALUE arguments are set in the environment first. The JUnit
report goes where Bazel asks (XML_OUTPUT_FILE), so .ci/run can count
individual test cases, not only targets.
"""
import os
import sys

import pytest


def main(argv: list[str]) -> int:
    while argv and "=" in argv[0] and not argv[0].startswith("-"):
        key, value = argv.pop(0).split("=", 1)
        os.environ[key] = value
    # pytest finds the source tree's pytest.ini through the runfiles' symlinks: its
    # pythonpath (tools/, for plain pytest runs) must not put the source tree
    # before the runfiles
    args = ["-q", "-p", "no:cacheprovider", "-o", "pythonpath=", *argv]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append(f"--junitxml={os.environ['XML_OUTPUT_FILE']}")
    return pytest.main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
