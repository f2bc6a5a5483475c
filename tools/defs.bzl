"""fix_module: the one macro a fix's BUILD.bazel calls.

It declares, from the files in the fix folder:
  :lib         py_library of fix.py and its helpers (+ README.md, fixtures/)
  :repro       py_binary running repro.py as fixmono.fixes.<...>.repro (exit 1 reproduced, 0 not, 77 skipped)
  :cases_test  the fix's inline transformation cases, run by the generic helper
  :test_*      one py_test per test_*.py, run under pytest

Tags mark what a test needs: gpu, rocm, cuda (hardware), network (downloads
wheels), slow. .bazelrc filters the hardware tags out by default; with
--config=rbe a rocm or cuda target asks the Remote Execution service for a
worker of that pool (exec_properties).
"""

PYTEST_MAIN = "//tools:pytest_main.py"
CASES_TEST = "//tools:fix_cases_test.py"
RUN_MODULE = "//tools:run_module.py"

# The worker pool a Remote Execution service sends an action to (the "Pool" key of
# BuildBuddy and Google RBE; other services name it differently). Ignored when
# actions run locally, but part of their cache key.
def backend_exec_properties(tags):
    for backend in ("rocm", "cuda"):
        if backend in tags:
            return {"Pool": backend}
    return {}

def fix_module(test_tags = {}, test_deps = [], repro_tags = [], deps = [], data = [], size = "medium", timeouts = {},
               shard_counts = {}):
    """timeouts / shard_counts: per test target name (e.g. {"test_real_wheels": "long"}), for a target that
    needs more than its size's timeout or is dealt out over shards (tools/pytest_main.py honours
    TEST_SHARD_INDEX); docs/testing.md says how they are chosen (a third of the timeout at load 4)."""
    pkg = native.package_name()
    module = "fixmono." + pkg.replace("/", ".")  # fixes/pytorch/x -> fixmono.fixes.pytorch.x
    fixture_files = native.glob(["fixtures/**"])
    native.py_library(
        name = "lib",
        srcs = native.glob(["*.py"], exclude = ["test_*.py"]),
        data = native.glob(["README.md", "fix.patch"]) + fixture_files + data,
        deps = ["//tools:fixmono", "//fixes:init"] + deps,
        visibility = ["//visibility:public"],
    )
    native.py_binary(
        name = "repro",
        srcs = [RUN_MODULE],
        main = RUN_MODULE,
        args = [module + ".repro"],
        deps = [":lib"],
        tags = repro_tags,
        exec_properties = backend_exec_properties(repro_tags),
    )
    native.py_test(
        name = "cases_test",
        srcs = [PYTEST_MAIN, CASES_TEST],
        main = PYTEST_MAIN,
        args = ["FIX_PACKAGE=" + module, "$(location %s)" % CASES_TEST],
        deps = [":lib", "//tools:testing"],
        size = "small",
    )
    for src in native.glob(["test_*.py"]):
        name = src[:-len(".py")]
        native.py_test(
            name = name,
            srcs = [src, PYTEST_MAIN],
            main = PYTEST_MAIN,
            args = ["$(location %s)" % src],
            deps = [":lib", "//tools:testing"] + test_deps,
            tags = test_tags.get(name, []),
            exec_properties = backend_exec_properties(test_tags.get(name, [])),
            size = size,
            # a download's time is the network's (moe_router_double_softmax's test_real_wheels was stopped at
            # 300 s on a cold cache and a loaded machine): long unless timeouts says
            timeout = timeouts.get(name) or ("long" if "network" in test_tags.get(name, []) else None),
            shard_count = shard_counts.get(name),
        )

def pytest_test(name, srcs, deps = [], data = [], tags = [], size = "medium", network = False, args = [],
                timeout = None, shard_count = None):
    """A py_test run under pytest (for tests/ and tools/). network = True runs
    the file's network-tagged tests (FIXMONO_NETWORK=1), tags the target and gives
    it the long timeout unless timeout says otherwise (downloads on a cold cache).

    size is what the test holds (Bazel reserves memory by it), timeout what it may take when
    it is not size's (small 60 s, medium 300 s, large 900 s): each target must stay under a
    third of its timeout on a 2-core machine at load 4 (docs/testing.md). shard_count deals
    the file's cases out over that many processes (tools/pytest_main.py)."""
    native.py_test(
        name = name,
        srcs = srcs + [PYTEST_MAIN],
        main = PYTEST_MAIN,
        args = (["FIXMONO_NETWORK=1"] if network else []) +
               ["$(location %s)" % s for s in srcs if s.split(":")[-1].startswith("test_")] + args,
        deps = deps,
        data = data,
        tags = tags + (["network", "requires-network"] if network else []),
        exec_properties = backend_exec_properties(tags),
        size = size,
        # a download's time is the network's: long unless the target says
        timeout = timeout or ("long" if network else None),
        shard_count = shard_count,
    )
