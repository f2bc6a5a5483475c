"""Entry point of every py_test: run pytest on the files given as arguments.

Leading NAME=VALUE arguments are set in the environment first. The JUnit
report goes where Bazel asks (XML_OUTPUT_FILE), so .ci/run can count
individual test cases, not only targets.

It is also a pytest plugin (here, and `-p pytest_main` with tools/ on the
path): `--fix ID` keeps only the cases of one fix, those whose parameters
fixmono.testing.for_fix made for it, and the checks of the catalogue as a whole
(marked `catalogue`); tools/check_fix runs the tests of tests/ so.

Under Bazel it writes `TEST_TIMEOUT=N` (the seconds Bazel gives the target) at the
top of test.log, for tools/test_summary.py, and honours test sharding (`shard_count`
in tools/defs.bzl): with TEST_TOTAL_SHARDS=N and TEST_SHARD_INDEX=i it keeps the
collected cases whose position is i modulo N (a parametrised matrix is dealt out
across the shards) and touches TEST_SHARD_STATUS_FILE to tell Bazel it shards.
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


SHARD = (0, 1)  # (TEST_SHARD_INDEX, TEST_TOTAL_SHARDS), taken out of the environment by main()


def shard(items: list, index: int, total: int) -> tuple[list, list]:
    """The cases of shard `index` of `total` (dealt out in collection order), and the others."""
    return ([item for n, item in enumerate(items) if n % total == index],
            [item for n, item in enumerate(items) if n % total != index])


def pytest_collection_modifyitems(config, items):
    index, total = SHARD
    if total > 1:
        keep, other = shard(items, index, total)
        config.hook.pytest_deselected(items=other)
        items[:] = keep
    fix_id = config.getoption("fix")
    if not fix_id:
        return
    keep = [item for item in items if item.get_closest_marker("catalogue")
            or any(fix_id in mark.args for mark in item.iter_markers("fix"))]
    kept = set(map(id, keep))
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
    items[:] = keep


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and (
            session.config.getoption("fix") or SHARD[1] > 1):
        session.exitstatus = pytest.ExitCode.OK  # this file has no case of that fix, or this shard none


def main(argv: list[str]) -> int:
    while argv and "=" in argv[0] and not argv[0].startswith("-"):
        key, value = argv.pop(0).split("=", 1)
        os.environ[key] = value
    if os.environ.get("TEST_TIMEOUT"):  # read by tools/test_summary.py; once (a pytest_main run a test starts is quiet)
        print(f"TEST_TIMEOUT={os.environ.pop('TEST_TIMEOUT')}", flush=True)
    if os.environ.get("TEST_SHARD_STATUS_FILE"):  # this test shards (Bazel asks it to say so)
        open(os.environ["TEST_SHARD_STATUS_FILE"], "a").close()
    # this process's shard, not its children's: a test that runs pytest_main again in a copy of the tree (test_import,
    # test_scaffold) must run the whole of what it runs
    global SHARD
    SHARD = (int(os.environ.pop("TEST_SHARD_INDEX", "") or 0), int(os.environ.pop("TEST_TOTAL_SHARDS", "") or 1))
    os.environ.pop("TEST_SHARD_STATUS_FILE", None)
    # pytest finds the source tree's pytest.ini through the runfiles' symlinks: its
    # pythonpath (tools/, for plain pytest runs) must not put the source tree
    # before the runfiles
    args = ["-q", "-p", "no:cacheprovider", "-o", "pythonpath=", *argv]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append(f"--junitxml={os.environ['XML_OUTPUT_FILE']}")
    return pytest.main(args, plugins=[sys.modules[__name__]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
