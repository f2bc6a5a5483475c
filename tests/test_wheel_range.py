"""pip:NAME==VERSION read by HTTP range requests: only the zip's end records,
central directory and the members the fixes target come over the wire, each
member checked against the central directory's CRC-32 and size.

The server is nginx (Debian package) on 127.0.0.1, started and stopped here,
serving a PEP 503 index of wheels made here (our own fixture texts at the
real paths, never upstream's) that pip is pointed at through its environment:
what is read is pip's own answer, as with a user's mirror."""
import http.server
import json
import os
import random
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from fixmono.sources.ranged import SLACK, TAIL
from fixmono.testing import REPO_ROOT, catalogue_tree, nginx, served, simple_index, write_wheel

VERSION = "5.99.0"  # no such transformers release: only the index made here has it
SPEC = f"pip:transformers=={VERSION}"
PIN = "transformers-pin-moe-routing"

pytestmark = pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx not installed (tools/setup)")


def wheel_files() -> dict[str, str | bytes]:
    files = {path.removeprefix("src/"): text for path, text in catalogue_tree("transformers").items()}
    noise = random.Random(0).randbytes(4 << 20)  # 4 MB that no fix reads (incompressible)
    return {**files, "transformers/models/big/weights.bin": noise, "transformers/models/big/__init__.py": "x = 1\n"}


def make_wheel(folder: Path, files: dict | None = None) -> Path:
    return write_wheel(folder, "transformers", VERSION, files or wheel_files())


def make_patch(base: str, pip_env: dict, cache: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, **pip_env, "PIP_INDEX_URL": f"{base}/simple", "FIXMONO_CACHE": str(cache)}
    env.pop("MAKE_PATCH_DEBUG", None)
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "make_patch"), "--all", "--upstream", SPEC,
                           "--json", *args], capture_output=True, text=True, env=env, timeout=300)
    return proc, (json.loads(proc.stdout) if proc.stdout.strip() else {})


def wheel_requests(log: Path) -> list[tuple[int, str, int, str]]:
    return [r for r in served(log) if r[3].endswith(".whl")]


def test_only_the_targets_come_over_the_wire_and_the_patches_are_the_same(tmp_path):
    wheel = make_wheel(tmp_path / "dist")
    pip_env = simple_index(tmp_path / "www", [wheel])
    with nginx(tmp_path / "www") as (base, log):
        proc, data = make_patch(base, pip_env, tmp_path / "cache-range", "--out", str(tmp_path / "by-range"))
        assert proc.returncode == 0, proc.stderr
        (run,) = data["runs"]
        read = run["wheel"]
        assert (read["read"], read["verified"], read["published_sha256"]) == ("range", "member-crc", None) or \
            (read["read"], read["verified"]) == ("range", "member-crc")
        requests = wheel_requests(log)
        assert requests and all(status == 206 and wanted.startswith("bytes=") for status, wanted, _, _ in requests)
        sent = sum(r[2] for r in requests)
        with zipfile.ZipFile(wheel) as zf:  # the end records, the central directory, the targets: nothing else
            targets = [i for i in zf.infolist() if i.filename.endswith(".py") and "/big/" not in i.filename]
            directory = sum(46 + len(i.filename.encode()) + len(i.extra) for i in zf.infolist())
        limit = TAIL + directory + sum(30 + len(i.filename) + SLACK + i.compress_size for i in targets)
        assert sent == read["bytes"] and sent <= limit < wheel.stat().st_size / 4, (sent, limit)
        full, full_data = make_patch(base, pip_env, tmp_path / "cache-full", "--out", str(tmp_path / "whole"),
                                     "--full-wheel")
        assert full.returncode == 0, full.stderr
        assert full_data["runs"][0]["wheel"]["read"] == "full"
        assert full_data["runs"][0]["wheel"]["verified"] == "sha256"
    assert [(r["fix"], r["status"]) for r in run["results"]] == \
        [(r["fix"], r["status"]) for r in full_data["runs"][0]["results"]]
    assert {"applied"} == {r["status"] for r in run["results"]}
    by_range = {p.name: p.read_bytes() for p in (tmp_path / "by-range").iterdir()}
    assert by_range == {p.name: p.read_bytes() for p in (tmp_path / "whole").iterdir()}  # BASE too


def test_a_server_that_does_not_serve_ranges_gets_a_whole_download(tmp_path):
    pip_env = simple_index(tmp_path / "www", [make_wheel(tmp_path / "dist")])
    with nginx(tmp_path / "www", ranges=False) as (base, log):
        proc, data = make_patch(base, pip_env, tmp_path / "cache", "--check")
    assert proc.returncode == 0, proc.stderr
    read = data["runs"][0]["wheel"]
    assert read["read"] == "full" and read["verified"] == "sha256" and "does not honour Range" in read["note"]


class LyingRanges(http.server.SimpleHTTPRequestHandler):
    """Answers a range request with 206 and the first bytes of the file, whatever was asked."""

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        if "Range" not in self.headers or not path.is_file():
            return super().do_GET()
        data = path.read_bytes()[:100]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes 0-99/{path.stat().st_size}")
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_a_server_that_answers_another_range_is_not_believed(tmp_path):
    pip_env = simple_index(tmp_path / "www", [make_wheel(tmp_path / "dist")])
    handler = lambda *a, **kw: LyingRanges(*a, directory=str(tmp_path / "www"), **kw)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        proc, data = make_patch(f"http://127.0.0.1:{server.server_port}", pip_env, tmp_path / "cache", "--check")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert proc.returncode == 0, proc.stderr
    read = data["runs"][0]["wheel"]
    assert read["read"] == "full" and "answered range 0-99" in read["note"]


def test_a_member_that_does_not_match_its_crc_is_refused_either_way(tmp_path):
    """A stored member with one byte changed after the wheel was built (the
    index publishes the changed file's sha256, so pip's own check passes)."""
    wheel = make_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("transformers/integrations/moe.py")
    data = bytearray(wheel.read_bytes())
    at = data.index(b"def ", info.header_offset + 30)  # inside the member's (stored) bytes
    data[at] = ord("D")
    wheel.write_bytes(bytes(data))
    pip_env = simple_index(tmp_path / "www", [wheel])
    with nginx(tmp_path / "www") as (base, _):
        for args in ([], ["--full-wheel"]):
            proc, data_ = make_patch(base, pip_env, tmp_path / f"cache{len(args)}", "--check", *args)
            assert proc.returncode == 2, proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1 and "moe.py" in proc.stderr, proc.stderr
            assert ("CRC-32" in proc.stderr) if not args else ("RECORD" in proc.stderr or "CRC" in proc.stderr)


def test_members_are_cached_by_wheel_hash_and_checked_when_read_back(tmp_path):
    pip_env = simple_index(tmp_path / "www", [make_wheel(tmp_path / "dist")])
    cache = tmp_path / "cache"
    with nginx(tmp_path / "www") as (base, log):
        assert make_patch(base, pip_env, cache, "--check")[0].returncode == 0
        first = len(wheel_requests(log))
        for entry in (cache / "upstreams").iterdir():  # the scratch repository goes; the member cache stays
            subprocess.run(["rm", "-rf", str(entry)], check=True)
        assert make_patch(base, pip_env, cache, "--check")[0].returncode == 0
        second = len(wheel_requests(log)) - first
        (damaged,) = [p for p in (cache / "wheel-members").rglob("members/*")
                      if b"def batched_mm_experts_forward" in p.read_bytes()]
        damaged.write_bytes(damaged.read_bytes().replace(b"def ", b"DEF ", 1))
        for entry in (cache / "upstreams").iterdir():
            subprocess.run(["rm", "-rf", str(entry)], check=True)
        proc, data = make_patch(base, pip_env, cache, "--check")
        third = len(wheel_requests(log)) - first - second
    # end records + directory + members; then the directory again (read on every run, with the end records)
    assert first >= 3 and second == 1, (first, second)
    assert proc.returncode == 0 and third == 2, (third, proc.stderr)  # the directory and the damaged member
    assert {r["status"] for r in data["runs"][0]["results"]} == {"applied"}


def test_a_zip64_wheel(tmp_path, monkeypatch):
    """Central directory and sizes in zip64 records (wheels over 4 GiB or 65535 members)."""
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 16)
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 1)
    wheel = make_wheel(tmp_path / "dist", {k: v for k, v in wheel_files().items() if not k.endswith(".bin")})
    monkeypatch.undo()
    with open(wheel, "rb") as f:
        assert b"PK\x06\x06" in f.read()  # a zip64 end record
    pip_env = simple_index(tmp_path / "www", [wheel])
    with nginx(tmp_path / "www") as (base, _):
        proc, data = make_patch(base, pip_env, tmp_path / "cache", "--check")
    assert proc.returncode == 0, proc.stderr
    assert data["runs"][0]["wheel"]["read"] == "range"
    assert {r["status"] for r in data["runs"][0]["results"]} == {"applied"}


def test_the_matrix_reads_each_release_and_says_which_ships_no_python(tmp_path):
    """drift_matrix over two releases served by ranges: one a meta-package
    wheel with no Python at all (as transformer-engine 1.9.0 is), one with the
    targets; the first is not-applicable with that reason, not an abort."""
    meta = write_wheel(tmp_path / "dist", "transformers", "5.98.0", {"transformers-5.98.0.data/README": "meta\n"})
    pip_env = simple_index(tmp_path / "www", [meta, make_wheel(tmp_path / "dist")])
    env = {**os.environ, **pip_env, "FIXMONO_CACHE": str(tmp_path / "cache")}
    with nginx(tmp_path / "www") as (base, log):
        env["PIP_INDEX_URL"] = f"{base}/simple"
        proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "drift_matrix"), "--fix", PIN, "--versions",
                               "transformers=5.98.0,5.99.0", "--json"], capture_output=True, text=True, env=env,
                              timeout=300)
        assert all(status == 206 for status, *_ in wheel_requests(log))
    assert proc.returncode == 0, proc.stderr
    cells = {c["version"]: c for c in json.loads(proc.stdout)["matrix"][PIN]}
    assert cells["5.98.0"]["status"] == "not-applicable" and "has no Python files" in cells["5.98.0"]["detail"]
    assert (cells["5.99.0"]["status"], cells["5.99.0"]["read"]) == ("applied", "range")
