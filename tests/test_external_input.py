"""What comes from outside (an index's pages and answers, a `--python`
interpreter and what it starts, a range request's answer) can be wrongly
shaped, stalled or oversized: each is one clear line (exit 2), or an index
among several skipped with its reason, never an internal error, a process
left behind, a wait of many minutes or an answer read whole into memory.

Servers are Python's http.server in a thread on 127.0.0.1 (lying ones) or
nginx (tools/setup) for a well-behaved index, stopped in a finally; wheels
are made here (write_wheel, our own small texts)."""
from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fixmono.model.errors import UserError
from fixmono.testing import REPO_ROOT, catalogue_tree, marked, nginx, simple_index, write_wheel

VERSION = "5.99.0"  # no such transformers release: only the indexes made here have it
SPEC = f"pip:transformers=={VERSION}"
WHEEL = f"transformers-{VERSION}-py3-none-any.whl"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
NGINX = pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx not installed (tools/setup)")


@contextlib.contextmanager
def http_server(respond):
    """An HTTP server on 127.0.0.1 whose every GET is respond(handler); yields
    (base URL, an Event set when the test ends: a stalling answer waits on it)."""
    done = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            try:
                respond(self, done)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads, server.block_on_close = True, False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", done
    finally:
        done.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def answer(handler, body: bytes, kind: str = "text/html", status: int = 200, headers: dict | None = None):
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)


def json_page(page: dict):
    return lambda handler, done: answer(handler, json.dumps(page).encode(), JSON_TYPE)


def stall(handler, done):
    done.wait(600)  # accepts, never answers


def run_tool(tool: str, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    full.pop("MAKE_PATCH_DEBUG", None)
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / tool), *args], capture_output=True, text=True,
                          env=full, timeout=timeout)


def one_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert all(w in line for w in words), line
    return line


def make_wheel(folder: Path) -> Path:
    files = {path.removeprefix("src/"): text for path, text in catalogue_tree("transformers").items()}
    return write_wheel(folder, "transformers", VERSION, files)


def make_patch(env: dict, cache: Path, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict]:
    proc = run_tool("make_patch", "--all", "--upstream", SPEC, "--check", "--json", *args,
                    env={**env, "FIXMONO_CACHE": str(cache)}, timeout=timeout)
    return proc, (json.loads(proc.stdout) if proc.stdout.strip() else {})


# --- 7: wrongly shaped JSON from an index ---------------------------------------------------------------------

BAD_PAGES = {
    "files is a number": ({"files": 5}, "files: expected a list, got an integer"),
    "a url that is a number": ({"files": [{"url": 5, "hashes": {}}]}, "files[0].url: expected a string"),
    "a sha256 that is a number": ({"files": [{"url": WHEEL, "hashes": {"sha256": 5}}]},
                                  "files[0].hashes.sha256: expected a sha256"),
    "hashes that are a list": ({"files": [{"url": WHEEL, "hashes": ["sha256"]}]}, "files[0].hashes: expected"),
    "not an object": ([], "the top: expected an object, got a list"),
}


@NGINX
@pytest.mark.parametrize("case", sorted(BAD_PAGES))
def test_a_malformed_extra_index_is_skipped_with_its_reason(tmp_path, case):
    """A PEP 691 page of the wrong shape in PIP_EXTRA_INDEX_URL: that index
    is skipped, named with the field, and the good index gives the wheel."""
    page, reason = BAD_PAGES[case]
    pip_env = simple_index(tmp_path / "www", [make_wheel(tmp_path / "dist")])
    with nginx(tmp_path / "www") as (good, _), http_server(json_page(page)) as (bad, _):
        proc, data = make_patch({**pip_env, "PIP_INDEX_URL": f"{good}/simple", "PIP_EXTRA_INDEX_URL": f"{bad}/simple"},
                                tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    wheel = data["runs"][0]["wheel"]
    assert wheel["read"] == "range" and f"the index page {bad}/simple/transformers/" in wheel["note"], wheel
    assert reason in wheel["note"], wheel["note"]
    assert {r["status"] for r in data["runs"][0]["results"]} == {"applied"}


@NGINX
def test_a_published_hash_that_is_not_a_sha256_never_names_a_cache_path(tmp_path):
    """An HTML page whose link says #sha256=../../escape (the old member cache
    was keyed by it): the page is skipped, pip refuses the wheel as not the
    one published, one line, and nothing is written outside FIXMONO_CACHE."""
    wheel = make_wheel(tmp_path / "dist")
    pip_env = simple_index(tmp_path / "www", [wheel])
    page = tmp_path / "www" / "simple" / "transformers" / "index.html"
    page.write_text(f'<a href="../../files/{wheel.name}#sha256=../../escape">{wheel.name}</a>\n')
    with nginx(tmp_path / "www") as (base, _):
        proc, data = make_patch({**pip_env, "PIP_INDEX_URL": f"{base}/simple"}, tmp_path / "box" / "cache")
    assert not (tmp_path / "escape").exists() and not (tmp_path / "box" / "escape").exists()
    one_line(proc, "not the ../../escape the index publishes")  # pip, told by the page, refuses it too


# --- 7: wrongly shaped answers from a --python interpreter's probe -------------------------------------------

def fake_python(folder: Path, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "python"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


GOOD = {"python": "/x/bin/python", "prefix": "/x", "sites": ["/x/site"], "version": "3.11.7", "dists": {}}
PROBES = {
    "python is a number": ({"python": 5}, "python: expected a string, got an integer"),
    "a list": ([], "the top: expected an object, got a list"),
    "a dists entry that is a number": ({**GOOD, "dists": {"transformers": 5}},
                                       "dists.transformers: expected an object, got an integer"),
    "a package_dir that is a number": ({**GOOD, "dists": {"torch": {"version": "2.13.0", "package_dir": 5,
                                                                    "provenance": None}}},
                                       "dists.torch.package_dir: expected null or a string"),
    "sites that is a string": ({**GOOD, "sites": "/x/site"}, "sites: expected a list, got a string"),
    "a provenance of the wrong shape": (
        {**GOOD, "dists": {"transformers": {"version": "5.8.0", "package_dir": "/x/site/transformers",
                                            "provenance": json.dumps({"input": 5, "fixes": []})}}},
        "input: expected an object, got an integer"),
}


@pytest.mark.parametrize("case", sorted(PROBES))
def test_a_wrongly_shaped_probe_answer_is_one_line(tmp_path, case):
    answer_, words = PROBES[case]
    python = fake_python(tmp_path / "env" / "bin", f"echo '{json.dumps(answer_)}'\n")
    proc = run_tool("fixes", "status", "--python", str(python), timeout=120)
    line = one_line(proc, words if "provenance" in case else f"--python {python}: its answer", words)
    assert proc.stdout == "", line


def test_the_behaviour_matrix_probe_checks_its_answer_too(tmp_path):
    """drift --run's base interpreter (analysis/envs.py Base.of): the same one line."""
    from fixmono.analysis.envs import Base

    python = fake_python(tmp_path / "bin", "echo '{\"python\": \"/x\", \"version\": \"3.11.7\", \"markers\": {}, "
                                           "\"installed\": [\"torch\"]}'\n")
    with pytest.raises(UserError, match="installed: expected an object, got a list"):
        Base.of(str(python))


# --- 10(a): a hanging interpreter and everything it started are stopped --------------------------------------

HANGS = "/bin/sh -c 'sleep 300; true' &\n/bin/sh -c 'sleep 300; true' &\nsleep 300\n"


def test_a_hanging_python_is_stopped_with_all_it_started(tmp_path):
    mark = f"FIXMONO_TEST_MARK={time.time_ns()}"
    python = fake_python(tmp_path / "bin", HANGS)
    try:
        proc = run_tool("fixes", "status", "--python", str(python),
                        env={"FIXMONO_PROBE_TIMEOUT": "3", mark.split("=")[0]: mark.split("=")[1]}, timeout=120)
        time.sleep(0.5)
        assert marked(mark) == [], "a process the probe started outlived the timeout"
        one_line(proc, "did not answer within 3 s")
    finally:
        for pid in marked(mark):
            os.kill(pid, 9)


def test_the_behaviour_matrix_probe_is_stopped_with_all_it_started(tmp_path, monkeypatch):
    from fixmono.analysis.envs import Base

    mark = f"FIXMONO_TEST_MARK={time.time_ns()}"
    monkeypatch.setenv("FIXMONO_PROBE_TIMEOUT", "3")
    monkeypatch.setenv(*mark.split("="))
    python = fake_python(tmp_path / "bin", HANGS)
    try:
        with pytest.raises(UserError) as err:
            Base.of(str(python))
        time.sleep(0.5)
        assert marked(mark) == [], "a process the probe started outlived the timeout"
        assert "did not answer within 3 s" in str(err.value)
    finally:
        for pid in marked(mark):
            os.kill(pid, 9)


def test_a_hanging_gpu_query_is_stopped_with_all_it_started(tmp_path, monkeypatch):
    """nvidia-smi on a wedged driver hangs: the query gives up at its timeout
    and nothing it started lives on (the machine's label says no GPU)."""
    from fixmono.analysis import results

    mark = f"FIXMONO_TEST_MARK={time.time_ns()}"
    fake_python(tmp_path / "bin", HANGS).rename(tmp_path / "bin" / "nvidia-smi")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(*mark.split("="))
    monkeypatch.setattr(results, "QUERY_TIMEOUT", 2.0, raising=False)
    results.accelerator.cache_clear()
    try:
        started = time.monotonic()
        answer = results.accelerator()
        assert time.monotonic() - started < 30 and answer.get("backend") != "cuda", answer
        time.sleep(0.5)
        assert marked(mark) == [], "a process the GPU query started outlived its timeout"
    finally:
        results.accelerator.cache_clear()
        for pid in marked(mark):
            os.kill(pid, 9)


# --- 10(b): a stalled index fails within one deadline, named ------------------------------------------------

DEADLINE = "8"
BOUND = 90  # seconds: the deadline, pip's start-ups and slack; before, ~740 s


@pytest.mark.parametrize("args", [[], ["--full-wheel"]], ids=["range", "full-wheel"])
def test_a_stalled_index_fails_within_the_deadline_naming_it(tmp_path, args):
    with http_server(stall) as (base, _):
        env = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": f"{base}/simple", "PIP_EXTRA_INDEX_URL": "",
               "PIP_FIND_LINKS": "", "PIP_NO_CACHE_DIR": "1", "FIXMONO_INDEX_DEADLINE": DEADLINE}
        start = time.monotonic()
        proc, _ = make_patch(env, tmp_path / "cache", *args, timeout=BOUND)
        took = time.monotonic() - start
    one_line(proc, f"FIXMONO_INDEX_DEADLINE={DEADLINE} s", f"{base}/simple", "stalled")
    print(f"stalled index ({args or 'range'}): failed after {took:.1f} s")


@NGINX
def test_a_stalled_wheel_server_fails_within_the_deadline(tmp_path):
    """The index answers; the wheel's URL (range reads, then pip) never does."""
    wheel = make_wheel(tmp_path / "dist")
    pip_env = simple_index(tmp_path / "www", [wheel])
    page = tmp_path / "www" / "simple" / "transformers" / "index.html"
    with http_server(stall) as (stalled_base, _), nginx(tmp_path / "www") as (base, _):
        page.write_text(page.read_text().replace("../../files/", f"{stalled_base}/files/"))
        proc, _ = make_patch({**pip_env, "PIP_INDEX_URL": f"{base}/simple", "FIXMONO_INDEX_DEADLINE": DEADLINE},
                             tmp_path / "cache", timeout=BOUND)
    one_line(proc, f"FIXMONO_INDEX_DEADLINE={DEADLINE} s", "stalled")


def test_listing_versions_from_a_stalled_index_fails_within_the_deadline(tmp_path):
    with http_server(stall) as (base, _):
        env = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": f"{base}/simple", "PIP_EXTRA_INDEX_URL": "",
               "PIP_FIND_LINKS": "", "FIXMONO_INDEX_DEADLINE": DEADLINE, "FIXMONO_CACHE": str(tmp_path / "cache")}
        proc = run_tool("drift_matrix", "--fix", "transformers-pin-moe-routing", env=env, timeout=BOUND)
    one_line(proc, "cannot list versions of transformers", f"FIXMONO_INDEX_DEADLINE={DEADLINE} s", "stalled")


# --- 10(c): an answer larger than asked is refused, not read ------------------------------------------------

HUGE = 200 << 20


def streaming(first_bytes: bytes, headers: dict, sent: list):
    """A 206 answer with `headers`, then zeros until the client stops reading."""
    def respond(handler, done):
        handler.send_response(206)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(first_bytes)
        block = bytes(1 << 16)
        sent.append(len(first_bytes))
        while sent[-1] < HUGE and not done.is_set():
            handler.wfile.write(block)
            sent[-1] += len(block)
    return respond


@pytest.mark.parametrize("how", ["a span larger than asked", "a Content-Length larger than asked"])
def test_a_range_answer_larger_than_asked_is_refused_unread(how):
    from fixmono.sources.ranged import TAIL, RangedWheel, RangeNotHonoured

    span = f"bytes 0-{HUGE - 1}/{HUGE}" if how == "a span larger than asked" else f"bytes {HUGE - TAIL}-{HUGE - 1}/{HUGE}"
    sent: list[int] = []
    with http_server(streaming(b"", {"Content-Range": span, "Content-Length": str(HUGE)}, sent)) as (base, _):
        reader = RangedWheel(f"{base}/files/{WHEEL}", None)
        with pytest.raises(RangeNotHonoured):
            reader.fetch(-TAIL)
    assert sent and sent[-1] < 64 << 20, f"{sent[-1]} bytes sent: the answer was read"  # socket buffers aside


def test_a_central_directory_of_hundreds_of_megabytes_is_not_asked_for(tmp_path):
    """An end record that declares a 200 MiB central directory (a lying
    server then streams it): refused from the end record alone."""
    from fixmono.sources.ranged import TAIL, RangedWheel

    length = 1 << 30
    end_record = b"PK\x05\x06" + bytes(4) + (1).to_bytes(2, "little") * 2 + HUGE.to_bytes(4, "little") + \
        (4096).to_bytes(4, "little") + bytes(2)
    tail = bytes(TAIL - len(end_record)) + end_record
    asked: list[str] = []

    def respond(handler, done):
        asked.append(handler.headers["Range"])
        if handler.headers["Range"] == f"bytes=-{TAIL}":
            answer(handler, tail, "application/octet-stream", 206,
                   {"Content-Range": f"bytes {length - TAIL}-{length - 1}/{length}"})
        else:
            streaming(b"", {"Content-Range": f"bytes 4096-{4096 + HUGE - 1}/{length}"}, [])(handler, done)

    with http_server(respond) as (base, _):
        reader = RangedWheel(f"{base}/files/{WHEEL}", None)
        with pytest.raises(UserError, match="central directory of 209715200 bytes"):
            reader.entries()
    assert asked == [f"bytes=-{TAIL}"] and reader.bytes_read == TAIL


def test_an_index_page_is_read_to_a_limit(monkeypatch):
    from fixmono.sources import index

    monkeypatch.setattr(index, "PAGE_LIMIT", 1 << 20)
    sent: list[int] = []

    def respond(handler, done):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.end_headers()
        sent.append(0)
        while sent[-1] < HUGE and not done.is_set():
            handler.wfile.write(b"<a>" * (1 << 14))
            sent[-1] += 3 << 14

    with http_server(respond) as (base, _):
        with pytest.raises(ValueError, match="longer than"):
            index.read_page(f"{base}/simple/transformers/")
    assert sent and sent[-1] < 64 << 20, sent  # not the 200 MiB offered (socket buffers aside)


def test_a_local_index_page_is_read_to_a_limit(tmp_path, monkeypatch):
    from fixmono.sources import index

    monkeypatch.setattr(index, "PAGE_LIMIT", 1 << 20)
    page = tmp_path / "page.html"
    page.write_bytes(b"<a>" * (1 << 20))
    with pytest.raises(ValueError, match="larger than"):
        index.read_page(page.as_uri())


# Caches and reports of our own, read back: a wrong shape is a miss or one line, never an internal error.

@pytest.mark.parametrize("kept", ['[1, 2]', '{"verdict": 5}', '{"version": "1", "static": "applied"}', 'nonsense',
                                  '{"version": "1", "static": "a", "verdict": "reproduced", "detail": "",'
                                  ' "finding": "", "seconds": "fast"}'])
def test_a_kept_verdict_of_another_shape_is_a_cache_miss(tmp_path, monkeypatch, kept):
    from fixmono.analysis import results

    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "k.json").write_text(kept)
    assert results.load("k") is None


def test_a_kept_verdict_reads_back(tmp_path, monkeypatch):
    from fixmono.analysis import results

    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path))
    good = {"version": "1", "static": "applied", "verdict": "reproduced", "detail": "", "finding": "",
            "seconds": 1, "node": {}}
    results.store("k", {**good, "a_key_from_a_newer_fixmono": 1})
    assert results.load("k") == good


@pytest.mark.parametrize("report", [[1], "text", 5, {"summary": ["a"], "needs": 3}])
def test_a_reproducer_report_of_another_shape_is_classified_not_crashed(report):
    from fixmono.analysis.still_needed import CANNOT_RUN, FIXED_UPSTREAM, classify

    assert classify(1, report)[0] == CANNOT_RUN  # exit 1 without a "reproduced" report: not a verdict
    assert classify(0, report)[0] in (CANNOT_RUN, FIXED_UPSTREAM)


@pytest.mark.parametrize("kept", ['[1]', '{"error": 5}', '{}', 'not json', '\xff'])
def test_a_kept_compile_result_of_another_shape_is_a_cache_miss(tmp_path, monkeypatch, kept):
    """--validate's compile results are kept in the cache: one of another
    shape is compiled again, never an internal error."""
    import shutil as sh

    from fixmono.engines import compile_check

    if not sh.which(compile_check.COMPILER):
        pytest.skip(f"no {compile_check.COMPILER}")
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path))
    headers = compile_check.Headers(dirs=(), defines=(), label="none")
    assert compile_check.syntax_error("int f() { return 1; }\n", "a.cpp", headers) is None
    (kept_file,) = (tmp_path / "compiles").glob("*.json")
    kept_file.write_bytes(kept.encode("latin-1"))
    assert compile_check.syntax_error("int f() { return 1; }\n", "a.cpp", headers) is None
    assert compile_check.syntax_error("int f() { return }\n", "a.cpp", headers)  # and a real error is still one
