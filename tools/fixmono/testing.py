"""Test helpers shared by every fix: the inline-case runner and small git
fixtures. Library code, like libcst's CodemodTest and Fixit's rule tests."""
from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import fixmono
import libcst
from fixmono.apply.contract import apply_change
from fixmono.model.fix import Case, Fix
from fixmono.model.outcome import Status
from fixmono.model.projects import PROJECTS, runs_on
from fixmono.model.registry import discover
from fixmono.runtime.child import child_env
from fixmono.sources.git import Checkout, clean_env, run_git
from fixmono.sources.upstream import cache_dir
from fixmono.sources.verify import record_hash, verify_wheel
from fixmono.sources.wheel import download_wheel

# The repository (its tests, fixtures and patches/): the package runs from its tools/fixmono/.
REPO_ROOT = Path(fixmono.__file__).absolute().parents[2]

# The suite (tools/run_tests, CI) runs a representative sample of its longest matrices (releases, environments);
# FIXMONO_FULL=1 runs every case (docs/testing.md lists the commands and their last output).
FULL = os.environ.get("FIXMONO_FULL") == "1"


def full_only(*values, id: str | None = None, why: str = ""):
    """A case of a parametrised matrix that runs only with FIXMONO_FULL=1; the suite reports it skipped, with
    the reason and where it runs (never dropped unseen)."""
    import pytest
    return pytest.param(*values, id=id, marks=pytest.mark.skipif(
        not FULL, reason=f"outside the CI sample ({why}); runs with FIXMONO_FULL=1, see docs/testing.md"))


def change_for(fix: Fix, case: Case):
    if case.path is not None:
        matches = [c for c in fix.changes if c.path == case.path]
        assert matches, f"{case.name}: {fix.id} has no change for {case.path}"
        return matches[0]
    if len(fix.changes) == 1:
        return fix.changes[0]
    raise AssertionError(f"fix {fix.id} has several files: give its cases a path")


def check_case(fix: Fix, case: Case) -> None:
    """Run one inline case through the same code make_patch uses."""
    change = change_for(fix, case)
    outcome = apply_change(change, case.before)
    assert outcome.status.value == case.expect, f"{case.name}: {outcome.status.value}: {outcome.detail}"
    if case.expect == Status.APPLIED.value:
        assert case.after is not None, f"{case.name}: an applied case needs `after`"
        assert outcome.new_text == case.after, f"{case.name}: unexpected output:\n{outcome.new_text}"
        again = apply_change(change, outcome.new_text)
        assert again.status is Status.ALREADY_APPLIED, f"{case.name}: not idempotent: {again.detail}"
    else:
        assert case.after is None, f"{case.name}: a {case.expect} case has no `after`"
        assert outcome.new_text is None


def only_insertions(before: str, after: str) -> list[str]:
    """The lines `after` adds to `before`; fails if any line of `before` was
    changed or removed (the rest of the file must stay byte-identical)."""
    old, new = before.splitlines(True), after.splitlines(True)
    inserted = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        assert tag in ("equal", "insert"), f"{tag} of {old[i1:i2]}"
        inserted += new[j1:j2] if tag == "insert" else []
    return inserted


GIT_ID = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
          "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
          "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
          "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000"}


def git(repo: Path, *args: str, check: bool = True) -> str:
    """git for setting up and inspecting test repositories: the same hardened
    environment as make_patch's (a hostile test checkout runs nothing here
    either), but local clones allowed and a fixed identity."""
    env = clean_env(GIT_ALLOW_PROTOCOL="file", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                    GIT_LITERAL_PATHSPECS="0", **GIT_ID)
    proc = run_git(repo, *args, env=env)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, ["git", *args], proc.stdout, proc.stderr)
    return proc.stdout


def make_repo(path: Path, files: dict[str, str | bytes]) -> Path:
    """A git repository with one commit holding `files`."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, content in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.write_bytes if isinstance(content, bytes) else target.write_text)(content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "upstream")
    return path


def snapshot(repo: Path) -> dict[str, str]:
    """Everything a user could lose: HEAD, refs, index, working tree (incl. untracked)."""
    files = sorted(p for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts)
    return {"head": git(repo, "symbolic-ref", "-q", "HEAD", check=False),
            "head_commit": git(repo, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False),
            "refs": git(repo, "for-each-ref"),
            "index": git(repo, "ls-files", "-s"),
            "status": Checkout(repo).git("status", "--porcelain", "--ignored").stdout,
            "files": "\n".join(f"{f.relative_to(repo)}:{f.read_bytes().hex()}" for f in files)}



def make_patch(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """make_patch in a subprocess: exit code, stdout and stderr as a user sees them."""
    full_env = child_env({**os.environ, **(env or {})})
    full_env.pop("MAKE_PATCH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "fixmono.cli.make_patch", *args], cwd=cwd,
                          capture_output=True, text=True, env=full_env)


def release_result(fix_id: str, dist: str, version: str) -> dict:
    """The result of `make_patch FIX --upstream pip:DIST==VERSION --check --validate --json`
    (pip's configured constraints lifted: a machine's cap must not hide a release)."""
    run = make_patch(fix_id, "--upstream", f"pip:{dist}=={version}", "--check", "--validate", "--json",
                     env={"PIP_CONSTRAINT": os.devnull})
    assert run.stdout.startswith("{"), run.stderr
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    return result


def reproduce_on_release(module: str, dist: str, version: str) -> dict:
    """A reproducer's --json result against dist==version installed beside this
    interpreter (drift --run's cached environment: built once per machine, shared
    by the tests that ask for the same release), fixmono's own packages after it."""
    from fixmono.analysis.envs import Base, environment

    return reproducer_result(module, before=(str(environment(Base.of(sys.executable), dist, version)),))


def reproducer_result(module: str, before: tuple[str, ...] = ()) -> dict:
    """`python -m module --json`'s result, with the folders `before` first on its path."""
    run = subprocess.run([sys.executable, "-m", module, "--json"], capture_output=True, text=True,
                         env=child_env(before=before), timeout=600)
    assert run.stdout.startswith("{"), run.stderr[-3000:]
    return json.loads(run.stdout)


def reproduced_and_fixed(module: str, on: tuple[str, str] | None = None) -> dict:
    """A two-sided reproducer's result (fixmono.runtime.repro.two_sided) on the installed release, or
    on `on` = (dist, version), a published release installed for it. Fails unless the bug is reproduced
    without the fix and nothing is wrong with its hot-fix."""
    result = reproduce_on_release(module, *on) if on else reproducer_result(module)
    assert result["verdict"] == "reproduced", result["summary"]
    assert result["details"].get("fixed"), result["summary"]
    return result


def write_wheel(directory: Path, name: str, version: str, files: dict[str, str | bytes],
                unlisted: dict[str, str | bytes] = {}, wheel_version: str = "1.0", requires: tuple[str, ...] = (),
                metadata: str = "") -> Path:
    """A py3-none-any wheel as a build backend writes it: `files`, METADATA
    (with a Requires-Dist line per `requires`, then `metadata`'s lines), WHEEL and a RECORD with every
    member's hash and size; `unlisted` members are added without a RECORD line."""
    directory.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires) + metadata
    members = {**files, f"{info}/METADATA": metadata,
               f"{info}/WHEEL": f"Wheel-Version: {wheel_version}\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    data = {n: t.encode() if isinstance(t, str) else t for n, t in members.items()}
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in data.items()) + f"{info}/RECORD,,\n"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for arcname, content in {**data, **unlisted, f"{info}/RECORD": record}.items():
            zf.writestr(arcname, content)
    return wheel


def published_wheel(dist: str, version: str) -> Path:
    """The published wheel of `dist` (the small one make_patch's pip: source
    downloads), downloaded once into the cache, verified against the index's
    sha256 and its RECORD."""
    folder = cache_dir() / "wheels" / f"{dist}-{version}"
    found = sorted(folder.glob("*.whl"))
    if found:
        return found[0]
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".tmp-") as tmp:
        wheel, published = download_wheel(dist, version, Path(tmp) / "dl")
        verify_wheel(wheel, published)
        wheel.parent.rename(folder)
    return folder / wheel.name


def for_fix(fix_ids: str | list[str], *values, id: str):
    """A pytest parameter (the test's arguments `values`, named `id`) of the fix `fix_ids`, or of each
    of several: marked with them, so that `--fix ID` (tools/pytest_main.py) keeps only the cases of
    fix ID. Tests that parametrize over the catalogue make their cases with it, and
    tools/check_fix runs the files that call it (tools/fix_targets.py)."""
    import pytest
    return pytest.param(*values, id=id, marks=pytest.mark.fix(*([fix_ids] if isinstance(fix_ids, str) else fix_ids)))


def fixture_changes(fixes: list[Fix] | None = None):
    """(fix, change) for every declared fixture, from discovery."""
    return [(fix, change) for fix in (discover() if fixes is None else fixes)
            for change in fix.changes if change.fixture is not None]


def catalogue_tree(project: str) -> dict[str, str]:
    """A tree of `project` holding every fixture of the fixes that run on it at its upstream
    path, plus the project's marker file. Raises FixtureUnavailable when one
    cannot be had here."""
    tree = {PROJECTS[project].markers[0]: ""}
    by_path: dict[str, list] = {}
    for fix, change in fixture_changes([f for f in discover() if runs_on(f.upstream, PROJECTS[project])]):
        by_path.setdefault(change.path, []).append((fix, change))
    for path, pairs in by_path.items():
        # several fixes on one file: the first of their fixtures on which every one of them applies
        texts = [fix.fixture_text(change) for fix, change in pairs]
        clash = ""
        if len(texts) > 1 and path.endswith(".py"):
            try:
                texts.append(merged_modules(texts))
            except FixtureClash as err:
                clash = f"{err}; "
        elif len(texts) > 1:  # else their fixtures one after the other
            texts.append("\n".join(texts))
        usable = [t for t in texts if all(apply_change(c, t).status is Status.APPLIED for _, c in pairs)]
        if not usable:
            last = texts[-1]
            refused = "; ".join(f"{f.id}: {apply_change(c, last).detail}" for f, c in pairs
                                if apply_change(c, last).status is not Status.APPLIED)
            on = "their fixtures merged" if path.endswith(".py") and not clash else "the last of them"
            raise AssertionError(
                f"{path}: no fixture of {[f.id for f, _ in pairs]} lets all of them apply; {clash}on {on}: "
                f"{refused}. Each fixture should hold only the code its own fix reads, so that the merged file "
                "keeps every fix's site count (docs/adding-a-fix.md, 'Two fixes on one file')")
        tree[path] = usable[0]
    return tree


class FixtureClash(ValueError):
    """Two fixtures define one def differently: no merged file holds it once."""


def merged_modules(texts: list[str]) -> str:
    """Python fixtures of one file merged so that each class and def stands once: a class framed by
    several fixtures gets all their members (in order), a statement two fixtures share is kept once."""
    try:
        modules = [libcst.parse_module(t) for t in texts]
    except libcst.ParserSyntaxError as err:
        raise FixtureClash(f"a fixture does not parse as a module ({err.message}, line {err.raw_line})") from None
    body: list = []
    for module in modules:
        body = merged_bodies(body, module.body, "")
    return modules[0].with_changes(header=[line for m in modules for line in m.header], body=body,
                                   footer=[line for m in modules for line in m.footer]).code


def merged_bodies(into: list, extra, scope: str) -> list:
    result = list(into)
    for statement in extra:
        name = getattr(statement, "name", None)
        twin = next((i for i, s in enumerate(result) if type(s) is type(statement) and name is not None
                     and s.name.value == name.value), None)
        if twin is not None and isinstance(statement, libcst.ClassDef) and not same_code(result[twin], statement):
            if not same_class_line(result[twin], statement):
                raise FixtureClash(f"{scope}{name.value} is framed by the fixtures with different class lines")
            inner = merged_bodies(result[twin].body.body, statement.body.body, f"{scope}{name.value}.")
            result[twin] = result[twin].with_changes(body=result[twin].body.with_changes(body=inner))
        elif twin is not None and not same_code(result[twin], statement):
            raise FixtureClash(f"{scope}{name.value} is defined by both fixtures, differently")
        elif twin is None and not any(same_code(s, statement) for s in result):
            result.append(statement)
    return result


def same_class_line(a: libcst.ClassDef, b: libcst.ClassDef) -> bool:
    """The same decorators and bases, each with an indented body to merge."""
    empty = libcst.IndentedBlock(body=[libcst.SimpleStatementLine([libcst.Pass()])])
    return all(isinstance(c.body, libcst.IndentedBlock) for c in (a, b)) and same_code(
        a.with_changes(body=empty), b.with_changes(body=empty))


def same_code(a, b) -> bool:
    """The same statement, whatever comments or blank lines stand above it."""
    bare = libcst.Module(body=[])
    return bare.code_for_node(a.with_changes(leading_lines=[]) if hasattr(a, "leading_lines") else a) == \
        bare.code_for_node(b.with_changes(leading_lines=[]) if hasattr(b, "leading_lines") else b)


NGINX = "/usr/sbin/nginx"


@contextlib.contextmanager
def nginx(root: Path, ranges: bool = True, webdav: bool = False, basic_auth: tuple[str, str] | None = None,
          timeout: float = 30.0):
    """A real HTTP server on 127.0.0.1 serving `root` (nginx from the Debian
    package, one process, no daemon); yields (base URL, access log path). The
    log has one line per request: status, Range header, body bytes sent, URI.
    `ranges=False`: byte ranges are not served (every answer is the whole file).
    `webdav=True`: PUT stores the body under `root` (Bazel's HTTP remote cache).
    `basic_auth=(user, password)`: every request needs those credentials (401 otherwise)."""
    work = Path(tempfile.mkdtemp(prefix="fixmono-nginx-"))
    for sub in ("client", "proxy", "fastcgi", "uwsgi", "scgi"):
        (work / sub).mkdir()
    port = free_port()
    # as root nginx hands its temporary folders to `nobody`; in a sandbox's user namespace that
    # uid may not exist: keep them the running user's
    user = "user root root;" if os.getuid() == 0 else ""
    auth = ""
    if basic_auth:
        (work / "htpasswd").write_text(f"{basic_auth[0]}:{{PLAIN}}{basic_auth[1]}\n")
        auth = f'auth_basic "fixmono"; auth_basic_user_file {work}/htpasswd;'
    (work / "nginx.conf").write_text(f"""
{user}
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/error.log;
events {{ worker_connections 64; }}
http {{
    log_format fields '$status "$http_range" $body_bytes_sent $request_uri';
    access_log {work}/access.log fields;
    client_body_temp_path {work}/client; proxy_temp_path {work}/proxy; fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;
    types {{ text/html html; application/octet-stream whl; }}
    server {{
        listen 127.0.0.1:{port};
        root {root};
        max_ranges {"16" if ranges else "0"};
        {"dav_methods PUT; create_full_put_path on; dav_access user:rw; client_max_body_size 0;" if webdav else ""}
        {auth}
    }}
}}
""")
    proc = subprocess.Popen([NGINX, "-p", str(work), "-c", str(work / "nginx.conf"), "-e", str(work / "error.log"),
                             "-g", "daemon off; master_process off;"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not start: {(work / 'error.log').read_text(errors='replace')}")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", work / "access.log"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def simple_index(root: Path, wheels: list[Path]) -> dict[str, str]:
    """A PEP 503 index under `root`/simple for `wheels` (copied to `root`/files),
    as PyPI publishes them: each link with its sha256 and the wheel's METADATA
    beside it (PEP 658, so pip resolves without downloading the wheel); the
    environment that points pip at it (and at nothing else: no config file is read)."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    by_project: dict[str, list[str]] = {}
    for wheel in wheels:
        shutil.copy(wheel, root / "files" / wheel.name)
        with zipfile.ZipFile(wheel) as zf:
            metadata = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
        (root / "files" / f"{wheel.name}.metadata").write_bytes(metadata)
        digest, meta_digest = hashlib.sha256(wheel.read_bytes()).hexdigest(), hashlib.sha256(metadata).hexdigest()
        by_project.setdefault(wheel.name.split("-")[0].lower().replace("_", "-"), []).append(
            f'<a href="../../files/{wheel.name}#sha256={digest}" data-dist-info-metadata="sha256={meta_digest}" '
            f'data-core-metadata="sha256={meta_digest}">{wheel.name}</a>\n')
    for project, links in by_project.items():
        (root / "simple" / project).mkdir(parents=True, exist_ok=True)
        (root / "simple" / project / "index.html").write_text(f"<html><body>\n{''.join(links)}</body></html>\n")
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": "", "PIP_NO_CACHE_DIR": "1"}


def served(log: Path) -> list[tuple[int, str, int, str]]:
    """(status, Range header, bytes sent, URI) of every request in an nginx() access log."""
    out = []
    for line in log.read_text().splitlines() if log.exists() else []:
        status, rest = line.split(" ", 1)
        wanted, _, rest = rest[1:].partition('" ')
        sent, uri = rest.split(" ", 1)
        out.append((int(status), "" if wanted == "-" else wanted, int(sent), uri))
    return out


def marked(mark: str) -> list[int]:
    """pids of live processes whose environment holds `mark` (NAME=VALUE)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if mark.encode() in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def kill_marked(mark: str, timeout: float = 30.0) -> None:
    """SIGKILL every process carrying `mark` until none is left."""
    deadline = time.monotonic() + timeout
    while (pids := marked(mark)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


class RayCluster:
    """A real Ray cluster on 127.0.0.1, started with `ray start` (the Ray of this
    interpreter's environment): a head that runs nothing (num_cpus=0) and one
    node per entry of `workers` ({"num_cpus": 1, "num_gpus": 1, "resources":
    {"rocm": 1}}). Every process of node i carries FIXMONO_RAY_NODE=<tag>-i in
    its environment, so a node can be killed whole (kill(i)) and nothing is
    left after stop(). `env` is added to every node's environment (PYTHONPATH
    for fixmono, Ray's health-check periods)."""

    def __init__(self, workers: list[dict], env: dict | None = None, timeout: float = 180.0):
        self.tag = f"{os.getpid()}-{time.monotonic_ns()}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
        self.temp = Path(tempfile.mkdtemp(prefix="fixmono-ray-"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[subprocess.Popen] = []
        try:
            self._start("head", ["--head", f"--port={self.port}", "--num-cpus=0", "--include-dashboard=false",
                                 f"--temp-dir={self.temp}", "--disable-usage-stats"], 0)
            self.wait_for(1, timeout)
            for i, spec in enumerate(workers, 1):
                args = [f"--address={self.address}", f"--num-cpus={spec.get('num_cpus', 1)}",
                        f"--num-gpus={spec.get('num_gpus', 0)}", f"--resources={json.dumps({**spec.get('resources', {}), f'fixmono_worker_{i}': 1})}"]
                self._start(str(i), args, i)
                self.wait_for(i + 1, timeout)  # one at a time: two raylets starting together time out on 2 cores
        except BaseException:
            self.stop()
            raise

    def mark(self, i: int) -> str:
        return f"FIXMONO_RAY_NODE={self.tag}-{i}"

    def _start(self, name: str, args: list[str], i: int) -> None:
        ray = str(Path(sys.executable).parent / "ray")
        ports = [f"--min-worker-port={31000 + 300 * i}", f"--max-worker-port={31000 + 300 * i + 299}"]
        log = open(self.temp / f"node-{name}.log", "wb")
        self.nodes.append(subprocess.Popen(
            [ray, "start", "--block", "--node-ip-address=127.0.0.1", "--object-store-memory=80000000",
             "--dashboard-agent-listen-port=0", *ports, *args],
            env={**self.env, "FIXMONO_RAY_NODE": f"{self.tag}-{i}"}, stdout=log, stderr=log,
            stdin=subprocess.DEVNULL, start_new_session=True))

    def alive(self) -> list[dict]:
        probe = ("import json, ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
                 "print(json.dumps([n for n in ray.nodes() if n['Alive']]))" % self.address)
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=self.env,
                              timeout=120)
        return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else []

    def wait_for(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.alive()) != count:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.nodes):
                logs = "".join(p.read_text(errors="replace")[-1500:] for p in self.temp.glob("node-*.log"))
                raise RuntimeError(f"the Ray cluster did not reach {count} nodes: {logs}")
            time.sleep(1)

    def node_ids(self) -> dict[int, str]:
        """worker index -> Ray node id of the live workers (each offers a resource fixmono_worker_<i>)."""
        out = {}
        for node in self.alive():
            for name in node["Resources"]:
                if name.startswith("fixmono_worker_"):
                    out[int(name.rpartition("_")[2])] = node["NodeID"]
        return out

    def kill(self, i: int) -> None:
        """SIGKILL every process of node i (its raylet, object store, workers)."""
        kill_marked(self.mark(i))

    def stop(self) -> None:
        for i in range(len(self.nodes) - 1, -1, -1):
            kill_marked(self.mark(i))
        for proc in self.nodes:
            proc.wait()
        shutil.rmtree(self.temp, ignore_errors=True)


def hunks_between(pre: str, post: str, path: str = "m.py") -> tuple:
    """The hunks of a unified diff of two texts (difflib's: no index line, no section header)."""
    from fixmono.model.patchfile import lines_of, parse_patch

    diff = "".join(difflib.unified_diff(lines_of(pre), lines_of(post), f"a/{path}", f"b/{path}"))
    return parse_patch(diff, "fix.patch").files[0].hunks


def git_hunks(pre: str, post: str, path: str = "m.py") -> tuple:
    """The hunks of `git diff` between two texts, with git's section headers (the def or function above each
    hunk, by git's python/cpp patterns), as a diff made in a repository has them."""
    from fixmono.model.patchfile import parse_patch

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ext = Path(path).suffix
        for side, text in (("a", pre), ("b", post)):
            (root / side).mkdir()
            (root / side / f"f{ext}").write_text(text)
        (root / ".gitattributes").write_text("*.py diff=python\n*.cpp diff=cpp\n*.h diff=cpp\n")
        diff = run_git(root, "diff", "--no-ext-diff", "--no-index", f"a/f{ext}", f"b/f{ext}").stdout
    diff = diff.replace(f"a/a/f{ext}", f"a/{path}").replace(f"b/b/f{ext}", f"b/{path}")
    return parse_patch(diff, "fix.patch").files[0].hunks


def ported(path: str, pre: str, post: str, release: str, with_pre_image: bool, diff=hunks_between) -> str | None:
    """The diff pre -> post (its hunks by `diff`: difflib's, or git_hunks) ported onto `release` as make_patch
    runs the engine (given the pre-image, or from the hunks alone): the text, "(already applied)", or None
    where it refuses."""
    from fixmono.engines.port import DiffTransform
    from fixmono.model.errors import NotApplicable, TransformFailed

    try:
        done = DiffTransform(path, diff(pre, post, path)).rewrite(release, pre if with_pre_image else None)
    except (TransformFailed, NotApplicable):
        return None
    return done.source if done.changed else "(already applied)"


def ported_by_syntax(pre: str, post: str, target: str, syntax=None) -> str | None:
    """The diff pre -> post placed on `target` by the syntax step alone (engines/structure.py; `syntax`: its
    language, Python by default), or None where it places nothing or refuses (a Conflict)."""
    from fixmono.engines import structure
    from fixmono.model.patchfile import lines_of

    plans = structure.placements(lines_of(pre), lines_of(target), hunks_between(pre, post), syntax)
    if plans is None or isinstance(plans, str):
        return None
    lines, offset = lines_of(target), 0
    for start, stop, replacement, _, _ in plans:
        lines[start + offset:stop + offset] = replacement
        offset += len(replacement) - (stop - start)
    return "".join(lines)


def with_notes(rng, lines: list[str], post_lines: list[str], at: int, comment: str) -> tuple[list[str], list[str]]:
    """(a release: `lines` with 3 comment lines, some with a blank line, added away from line `at`; the right
    answer: `post_lines` with the same added). `comment`: how a comment starts ("#", "//")."""
    spots = [n for n in range(1, len(lines)) if abs(n - at) > 2 and lines[n].strip()]
    release, right = list(lines), list(post_lines)
    for n in sorted(rng.sample(spots, 3), reverse=True):
        note = lines[n][:len(lines[n]) - len(lines[n].lstrip())] + f"{comment} note {n}\n"
        extra = [note, "\n"] if rng.random() < 0.5 else [note]
        release[n:n] = extra
        where = n if n < at else n + len(post_lines) - len(lines)
        right[where:where] = extra
    return release, right


def with_reflowed(lines: list[str], at: int, kind: str, flowed: set[int], reflow, added: str) \
        -> tuple[list[str], list[str]]:
    """(a release: the lines of `flowed` written over several lines by `reflow`; the right answer: that
    release with the fix's edit at line `at`: `kind` "replace" (the line becomes `added`, indented as it),
    "add" (`added` after it) or "remove")."""
    release, right = [], []
    for n, line in enumerate(lines):
        mine = reflow(line) if n in flowed else [line]
        release += mine
        indent = line[:len(line) - len(line.lstrip())]
        if n != at:
            right += mine
        elif kind == "replace":
            right.append(indent + added)
        elif kind == "add":
            right += mine + [indent + added]
    return release, right


def with_header(lines: list[str], post_lines: list[str], at: int, rewrite) -> tuple[list[str], list[str]]:
    """(a release: the header of the block line `at` is in (the nearest line above indented less) made
    `rewrite(header)`; the right answer: `post_lines`, the fix's edit at `at`, with the same header)."""
    width = len(lines[at]) - len(lines[at].lstrip())
    header = next(n for n in range(at - 1, -1, -1) if lines[n].strip() and len(lines[n]) - len(lines[n].lstrip()) < width)
    release, right = list(lines), list(post_lines)
    release[header] = right[header] = rewrite(lines[header])
    return release, right
