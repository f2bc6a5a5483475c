"""Entry point of every py_test: run pytest on the files given as arguments.

Leading NAME=VALUE arguments are set in the environment first. The JUnit
report goes where Bazel asks (XML_OUTPUT_FILE), so .ci/run can count
individual test cases, not only targets.

It is also a pytest plugin (here, and `-p pytest_main` with tools/ on the
path): `--fix ID` keeps only the cases of one fix, those whose parameters
fixmono.testing.for_fix made for it, and the checks of the catalogue as a whole
(marked `catalogue`); tools/check_fix runs the tests of tests/ so.
"""
import os
import sys

import pytest


def pytest_addoption(parser):
    parser.addoption("--fix", metavar="ID", help="only the cases of fix ID (fixmono.testing.for_fix) and the "
                                                 "checks of the whole catalogue (marked catalogue)")


def pytest_configure(config):
    config.addinivalue_line("markers", "fix(*ids): a case of these fixes (made by fixmono.testing.for_fix)")
    config.addinivalue_line("markers", "catalogue: a check of the catalogue as a whole, run for every fix")
    fix_id = config.getoption("fix")
    if fix_id:
        from fixmono.model.registry import discover
        known = sorted(f.id for f in discover())
        if fix_id not in known:
            raise pytest.UsageError(f"--fix {fix_id}: no such fix (known: {', '.join(known)})")


def pytest_collection_modifyitems(config, items):
    fix_id = config.getoption("fix")
    if not fix_id:
        return
    keep = [item for item in items if item.get_closest_marker("catalogue")
            or any(fix_id in mark.args for mark in item.iter_markers("fix"))]
    kept = set(map(id, keep))
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
    items[:] = keep


def pytest_sessionfinish(session, exitstatus):
    if session.config.getoption("fix") and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK  # this file has no case of that fix


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
    return pytest.main(args, plugins=[sys.modules[__name__]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
