"""Benchmark: `--upstream URL@REF` against a full clone, over a loopback git daemon.

    .venv/bin/python tools/bench_remote.py [--files 20000] [--commits 2000] [--json]

Builds a synthetic repository with git fast-import: FILES text files of
about 2 KB (pseudo-random words, as incompressible as source code roughly
is), COMMITS commits each rewriting 5 of them, and the jax/jaxlib fix targets
(our fixtures, touched again every 100 commits). Serves it with `git daemon`
on 127.0.0.1 (allowFilter and anySHA1InWant on, as GitHub allows), then, side
by side in one run:
- remote: `make_patch --all --upstream git://127.0.0.1:PORT/repo.git@main --check`
  with an empty cache: wall time, pack bytes received;
- full clone: `git clone --bare` of the same URL: wall time, pack bytes;
- local: make_patch on a local checkout of the same commit (a clone made
  beforehand, not timed): wall time.
Prints the ratios against the goals (< 2% of the clone's bytes, < 3x the
local run's time).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from fixmono.sources.git import clean_env, run_git  # noqa: E402

FIXTURES = {"jax/__init__.py": None,
            "jax/_src/cudnn/fused_attention_stablehlo.py": "fixes/jax/cudnn_gqa_kv_offsets/fixtures/fused_attention_stablehlo.py",
            "jaxlib/plugin_support.py": "fixes/jaxlib/rocm_plugin_discovery/fixtures/plugin_support.py"}
WORDS = [f"{a}{b}" for a in ("al", "be", "ga", "de", "ep", "ze", "et", "th", "io", "ka") for b in
         ("pha", "ta", "mma", "lta", "sil", "ta2", "a_x", "eta", "ta3", "ppa", "mb", "nu", "xi", "on", "pi")]


def git_env() -> dict:
    return clean_env(GIT_ALLOW_PROTOCOL="file:git", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                     GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
                     GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> str:
    proc = run_git(cwd, *args, env=git_env(), input=input)
    if proc.returncode:
        raise RuntimeError(f"git {args[0]}: {proc.stderr.strip()}")
    return proc.stdout


def server_env() -> dict:
    """The daemon's: no user or system config, and none of make_patch's client-side
    overrides (an emptied uploadpack.packObjectsHook would break upload-pack)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def text(rng: random.Random, size: int = 2048) -> bytes:
    words, n = [], 0
    while n < size:
        w = rng.choice(WORDS) + str(rng.randrange(1000))
        words.append(w)
        n += len(w) + 1
    return (" ".join(words) + "\n").encode()


def build_repo(path: Path, files: int = 20000, commits: int = 2000, seed: int = 0) -> Path:
    """A bare repository of `files` files and `commits` commits, by fast-import."""
    rng = random.Random(seed)
    names = [f"src/d{i // 100:03d}/f{i % 100:02d}.txt" for i in range(files - len(FIXTURES))]
    fixtures = {p: (ROOT / src).read_bytes() if src else b"" for p, src in FIXTURES.items()}
    git("init", "-q", "--bare", "-b", "main", str(path))
    stream = bytearray()

    def commit(n: int, changes: dict[str, bytes]) -> None:
        message = f"commit {n}\n".encode()
        stream.extend(b"commit refs/heads/main\n")
        stream.extend(f"committer bench <bench@example.com> {1700000000 + n * 3600} +0000\n".encode())
        stream.extend(b"data %d\n" % len(message) + message)
        for p, data in changes.items():
            stream.extend(f"M 100644 inline {p}\n".encode() + b"data %d\n" % len(data) + data + b"\n")

    commit(0, {**{p: text(rng) for p in names}, **fixtures})
    for n in range(1, commits):
        changes = {p: text(rng) for p in rng.sample(names, 5)}
        if n % 100 == 0:  # the targets get history too (a comment at the end: the fix's sites stay)
            changes["jax/_src/cudnn/fused_attention_stablehlo.py"] = (
                fixtures["jax/_src/cudnn/fused_attention_stablehlo.py"] + f"# revision {n}\n".encode())
        commit(n, changes)
    git("fast-import", "--quiet", cwd=path, input=bytes(stream))
    git("config", "uploadpack.allowFilter", "true", cwd=path)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=path)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(base: Path):
    """`git daemon` on 127.0.0.1 exporting the repositories under `base`; yields git://127.0.0.1:PORT/."""
    port = free_port()
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
                               f"--base-path={base}", "--export-all", "--informative-errors", str(base)],
                              env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}/"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def make_patch(*args: str, cache: Path) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "FIXMONO_CACHE": str(cache), "PYTHONPATH": str(ROOT / "tools")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fixmono.cli.make_patch", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    return time.perf_counter() - start, proc


def pack_bytes(repo: Path) -> int:
    return sum(p.stat().st_size for p in repo.rglob("objects/pack/*.pack"))


def measure(work: Path, files: int, commits: int) -> dict:
    served = work / "served"
    served.mkdir()
    build_repo(served / "repo.git", files, commits)
    with serve(served) as base:
        url = base + "repo.git"
        remote_s, remote = make_patch("--all", "--upstream", f"{url}@main", "--check", "--json", cache=work / "cache")
        if remote.returncode:
            raise RuntimeError(f"remote run failed: {remote.stderr.strip()}")
        again_s, again = make_patch("--all", "--upstream", f"{url}@main", "--check", "--json", cache=work / "cache")
        start = time.perf_counter()
        git("clone", "-q", "--bare", url, str(work / "full.git"))
        clone_s = time.perf_counter() - start
    git("clone", "-q", str(work / "full.git"), str(work / "checkout"))
    local_s, local = make_patch("--all", "--upstream", str(work / "checkout"), "--check", "--json",
                                cache=work / "cache-local")
    if local.returncode:
        raise RuntimeError(f"local run failed: {local.stdout.strip()} {local.stderr.strip()}")
    statuses = lambda proc: {r["fix"]: r["status"] for r in json.loads(proc.stdout)["runs"][0]["results"]}  # noqa: E731
    remote_bytes, full_bytes = pack_bytes(work / "cache" / "remotes"), pack_bytes(work / "full.git")
    return {"files": files, "commits": commits,
            "remote": {"seconds": round(remote_s, 2), "bytes": remote_bytes, "statuses": statuses(remote)},
            "remote_cached": {"seconds": round(again_s, 2), "bytes_added": pack_bytes(work / "cache" / "remotes") - remote_bytes},
            "full_clone": {"seconds": round(clone_s, 2), "bytes": full_bytes},
            "local_checkout": {"seconds": round(local_s, 2), "statuses": statuses(local)},
            "bytes_ratio": round(remote_bytes / full_bytes, 5), "time_vs_local": round(remote_s / local_s, 2)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=20000)
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        out = measure(Path(tmp), args.files, args.commits)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"synthetic repository: {out['files']} files, {out['commits']} commits, served by git daemon on 127.0.0.1")
    print(f"full clone:  {out['full_clone']['bytes'] / 2**20:8.2f} MiB  {out['full_clone']['seconds']:6.2f} s")
    print(f"remote run:  {out['remote']['bytes'] / 2**20:8.3f} MiB  {out['remote']['seconds']:6.2f} s  "
          f"(bytes {100 * out['bytes_ratio']:.3f}% of the clone's; goal < 2%)")
    print(f"again, cached: +{out['remote_cached']['bytes_added']} bytes  {out['remote_cached']['seconds']:.2f} s")
    print(f"local checkout run: {out['local_checkout']['seconds']:.2f} s  (remote/local {out['time_vs_local']}x; goal < 3x)")
    print(f"statuses equal: {out['remote']['statuses'] == out['local_checkout']['statuses']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
