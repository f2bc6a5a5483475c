"""bazel test --config=remote-cache against a real HTTP cache: nginx (Debian
package) with WebDAV PUT on 127.0.0.1, started and stopped here, and copies of
this checkout at different paths, each with a fresh Bazel output base
(tools/remote_cache_check.py does the work; its command runs the whole suite).

Shown: clone A executes a sample of tests and fills the cache; clone B takes
every result from it; a test whose source changed runs again; a failed result
is never shared; a cache that cannot be reached leaves the tests running
locally; --config=remote-cache with no endpoint is one line; rocm/cuda targets
ask a Remote Execution service for their pool; no Bazel server is left behind."""
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree

import pytest

from fixmono.testing import free_port, nginx

TOOLS = Path(__file__).resolve().parents[1] / "tools"  # the checkout (resolved out of the runfiles)
sys.path.insert(0, str(TOOLS))

import remote_cache_check as rcc  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx not installed (tools/setup)")

SAMPLE = rcc.SAMPLE
EDITED = "//tests:test_test_summary"


def hows(run: rcc.TestRun) -> dict[str, tuple[str, str]]:
    return {label: (r["status"], r["how"]) for label, r in run.results.items()}


@pytest.fixture
def work():
    folder = Path(tempfile.mkdtemp(prefix="fixmono-remote-cache-"))
    yield folder
    subprocess.run(["chmod", "-R", "u+w", str(folder)], capture_output=True)
    subprocess.run(["rm", "-rf", str(folder)])


def test_results_shared_between_clones(work):
    with nginx(work / "cache", webdav=True) as (url, log):
        clones = rcc.Clones(work, url, timeout=900)
        try:
            for name in ("a", "b", "c"):
                rcc.copy_worktree(rcc.ROOT, work / name)
            a, out_a = clones.test(work / "a", SAMPLE)
            assert hows(a) == {t: ("PASSED", "executed") for t in SAMPLE}, out_a[-3000:]
            filled = rcc.cache_contents(work / "cache")
            assert filled["action_results"] >= len(SAMPLE), filled

            b, out_b = clones.test(work / "b", SAMPLE)
            assert hows(b) == {t: ("PASSED", "remote") for t in SAMPLE}, out_b[-3000:]
            print()
            print(rcc.report([a, b], rcc.cache_contents(work / "cache"), url))

            # B's copy of one test's source changes: that result is computed again, the rest come
            # from B's own cache; a failure is not uploaded, so clone C (same edit) runs it too
            edited = work / "b" / "tests" / "test_test_summary.py"
            edited.write_text(edited.read_text() + "\n\ndef test_edited_in_this_clone():\n    assert False\n")
            b2, out_b2 = clones.test(work / "b", SAMPLE)
            assert hows(b2) == {t: ("FAILED", "executed") if t == EDITED else ("PASSED", "local") for t in SAMPLE}, \
                out_b2[-3000:]
            (work / "c" / "tests" / "test_test_summary.py").write_text(edited.read_text())
            c, out_c = clones.test(work / "c", SAMPLE)
            assert hows(c) == {t: ("FAILED", "executed") if t == EDITED else ("PASSED", "remote") for t in SAMPLE}, \
                out_c[-3000:]

            # a cache nobody answers at: a warning, and the test (changed, so not in A's own cache) runs here
            changed = work / "a" / "tests" / "test_registry.py"
            changed.write_text(changed.read_text() + "\n# changed in clone a\n")
            dead = f"http://127.0.0.1:{free_port()}"
            d, out_d = clones.test(work / "a", SAMPLE[1:2], env={"FIXMONO_REMOTE_CACHE": dead})
            assert hows(d) == {SAMPLE[1]: ("PASSED", "executed")}, out_d[-3000:]
            assert "WARNING: Reading from Remote Cache:" in out_d, out_d[-3000:]
        finally:
            clones.close()
        assert rcc.servers_under(work) == []  # every Bazel server of the run stopped
        assert not (work / "a").exists() and (work / "cache").is_dir()  # the copies removed, nothing else
        requests = [line for line in log.read_text().splitlines() if "/ac/" in line or "/cas/" in line]
        assert requests, "nothing reached the cache server"


def test_a_cache_behind_basic_auth(work):
    """Credentials in the endpoint's URL (user:password@) reach the server: with them a clone fills the
    cache and another takes the result from it; without them nginx answers 401, Bazel warns, the test
    runs here and nothing is uploaded."""
    with nginx(work / "cache", webdav=True, basic_auth=("ci", "s3cret")) as (url, log):
        with_credentials = url.replace("http://", "http://ci:s3cret@")
        clones = rcc.Clones(work, with_credentials, timeout=600)
        try:
            for name in ("a", "b"):
                rcc.copy_worktree(rcc.ROOT, work / name)
            a, out_a = clones.test(work / "a", SAMPLE[:1])
            assert hows(a) == {SAMPLE[0]: ("PASSED", "executed")}, out_a[-3000:]
            filled = rcc.cache_contents(work / "cache")["action_results"]
            assert filled >= 1
            b, out_b = clones.test(work / "b", SAMPLE[:1], env={"FIXMONO_REMOTE_CACHE": url})  # no credentials
            assert hows(b) == {SAMPLE[0]: ("PASSED", "executed")}, out_b[-3000:]
            assert "WARNING: Reading from Remote Cache:" in out_b, out_b[-3000:]
            assert rcc.cache_contents(work / "cache")["action_results"] == filled  # the refused upload left nothing
            changed = work / "b" / "tests" / "test_test_summary.py"  # B's own cache has it now: run a new key
            changed.write_text((work / "a" / "tests" / "test_test_summary.py").read_text() + "\n# b\n")
            (work / "a" / "tests" / "test_test_summary.py").write_text(changed.read_text())
            a2, out_a2 = clones.test(work / "a", SAMPLE[:1])
            b2, out_b2 = clones.test(work / "b", SAMPLE[:1])
            assert hows(a2) == {SAMPLE[0]: ("PASSED", "executed")}, out_a2[-3000:]
            assert hows(b2) == {SAMPLE[0]: ("PASSED", "remote")}, out_b2[-3000:]
        finally:
            clones.close()
        statuses = [line.split()[0] for line in log.read_text().splitlines()]
        assert "401" in statuses and "200" in statuses


def test_remote_cache_without_endpoint_is_one_line(work):
    rcc.copy_worktree(rcc.ROOT, work / "a")
    clones = rcc.Clones(work, cache_url="", timeout=300)
    try:
        rc, out = clones.bazel(work / "a", "test", "--config=remote-cache", SAMPLE[0],
                               env={"FIXMONO_REMOTE_CACHE": ""})
        assert rc == 2
        assert out.strip().splitlines() == [
            "bazel: --config=remote-cache needs an endpoint: export FIXMONO_REMOTE_CACHE=http://host:port/path "
            "(or grpc://host:port), or add 'build:remote-cache --remote_cache=...' to .bazelrc.user"]
        rc, out = clones.bazel(work / "a", "test", "--config", "rbe", SAMPLE[0], env={"FIXMONO_REMOTE_EXECUTOR": ""})
        assert (rc, len(out.strip().splitlines())) == (2, 1) and "--config=rbe needs an endpoint" in out
        assert rcc.servers_under(work) == []  # refused before any Bazel server started
    finally:
        clones.close()


def test_clones_remove_only_their_own_folders(work):
    """Clones.close() removes copies and output bases it made under its folder; given a folder
    outside it (the checkout itself, say), it refuses to run Bazel there and removes nothing."""
    outside = work / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    clones = rcc.Clones(work / "runs", cache_url="", timeout=60)
    (work / "runs").mkdir()
    for wrong in (outside, work / "runs", Path(".")):
        with pytest.raises(ValueError):
            clones.bazel(wrong, "version")
    clones.close()
    assert (outside / "keep").read_text() == "x"


def test_backend_tagged_targets_ask_for_their_pool(work):
    """--config=rbe's routing: every target tagged rocm or cuda carries exec_properties {"Pool": backend},
    no other target carries any (they would change its cache key for nothing)."""
    rcc.copy_worktree(rcc.ROOT, work / "a")
    clones = rcc.Clones(work, cache_url="", timeout=300)
    try:
        rc, out = clones.bazel(work / "a", "query", "--output=xml", "//fixes/... + //tests/... + //tools/...")
    finally:
        clones.close()
    assert rc == 0, out[-3000:]
    xml = out[out.index("<?xml"):out.index("</query>") + len("</query>")]  # stderr lines around it
    targets = {rule.get("name"): ({s.get("value") for s in rule.findall("list[@name='tags']/string")},
                                  {pair[0].get("value"): pair[1].get("value")
                                   for pair in rule.findall("dict[@name='exec_properties']/pair")})
               for rule in ElementTree.fromstring(xml).iter("rule")}
    assert len(targets) > 50, out[-3000:]
    assert any(tags & {"rocm", "cuda"} for tags, _ in targets.values()), "no target tagged rocm or cuda"
    for name, (tags, props) in targets.items():
        backend = next((b for b in ("rocm", "cuda") if b in tags), None)
        assert props == ({"Pool": backend} if backend else {}), (name, tags, props)
