"""Bazel test results shared between two clones through an HTTP remote cache, shown on a real server.

    .venv/bin/python tools/remote_cache_check.py [--timeout S] [--json FILE] [TARGET ...]

The server is nginx (Debian package) with WebDAV PUT on 127.0.0.1, started and
stopped here: the layout Bazel's --remote_cache=http://... expects (/ac/, /cas/).
The working tree (tracked files and untracked ones git does not ignore, so
uncommitted work is included) is copied to two folders at different paths, each
made a git checkout of one commit. Clone A runs `bazel test --config=remote-cache
TARGETS` with a fresh output base and fills the cache; clone B runs the same
targets with another fresh output base. Each test result is counted from Bazel's
build event protocol (--build_event_json_file): executed, taken from the remote
cache, or from the local one. Exit 0 when clone B took from the cache every
result A passed, except the tests Bazel never caches (NOT_CACHED_TAGS).

Without TARGET: a sample of fast tests that need no network (SAMPLE).
`//fixes/... //tests/...` checks the whole suite (about 11 minutes for clone A here).
Both Bazel servers are shut down and the copies removed at the end, Ctrl-C included.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from fixmono.sources.git import clean_env, run_git  # noqa: E402
from fixmono.testing import nginx  # noqa: E402

SAMPLE = ["//tests:test_test_summary", "//tests:test_registry", "//fixes/jax/cudnn_gqa_kv_offsets:cases_test",
          "//fixes/transformers/moe_sentinel_router_grad:cases_test"]
# Bazel 4 runs these every time and never caches their results (exclusive means run alone, locally)
NOT_CACHED_TAGS = ("exclusive", "local", "no-cache", "no-remote", "no-remote-cache")


@dataclass
class TestRun:
    """One clone's `bazel test`: per test target, how its result was obtained."""
    clone: str
    rc: int
    wall_s: float
    results: dict[str, dict] = field(default_factory=dict)  # label -> {status, how}

    def count(self, how: str) -> int:
        return sum(r["how"] == how for r in self.results.values())


def copy_worktree(src: Path, dst: Path) -> None:
    """The files of the checkout at `src` that git tracks or would track (nothing ignored:
    no .venv, no bazel-* links, no caches), symlinks kept as links; `dst` is made a git
    checkout of them (one commit), as a clone would be."""
    listed = run_git(src, "ls-files", "-z", "-co", "--exclude-standard")
    if listed.returncode:
        raise SystemExit(f"remote_cache_check: {src} is not a git checkout: {listed.stderr.strip()}")
    for name in filter(None, listed.stdout.split("\0")):
        source = src / name
        if not os.path.lexists(source):  # deleted in the working tree
            continue
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dst / name, follow_symlinks=False)
    env = clean_env({"user.name": "remote_cache_check", "user.email": "remote_cache_check@localhost"})
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-q", "--no-verify", "-m", f"copy of {src}")):
        done = run_git(dst, *args, env=env)
        if done.returncode:
            raise SystemExit(f"remote_cache_check: git {args[0]} in {dst}: {done.stderr.strip()}")


def how_obtained(result: dict) -> str:
    """From a BEP testResult: 'remote' (remote cache), 'local' (this output base's cache) or 'executed'."""
    if result.get("cachedLocally"):
        return "local"
    if result.get("executionInfo", {}).get("cachedRemotely"):
        return "remote"
    return "executed"


def read_events(path: Path) -> dict[str, dict]:
    results: dict[str, dict] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        if "testResult" in event.get("id", {}) and "testResult" in event:
            ident = event["id"]["testResult"]
            key = ident["label"] if ident.get("shard", 1) in (0, 1) else f"{ident['label']} shard {ident['shard']}"
            results[key] = {"status": event["testResult"].get("status", "?"),
                            "how": how_obtained(event["testResult"])}
    return results


class Clones:
    """Bazel runs in copies of the checkout under `work`, each with its own output base
    there; close() shuts every server down and removes what this object made under `work`
    (nothing outside it, whatever it was given)."""

    def __init__(self, work: Path, cache_url: str, timeout: float):
        self.work, self.cache_url, self.timeout = work.resolve(), cache_url, timeout
        self.user_root = self.work / "bazel-user-root"  # one install base for every clone
        self.started: list[tuple[Path, Path]] = []

    def output_base(self, clone: Path) -> Path:
        clone = clone.resolve()
        if not clone.is_relative_to(self.work) or clone == self.work:
            raise ValueError(f"{clone} is not a copy under {self.work}")
        return self.work / f"output-base-{clone.name}"

    def bazel(self, clone: Path, *args: str, env: dict | None = None, timeout: float | None = None):
        output_base = self.output_base(clone)
        if (clone.resolve(), output_base) not in self.started:
            self.started.append((clone.resolve(), output_base))
        cmd = ["bazel", f"--output_user_root={self.user_root}", f"--output_base={output_base}",
               "--max_idle_secs=300", *args]  # a server this run failed to stop ends by itself
        proc = subprocess.Popen(cmd, cwd=clone, env={**self.env(), **(env or {})}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout or self.timeout)
        except BaseException:  # timeout or Ctrl-C: the client's process group, then the server (close)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        return proc.returncode, out

    def env(self) -> dict:
        """What the clones' Bazel sees: no variables of an enclosing Bazel test (TEST_TMPDIR would
        move its output root), the shared venv's home, this run's cache endpoint."""
        keep = {k: v for k, v in os.environ.items()
                if k in ("PATH", "HOME", "LANG", "LC_ALL", "USER", "XDG_CACHE_HOME", "FIXMONO_DEV_HOME")}
        keep["PATH"] = os.pathsep.join(p for p in keep.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                                       if "fixmono-dev/venvs" not in p and not p.endswith("/.venv/bin"))
        return {**keep, "FIXMONO_REMOTE_CACHE": self.cache_url}

    def test(self, clone: Path, targets: list[str], *extra: str, env: dict | None = None) -> tuple[TestRun, str]:
        events = self.work / f"events-{clone.name}-{time.monotonic_ns()}.json"
        start = time.monotonic()
        rc, out = self.bazel(clone, "test", "--config=remote-cache", f"--build_event_json_file={events}",
                             *extra, "--", *targets, env=env)
        return TestRun(clone.name, rc, round(time.monotonic() - start, 1), read_events(events)), out

    def uncacheable(self, clone: Path, targets: list[str]) -> list[str]:
        """The tests among `targets` tagged with one of NOT_CACHED_TAGS."""
        tags = "|".join(NOT_CACHED_TAGS)
        rc, out = self.bazel(clone, "query", "--output=label",
                             f'attr(tags, "(^|\\[| )({tags})(\\]|,|$)", tests({" + ".join(targets)}))')
        if rc:
            raise RuntimeError(f"bazel query of the tests' tags failed: {out[-2000:]}")
        return [line for line in out.splitlines() if line.startswith("//")]

    def close(self) -> None:
        for clone, output_base in self.started:
            if clone.exists():
                subprocess.run(["bazel", f"--output_user_root={self.user_root}", f"--output_base={output_base}",
                                "shutdown"], cwd=clone, env=self.env(), capture_output=True, timeout=120)
        for pid in servers_under(self.work):  # a server that did not answer its shutdown
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for folder in [self.user_root, *(path for started in self.started for path in started)]:
            assert folder.is_relative_to(self.work) and folder != self.work, folder
            # output bases hold read-only files: writable first
            subprocess.run(["chmod", "-R", "u+w", str(folder)], capture_output=True)
            shutil.rmtree(folder, ignore_errors=True)


def servers_under(folder: Path) -> list[int]:
    """Processes whose command line names `folder` (Bazel servers of these output bases)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if str(folder).encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
    return pids


def cache_contents(root: Path) -> dict:
    files = [p for p in root.rglob("*") if p.is_file()]
    return {"action_results": sum(p.parent.name == "ac" for p in files),
            "blobs": sum(p.parent.name == "cas" for p in files), "bytes": sum(p.stat().st_size for p in files)}


def report(runs: list[TestRun], cache: dict, url: str) -> str:
    lines = [f"remote cache: nginx WebDAV at {url}",
             f"{'clone':<6} {'tests':>5} {'executed':>8} {'remote hits':>11} {'local hits':>10} {'failed':>6} "
             f"{'wall s':>7}"]
    for run in runs:
        failed = sum(r["status"] != "PASSED" for r in run.results.values())
        lines.append(f"{run.clone:<6} {len(run.results):>5} {run.count('executed'):>8} {run.count('remote'):>11} "
                     f"{run.count('local'):>10} {failed:>6} {run.wall_s:>7}")
    lines.append(f"cache: {cache['action_results']} action results, {cache['blobs']} blobs, "
                 f"{cache['bytes'] / 1e3:.0f} kB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="remote_cache_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", default=SAMPLE, metavar="TARGET")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds each bazel test may take")
    parser.add_argument("--json", type=Path, help="write the counts and per-target results here")
    args = parser.parse_args(argv)
    if not Path("/usr/sbin/nginx").exists() or not shutil.which("bazel"):
        print("remote_cache_check: needs nginx and bazel (tools/setup installs both)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="fixmono-remote-cache-"))
    try:
        with nginx(work / "cache", webdav=True) as (url, _):
            (work / "cache").mkdir(exist_ok=True)
            clones = Clones(work, url, args.timeout)
            try:
                for name in ("a", "b"):  # both first: one snapshot of a tree someone may be editing
                    copy_worktree(ROOT, work / name)
                runs = []
                for name in ("a", "b"):
                    run, out = clones.test(work / name, args.targets)
                    if not run.results:
                        print(out[-3000:], file=sys.stderr)
                        print(f"remote_cache_check: clone {name}: bazel test gave no test results (exit {run.rc})",
                              file=sys.stderr)
                        return 2
                    runs.append(run)
                always_run = clones.uncacheable(work / "a", args.targets)
            finally:
                clones.close()
            cache = cache_contents(work / "cache")
        print(report(runs, cache, url))
        if always_run:
            print(f"run every time, never cached (tagged {', '.join(NOT_CACHED_TAGS)}): {', '.join(always_run)}")
        if args.json:
            args.json.write_text(json.dumps({"runs": [asdict(r) for r in runs], "cache": cache,
                                             "always_run": always_run}, indent=1))
        passed_in_a = {label for label, r in runs[0].results.items() if r["status"] == "PASSED"} - set(always_run)
        not_from_cache = sorted(label for label in passed_in_a if runs[1].results.get(label, {}).get("how") != "remote")
        for label in not_from_cache:
            print(f"not from the remote cache in clone b: {label} ({runs[1].results.get(label)})")
        return 1 if not_from_cache or not passed_in_a else 0
    except KeyboardInterrupt:
        print("remote_cache_check: interrupted; servers stopped, copies removed", file=sys.stderr)
        return 130
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(work)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
