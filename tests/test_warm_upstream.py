"""A warm `--upstream pip:NAME==VERSION` call asks no one (sources/resolved.py).

A published release's files do not change: what the index answered (the
wheel, its sha256, the central directory a range read was verified against)
is kept, and a later call from the same pip sources uses it without a
request, also offline. `--refresh` asks again; so does another index; a kept
answer that was tampered with is asked again, never used. The index is nginx
on 127.0.0.1 (tools/setup) serving a wheel made here; its access log says
what was asked. Nothing here is timed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT, nginx, served, simple_index, write_wheel

pytestmark = pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx not installed (tools/setup)")

VERSION = "5.99.0"  # no such transformers release: only the index made here has it
SPEC = f"pip:transformers=={VERSION}"
TINY = "src/transformers/tiny.py"
DIFF = f"""\
diff --git a/{TINY} b/{TINY}
--- a/{TINY}
+++ b/{TINY}
@@ -1,2 +1,2 @@
 def scale(x):
-    return x
+    return 2 * x
"""


@pytest.fixture
def index(tmp_path):
    """(the environment pointing pip at an index of one wheel, the folder it serves, the diff's file)."""
    files = {"transformers/__init__.py": "__version__ = '5.99.0'\n",
             "transformers/tiny.py": "def scale(x):\n    return x\n"}
    wheel = write_wheel(tmp_path / "dist", "transformers", VERSION, files)
    pip_env = simple_index(tmp_path / "www", [wheel])
    diff = tmp_path / "tiny.diff"
    diff.write_text(DIFF)
    return pip_env, tmp_path / "www", diff


def make_patch(pip_env: dict, cache: Path, diff: Path, *args: str, base: str = "http://127.0.0.1:9"):
    env = {**os.environ, **pip_env, "PIP_INDEX_URL": f"{base}/simple", "FIXMONO_CACHE": str(cache)}
    env.pop("MAKE_PATCH_DEBUG", None)
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "make_patch"), "--diff", str(diff),
                           "--upstream", SPEC, "--check", "--json", *args],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    return run


def answer(run: dict) -> tuple:
    return run["base"], [(r["status"], r["detail"]) for r in run["results"]]


def record(cache: Path) -> Path:
    (found,) = (cache / "resolved").glob("*/*.json")
    return found


def test_a_warm_call_makes_no_request_and_refresh_asks_again(tmp_path, index):
    pip_env, www, diff = index
    cache = tmp_path / "cache"
    with nginx(www) as (base, log):
        cold = make_patch(pip_env, cache, diff, base=base)
        asked = len(served(log))
        warm = make_patch(pip_env, cache, diff, base=base)
        after_warm = len(served(log))
        refreshed = make_patch(pip_env, cache, diff, "--refresh", base=base)
        after_refresh = len(served(log))
    assert asked > 0 and not cold["wheel"]["cached"]
    assert after_warm == asked, served(log)[asked:]  # the warm call asked nothing
    assert warm["wheel"]["cached"] and answer(warm) == answer(cold)
    assert answer(warm)[1] == [("applied", f"{TINY}: 1 site(s) changed")]
    assert after_refresh > after_warm  # --refresh: the index page and the central directory again
    assert refreshed["wheel"]["cached"] and answer(refreshed) == answer(cold)  # the same wheel: the entry kept


def test_a_warm_call_works_offline(tmp_path, index):
    pip_env, www, diff = index
    cache = tmp_path / "cache"
    with nginx(www) as (base, _):
        cold = make_patch(pip_env, cache, diff, base=base)
    # the server is gone: nothing listens at its port any more
    for offline in ({}, {"PIP_NO_INDEX": "1"}):
        warm = make_patch({**pip_env, **offline}, cache, diff, base=base)
        assert warm["wheel"]["cached"] and answer(warm) == answer(cold), offline


def test_another_index_is_asked(tmp_path, index):
    """The kept answer is the configured sources': another index URL is another answer."""
    pip_env, www, diff = index
    cache = tmp_path / "cache"
    with nginx(www) as (base, _):
        cold = make_patch(pip_env, cache, diff, base=base)
    with nginx(www) as (other, log):
        again = make_patch(pip_env, cache, diff, base=other)
        assert served(log), "the other index was never asked"
    assert answer(again) == answer(cold) and not again["wheel"]["cached"]  # read from the other server


def directory_of_another_wheel(data: dict) -> None:
    data["directory"] = "0" * 64


def not_a_sha256(data: dict) -> None:
    data["directory"] = "not a sha256"


def another_release(data: dict) -> None:
    data["version"] = "5.98.0"


def not_json(path: Path) -> None:
    path.write_text("{")


@pytest.mark.parametrize("tamper", [directory_of_another_wheel, not_a_sha256, another_release, not_json],
                         ids=lambda t: t.__name__)
def test_a_tampered_answer_is_asked_again_never_used(tmp_path, index, tamper):
    pip_env, www, diff = index
    cache = tmp_path / "cache"
    with nginx(www) as (base, log):
        cold = make_patch(pip_env, cache, diff, base=base)
        kept = record(cache).read_text()
        if tamper is not_json:
            tamper(record(cache))
        else:
            data = json.loads(kept)
            tamper(data)
            record(cache).write_text(json.dumps(data))
        asked = len(served(log))
        again = make_patch(pip_env, cache, diff, base=base)
        assert len(served(log)) > asked, "the tampered answer was used without asking"
    assert answer(again) == answer(cold)
    assert json.loads(record(cache).read_text()) == json.loads(kept)  # the index's answer, kept again


def test_a_tampered_entry_is_read_again_from_the_index(tmp_path, index):
    """A file of the cache entry changed: noticed on read (its hash), built again
    from the index (which is asked), never used."""
    pip_env, www, diff = index
    cache = tmp_path / "cache"
    with nginx(www) as (base, log):
        cold = make_patch(pip_env, cache, diff, base=base)
        (entry,) = (p for p in (cache / "upstreams").iterdir() if not p.name.startswith("."))
        git_env = {**os.environ, "GIT_DIR": str(entry / ".git"), "GIT_WORK_TREE": str(entry)}
        (entry / TINY).write_text("def scale(x):\n    return 2 * x\n")  # as if fixed already
        for args in (["add", TINY], ["-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--amend",
                                     "--no-edit"]):
            subprocess.run(["git", *args], env=git_env, check=True, capture_output=True)
        asked = len(served(log))
        again = make_patch(pip_env, cache, diff, base=base)
        assert len(served(log)) > asked
    assert answer(again) == answer(cold)


def test_refresh_without_a_pip_upstream_is_bad_input(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    diff = tmp_path / "tiny.diff"
    diff.write_text(DIFF)
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "make_patch"), "--diff", str(diff),
                           "--upstream", str(repo), "--check", "--refresh"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--refresh" in proc.stderr and "Traceback" not in proc.stderr
