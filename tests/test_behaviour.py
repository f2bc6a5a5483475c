"""The behavioural matrix's parts, without the network: per-release
environments (analysis/envs.py) built by pip from wheels made here and
served as find-links, processes that are always stopped
(sources/processes.py), how a reproducer's verdict is set against
make_patch's status (analysis/behaviour.py), and drift_matrix --run's
argument checks. The real releases: test_behaviour_wheels.py."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from fixmono.analysis import behaviour, envs
from fixmono.sources import processes
from fixmono.analysis.drift import Cell
from fixmono.analysis.envs import Base, EnvironmentFailed, environment
from fixmono.runtime.child import child_env
from fixmono.testing import write_wheel
from tests.helpers import with_environ

BASE = Base.of(sys.executable)


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory, monkeypatch):
    """Every test its own FIXMONO_CACHE: environments and remembered verdicts of other runs stay out."""
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path_factory.mktemp("fixmono-cache")))


def module(name: str) -> dict[str, str]:
    return {f"{name}/__init__.py": f"NAME = {name!r}\n"}


@pytest.fixture
def index(tmp_path, monkeypatch) -> list[str]:
    """pip arguments for a find-links folder of wheels made here, and a cache of this test's own."""
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path / "cache"))
    links = tmp_path / "links"
    wheels = [
        ("fakeup", "1.0", ()),
        ("fakeup", "2.0", ("fakedep>=2", "iniconfig<1", "packaging>=1", "fakewin; sys_platform == 'win32'",
                           "fakeextra; extra == 'x'")),
        ("fakedep", "1.0", ()),
        ("fakedep", "2.0", ("fakedeeper==3.0",)),
        ("fakedeeper", "3.0", ()),
        ("iniconfig", "0.1", ()),  # older than the base's: the folder's must shadow it
        ("fakebad", "1.0", ("fakedep>=2", "fakepin==1.0")),
        ("fakepin", "1.0", ("fakedep<2",)),
        ("fakewin", "1.0", ()),
        ("fakeextra", "1.0", ()),
        ("fakenamespace", "1.0", ("fakenamespace-b",)),
        ("fakenamespace_b", "1.0", ()),  # a wheel file names it with "_"; the requirement above with "-"
    ]
    for name, version, requires in wheels:
        files = module(name.replace("-", "_"))
        if name.startswith("fakenamespace"):  # two distributions sharing the folder `sharedns`
            files = {f"sharedns/{name.replace('-', '_')}.py": "X = 1\n"}
        write_wheel(links, name, version, files, requires=requires)
    return ["--no-index", "--find-links", str(links)]


def installed(folder: Path) -> dict[str, str]:
    return json.loads((folder / "env.json").read_text())["installed"]


def test_release_alone_when_the_base_satisfies_it(index):
    folder = environment(BASE, "fakeup", "1.0", index)
    assert installed(folder) == {"fakeup": "1.0"}
    assert (folder / "fakeup" / "__init__.py").is_file()


def test_requirements_round_by_round_only_what_the_base_lacks(index):
    folder = environment(BASE, "fakeup", "2.0", index)
    # fakedep>=2 and its fakedeeper==3.0 (second round); iniconfig<1 though the base has a newer one;
    # not packaging (the base's satisfies it), not a win32-only nor an extra's requirement
    assert installed(folder) == {"fakeup": "2.0", "fakedep": "2.0", "fakedeeper": "3.0", "iniconfig": "0.1"}
    found = subprocess.run([sys.executable, "-c", "import iniconfig, importlib.metadata as m; "
                            "print(m.version('iniconfig'), iniconfig.__file__)"],
                           capture_output=True, text=True, env=child_env(before=(str(folder),)), check=True)
    version, where = found.stdout.split()
    assert version == "0.1" and where.startswith(str(folder))


def test_namespace_folders_of_two_rounds_are_merged(index):
    folder = environment(BASE, "fakenamespace", "1.0", index)
    assert sorted(p.name for p in (folder / "sharedns").iterdir()) == ["fakenamespace.py", "fakenamespace_b.py"]


def test_conflicting_requirements_are_refused(index):
    with pytest.raises(EnvironmentFailed, match="fakedep<2 conflicts with fakedep 2.0"):
        environment(BASE, "fakebad", "1.0", index)
    assert not list((Path(os.environ["FIXMONO_CACHE"]) / "envs" / BASE.key).glob("*fakebad*/"))


def test_a_missing_release_is_pips_reason_and_leaves_nothing(index):
    with pytest.raises(EnvironmentFailed, match=r"pip install fakeup==9\.0: .*(No matching distribution|Could not find)"):
        environment(BASE, "fakeup", "9.0", index)
    root = Path(os.environ["FIXMONO_CACHE"]) / "envs" / BASE.key
    assert [p.name for p in root.iterdir() if not p.name.endswith(".lock")] == []


def test_a_built_environment_is_reused_without_pip(index, monkeypatch):
    folder = environment(BASE, "fakeup", "2.0", index)
    monkeypatch.setattr(envs, "pip_install", lambda *a: pytest.fail("pip ran for a cached environment"))
    assert environment(BASE, "fakeup", "2.0", index) == folder


def test_what_a_killed_build_left_is_replaced(index):
    root = Path(os.environ["FIXMONO_CACHE"]) / "envs" / BASE.key
    (root / ".building-fakeup-2.0-4242" / "half").mkdir(parents=True)
    (root / "fakeup-2.0" / "fakeup").mkdir(parents=True)  # a folder without its record is not an environment
    folder = environment(BASE, "fakeup", "2.0", index)
    assert installed(folder)["fakeup"] == "2.0" and not list(root.glob(".building-*"))


def test_discard_removes_an_environment_and_the_next_build_makes_it_again(index):
    folder = environment(BASE, "fakeup", "1.0", index)
    envs.discard(BASE, "fakeup", "1.0")
    assert not folder.exists()
    assert installed(environment(BASE, "fakeup", "1.0", index)) == {"fakeup": "1.0"}


def test_discard_envs_waits_for_the_last_run_of_a_release(monkeypatch):
    """Two fixes on the same transformers releases: each environment goes once, after both runs."""
    fixes = [SimpleNamespace(id=f"transformers-made-up-{n}", upstream="transformers") for n in (1, 2)]
    events = []
    monkeypatch.setattr(behaviour, "run_one", lambda fix, version, *a: events.append(("ran", fix.id, version)) or
                        behaviour.Run(version, "applied", "reproduced", "", "", 0.0))
    monkeypatch.setattr(behaviour, "discard", lambda base, dist, version: events.append(("discard", dist, version)))
    statics = {f.id: [Cell("1.0", "applied", "", "n/a"), Cell("2.0", "applied", "", "n/a")] for f in fixes}
    behaviour.run_matrix(statics, fixes, [BASE], 3, 60, [], discard_envs=True)
    for version in ("1.0", "2.0"):
        ran = [i for i, e in enumerate(events) if e[0] == "ran" and e[2] == version]
        (gone,) = [i for i, e in enumerate(events) if e == ("discard", "transformers", version)]
        assert len(ran) == len(fixes) and gone > max(ran)
    events.clear()
    behaviour.run_matrix(statics, fixes, [BASE], 3, 60, [])
    assert not [e for e in events if e[0] == "discard"]


def test_a_release_for_another_python_says_so(index):
    links = Path(index[-1])
    write_wheel(links, "fakeup", "3.0", module("fakeup"), metadata="Requires-Python: >=3.99\n")
    with pytest.raises(EnvironmentFailed, match="different Python") as caught:
        environment(BASE, "fakeup", "3.0", index)
    assert caught.value.wrong_python
    with pytest.raises(EnvironmentFailed) as other:
        environment(BASE, "fakeup", "9.0", index)
    assert not other.value.wrong_python


def test_each_release_runs_under_the_first_interpreter_it_installs_on(monkeypatch, made_up):
    """--python A --python B: a release whose pip answer is 'another Python' moves on to B; any
    other refusal stops there (B would fail the same way)."""
    older = Base("/old/python", "3.11.7", BASE.markers, {})
    newer = Base("/new/python", "3.12.1", BASE.markers, {})
    tried = []

    def environment_of(base, dist, version, *rest):
        tried.append(base.python)
        if base is older and version == "needs-3.12":
            raise EnvironmentFailed("jax: requires a different Python", wrong_python=True)
        if version == "missing":
            raise EnvironmentFailed("no such release")
        return Path(f"/envs/{base.version}/{version}")

    ran = []
    monkeypatch.setattr(behaviour, "environment", environment_of)
    monkeypatch.setattr(behaviour, "check", lambda fix, timeout, python, before, env: ran.append((python, before)) or
                        {"fix": fix.id, "status": "still-needed", "detail": "shown", "figures": {}})
    fix = made_up("made_up_anywhere")
    run = behaviour.run_one(fix, "needs-3.12", "applied", [older, newer], 60, [], lambda m: None)
    assert (run.verdict, run.python, run.python_version) == ("reproduced", "/new/python", "3.12.1")
    assert tried == ["/old/python", "/new/python"] and ran == [("/new/python", ("/envs/3.12.1/needs-3.12",))]
    tried.clear()
    assert behaviour.run_one(fix, "1.0", "applied", [older, newer], 60, [], lambda m: None).python == "/old/python"
    assert tried == ["/old/python"]
    tried.clear()
    missing = behaviour.run_one(fix, "missing", "applied", [older, newer], 60, [], lambda m: None)
    assert missing.verdict == "cannot-run-here" and "no such release" in missing.detail and tried == ["/old/python"]

    def no_python_fits(*args):
        raise EnvironmentFailed("requires a different Python", wrong_python=True)

    monkeypatch.setattr(behaviour, "environment", no_python_fits)
    neither = behaviour.run_one(fix, "x", "applied", [older, newer], 60, [], lambda m: None)
    assert neither.verdict == "cannot-run-here" and "Python 3.11.7" in neither.detail and "Python 3.12.1" in neither.detail


def test_the_cache_key_follows_the_base():
    other = Base(BASE.python, BASE.version, BASE.markers, {**BASE.installed, "iniconfig": "0.0.1"})
    assert other.key != BASE.key
    assert Base(BASE.python, BASE.version, BASE.markers, dict(BASE.installed)).key == BASE.key


def test_not_a_python_is_one_user_error(tmp_path):
    from fixmono.model.errors import UserError

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho nope >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(UserError, match="not a Python"):
        Base.of(str(fake))
    with pytest.raises(UserError, match="cannot run it"):
        Base.of(str(tmp_path / "missing"))


@pytest.mark.parametrize("static,verdict,flagged", [
    ("applied", "reproduced", False), ("applied", "not-reproduced", True), ("applied", "cannot-run-here", False),
    ("already-applied", "reproduced", True), ("already-applied", "not-reproduced", False),
    ("already-applied", "cannot-run-here", False), ("not-applicable", "reproduced", True),
    ("not-applicable", "not-reproduced", False), ("failed", "reproduced", False), ("failed", "not-reproduced", False),
])
def test_every_pair_of_static_status_and_verdict(static, verdict, flagged):
    assert bool(behaviour.finding(static, verdict)) == flagged


def test_same_release_ignores_local_builds():
    assert behaviour.same_release("2.13.0+cpu", "2.13.0")
    assert not behaviour.same_release("2.13.0+cpu", "2.13.1")
    assert not behaviour.same_release(None, "2.13.0")


def test_only_cpu_reproducers_run_here():
    fixes = [SimpleNamespace(id=f"made-up-{needs}", repro_needs=needs, reproduce=print) for needs in ("cpu", "rocm")]
    here, elsewhere = behaviour.runnable(fixes)
    assert [f.id for f in here] == ["made-up-cpu"]
    assert elsewhere == {"made-up-rocm": "its reproducer needs rocm"}


def alive(marker: str) -> list[int]:
    """pids of processes whose command line holds `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def made_up_fix(root: Path, name: str, repro: str = "def main():\n    return 1\n") -> SimpleNamespace:
    """A fix folder of our own (a package under `root`, on sys.path), and the fields of a Fix the cache and
    the runs read."""
    files = {"__init__.py": "", "fix.py": "FIX = None\n", "repro.py": repro,
             "hotfix.py": "X = 1\n", "fix.patch": "--- a/x.py\n+++ b/x.py\n", "fixtures/x.py": "x = 1\n",
             "test_fix.py": "def test_x():\n    pass\n", "README.md": "# A fix\n", "BUILD.bazel": "fix_module()\n",
             "results/run.json": "{}\n"}
    for path, text in files.items():
        (root / name / path).parent.mkdir(parents=True, exist_ok=True)
        (root / name / path).write_text(text)
    return SimpleNamespace(id=name.replace("_", "-"), package=name, repro_needs="cpu", upstream="transformers")


FIGURES_REPRO = textwrap.dedent("""\
    from fixmono.model.fix import ReproResult, Verdict
    from fixmono.runtime.repro import cli


    def reproduce():
        return ReproResult(Verdict.REPRODUCED, "2 of 4 rows differ", {"ratio": 0.5, "fixed": 1.0, "rows": [1, 3]})


    def main(argv=None):
        return cli(reproduce, "made up", argv)
    """)


def reporting(verdict: str) -> str:
    """repro.py of a made-up fix whose verdict is `verdict`, naming the transformers it ran with."""
    return textwrap.dedent(f"""\
        import transformers
        from fixmono.model.fix import ReproResult, Verdict
        from fixmono.runtime.repro import cli


        def main(argv=None):
            return cli(lambda: ReproResult(Verdict.{verdict}, f"transformers {{transformers.__version__}}"), "", argv)
        """)


SLEEPING = "import time\n\n\ndef main(argv=None):\n    time.sleep(600)\n"


@pytest.fixture
def made_up(tmp_path, monkeypatch):
    """made_up(name, repro): a made-up fix whose package the tests and its reproducer's process import."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    return lambda name, repro="def main():\n    return 1\n": made_up_fix(tmp_path, name, repro)


BASE_TRANSFORMERS = BASE.installed.get("transformers")


@pytest.mark.skipif(BASE_TRANSFORMERS is None, reason="needs transformers in this environment")
def test_a_release_the_base_has_runs_there_and_a_disagreement_is_flagged(tmp_path, monkeypatch, made_up):
    """The base's own transformers (5.23.0 in .venv: fixed upstream) needs no environment; told that
    make_patch found the bug's code there, the run flags the disagreement."""
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path))
    progress = []
    fix = made_up("made_up_not_reproduced", reporting("NOT_REPRODUCED"))
    agreed = behaviour.run_one(fix, BASE_TRANSFORMERS, "already-applied", [BASE], 300, [], progress.append)
    assert (agreed.verdict, agreed.finding) == ("not-reproduced", ""), agreed
    assert BASE_TRANSFORMERS in agreed.detail and not (tmp_path / "envs").exists()
    flagged = behaviour.run_one(fix, BASE_TRANSFORMERS, "applied", [BASE], 300, [], progress.append)
    assert flagged.verdict == "not-reproduced" and "does not reproduce" in flagged.finding


@pytest.mark.skipif(BASE_TRANSFORMERS is None, reason="needs transformers in this environment")
def test_a_reproducer_past_its_time_is_killed_and_cannot_run_here(monkeypatch, made_up):
    marker = f"FIXMONO_TEST_MARK={time.time_ns()}"
    monkeypatch.setenv(*marker.split("="))
    run = behaviour.run_one(made_up("made_up_sleeping", SLEEPING), BASE_TRANSFORMERS, "already-applied", [BASE], 0.3, [], lambda m: None)
    assert (run.verdict, run.finding) == ("cannot-run-here", "") and "ran past" in run.detail
    time.sleep(0.2)
    assert with_environ(marker) == []


def test_a_timeout_kills_the_whole_group():
    marker = f"{time.time_ns()}"
    with pytest.raises(subprocess.TimeoutExpired):
        processes.bounded(["sh", "-c", f"sleep 1000{marker} 2>/dev/null & sleep 1000.{marker}"], timeout=1)
    time.sleep(0.2)
    assert alive(marker) == []


def test_stop_all_kills_the_live_and_refuses_new_ones():
    """The one it killed is Stopped too: its exit status (SIGKILL) is no answer of the command's."""
    marker = f"{time.time_ns()}"
    results = []

    def sleep():
        try:
            results.append(processes.bounded(["sleep", f"100.{marker}"], timeout=60))
        except processes.Stopped as stopped:
            results.append(stopped)

    worker = threading.Thread(target=sleep)
    worker.start()
    for _ in range(100):
        if alive(marker):
            break
        time.sleep(0.05)
    try:
        assert processes.stop_all() == 1
        worker.join(10)
        assert isinstance(results[0], processes.Stopped) and alive(marker) == []
        with pytest.raises(processes.Stopped):
            processes.bounded(["true"], timeout=5)
    finally:
        processes.resume()
    assert processes.bounded(["true"], timeout=5).returncode == 0


def test_ctrl_c_while_pip_builds_leaves_no_pip_and_no_half_environment(tmp_path, made_up):
    """pip waits on a find-links server that never answers; SIGINT to the run."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # connections queue, nothing is ever answered
    url = f"http://127.0.0.1:{server.getsockname()[1]}/links/"
    cache = tmp_path / "cache"
    made_up("made_up_pip")
    script = textwrap.dedent("""
        import os, sys
        from fixmono.analysis import behaviour, envs
        from fixmono.analysis.drift import Cell
        base = envs.Base.of(sys.executable)
        from types import SimpleNamespace
        fix = SimpleNamespace(id="made-up-pip", package="made_up_pip", upstream="transformers", repro_needs="cpu")
        cell = Cell("5.8.0", "applied", "", "n/a")
        behaviour.run_matrix({fix.id: [cell]}, [fix], [base], 2, 60,
                             ["--no-index", "--find-links", os.environ["LINKS"]])
    """)  # the URL only in pip's command line: what alive() looks for
    env = child_env({**os.environ, "FIXMONO_CACHE": str(cache), "LINKS": url})
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not alive(url) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive(url), "pip never started"
        assert list(cache.glob("envs/*/.building-*"))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        server.close()
    assert "KeyboardInterrupt" in err and proc.returncode != 0
    time.sleep(0.2)
    assert alive(url) == []
    leftovers = [p.name for p in cache.glob("envs/*/*") if not p.name.endswith(".lock")]
    assert leftovers == []


@pytest.mark.parametrize("args,message", [
    (["--run", "--jobs", "0"], "--jobs 0: must be 1 or more"),
    (["--run", "--timeout", "0"], "--timeout 0: must be more than 0"),
    (["--jobs", "2"], "--jobs is for --run"),
    (["--python", "/usr/bin/python3"], "--python is for --run"),
    (["--pip-arg=--no-index"], "--pip-arg is for --run"),
    (["--run", "--python", "/nonexistent/python"], "/nonexistent/python: cannot run it"),
    (["--run", "--git", "."], "--run is for published releases"),
    (["--installed"], "--installed is for --run"),
    (["--run", "--installed", "--versions", "transformers=5.8.0"], "--installed runs against this interpreter"),
    (["--run", "--retries", "-1"], "--retries -1: must be 0 or more"),
    (["--ray", "auto"], "--ray is for --run"),
    (["--run", "--ray", "127.0.0.1:1"], "--ray 127.0.0.1:1: no Ray cluster at 127.0.0.1:1"),  # not minutes
])
def test_bad_run_arguments_are_one_line_before_any_wheel(args, message, tmp_path):
    fix = ["--fix", "transformers-moe-sentinel-router-grad"]
    proc = subprocess.run([sys.executable, "-m", "fixmono.cli.drift", *fix, *args], capture_output=True, text=True,
                          env=child_env({**os.environ, "FIXMONO_CACHE": str(tmp_path)}), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "wheels").exists() and not (tmp_path / "envs").exists()


def test_what_a_reproducer_needs_of_fixmono_is_in_its_declared_dependencies():
    import tomllib

    from fixmono.testing import REPO_ROOT

    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert set(envs.RUNNER) <= set(declared)


def test_a_base_without_fixmonos_dependencies_gets_them_in_the_environment(index):
    bare = Base(BASE.python, BASE.version, BASE.markers, {k: v for k, v in BASE.installed.items()
                                                         if k not in ("libcst", "packaging", "pyyaml")})
    links = Path(index[-1])
    write_wheel(links, "libcst", "1.1.0", module("libcst"), requires=("pyyaml>=5.2",))
    write_wheel(links, "packaging", "23.0", module("packaging"))
    write_wheel(links, "PyYAML", "6.0", module("yaml"))
    assert installed(environment(bare, "fakeup", "1.0", index)) == {
        "fakeup": "1.0", "libcst": "1.1.0", "packaging": "23.0", "pyyaml": "6.0"}
    assert installed(environment(BASE, "fakeup", "1.0", index)) == {"fakeup": "1.0"}  # this base has them


@pytest.mark.skipif(BASE.installed.get("jaxlib") is None, reason="needs jaxlib in this environment")
def test_run_installed_every_fix_against_this_interpreters_releases(tmp_path):
    """--run --installed: no wheel read; a compiled fix (XLA's, inside jaxlib) runs too, and its release is
    jaxlib's (an empty dist name once made pip install '==0.11.2' on the H100)."""
    proc = subprocess.run([sys.executable, "-m", "fixmono.cli.drift", "--run", "--installed", "--json",
                           "--fix", "jaxlib-rocm-plugin-discovery", "--fix", "xla-rocm-miopen-global-mutex"],
                          capture_output=True, text=True, timeout=600,
                          env=child_env({**os.environ, "FIXMONO_CACHE": str(tmp_path)}))
    assert proc.returncode == 0, proc.stderr
    runs = {fix: rs[0] for fix, rs in json.loads(proc.stdout)["runs"].items()}
    jaxlib = BASE.installed["jaxlib"]
    assert (runs["jaxlib-rocm-plugin-discovery"]["version"], runs["xla-rocm-miopen-global-mutex"]["version"]) == \
        (jaxlib, jaxlib)
    assert runs["xla-rocm-miopen-global-mutex"]["static"] == "compiled"
    assert not any(r["detail"].startswith("no environment") for r in runs.values())
    assert runs["jaxlib-rocm-plugin-discovery"]["verdict"] in ("reproduced", "not-reproduced")
    assert not (tmp_path / "wheels").exists() and not (tmp_path / "envs").exists()


def test_parallel_reproducers_share_the_cores_unless_told(monkeypatch, made_up):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    seen = []
    monkeypatch.setattr(behaviour, "run_one", lambda *a: seen.append(a[-1].get("OMP_NUM_THREADS")) or
                        behaviour.Run("1.0", "applied", "reproduced", "", "", 0.0))
    fix = made_up("made_up_parallel")
    cells = {fix.id: [Cell("1.0", "applied", "", "n/a")]}
    behaviour.run_matrix(cells, [fix], [BASE], 4, 60, [])
    behaviour.run_matrix(cells, [fix], [BASE], 1, 60, [])
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    behaviour.run_matrix(cells, [fix], [BASE], 4, 60, [])
    assert seen == ["2", None, None] and os.environ["OMP_NUM_THREADS"] == "3"  # the caller's 3 is inherited
    monkeypatch.delenv("OMP_NUM_THREADS")
    behaviour.run_matrix(cells, [fix], [BASE], 4, 60, [])
    assert "OMP_NUM_THREADS" not in os.environ  # each reproducer's own environment, not this process's


@pytest.mark.skipif(BASE_TRANSFORMERS is None, reason="needs transformers in this environment")
def test_a_run_carries_the_reproducers_figures_also_when_reused(made_up):
    """drift --run --json's rows are the runs: the numbers the reproducer measured, not only its summary."""
    fix = made_up("made_up_figures", FIGURES_REPRO)
    run = behaviour.run_one(fix, BASE_TRANSFORMERS, "applied", [BASE], 120, [], lambda m: None)
    assert (run.verdict, run.detail) == ("reproduced", "2 of 4 rows differ"), run
    assert dataclasses.asdict(run)["figures"] == {"ratio": 0.5, "fixed": 1.0, "rows": [1, 3]}
    again = behaviour.run_one(fix, BASE_TRANSFORMERS, "applied", [BASE], 120, [], lambda m: pytest.fail("ran again"))
    assert again.reused and again.figures == run.figures


def test_a_verdict_is_kept_for_the_same_inputs_only(tmp_path, monkeypatch):
    from fixmono.analysis import results

    monkeypatch.syspath_prepend(str(tmp_path))
    fix, other = made_up_fix(tmp_path, "made_up_kept"), made_up_fix(tmp_path, "made_up_other")
    first = results.key(fix, "5.8.0", ["a"])
    assert first == results.key(fix, "5.8.0", ["a"])
    assert len({first, results.key(fix, "5.9.0", ["a"]), results.key(fix, "5.8.0", ["b"]),
                results.key(other, "5.8.0", ["a"])}) == 4
    monkeypatch.setattr(results, "runner_source", lambda: "edited")
    assert results.key(fix, "5.8.0", ["a"]) != first  # the code that runs reproducers changed


@pytest.mark.parametrize("edited, kept", [("test_fix.py", True), ("README.md", True), ("BUILD.bazel", True),
                                          ("results/run.json", True), ("repro.py", False), ("fix.patch", False),
                                          ("hotfix.py", False), ("fix.py", False), ("fixtures/x.py", False)])
def test_the_verdict_is_keyed_on_what_the_reproducer_runs(tmp_path, monkeypatch, edited, kept):
    """Editing a fix's tests or README keeps its verdicts; editing what its reproducer runs or reads runs it again."""
    from fixmono.analysis import results

    monkeypatch.syspath_prepend(str(tmp_path))
    fix = made_up_fix(tmp_path, "made_up_edited")
    before = results.key(fix, "5.8.0", ["a"])
    path = tmp_path / "made_up_edited" / edited
    path.write_text(path.read_text() + "# edited\n")
    assert (results.key(fix, "5.8.0", ["a"]) == before) is kept


def test_ctrl_c_while_a_reproducer_runs(tmp_path):
    """drift --run --installed on a throwaway fix (a copy of this tree with one
    more folder) whose reproducer sleeps: SIGINT once it runs ends the run with
    130 and one line, and leaves no reproducer behind. No network: the
    release is this interpreter's own."""
    from tests.helpers import throwaway_fix, tree_env, tree_with_fixes

    fix_id = "transformers-throwaway-sleeper"
    started = tmp_path / "reproducer-started"
    repro = f'''\
        """Sleeps: a reproducer that is still running when the test presses Ctrl-C."""
        import os
        import time
        from pathlib import Path


        def reproduce():
            Path({str(started)!r}).write_text(str(os.getpid()))
            time.sleep(600)


        def main(argv=None):
            reproduce()
            return 0
        '''
    root = tree_with_fixes(tmp_path / "repo", {"fixes/transformers/throwaway_sleeper": throwaway_fix(
        "transformers", fix_id, "src/transformers/_throwaway.py", repro)})
    env = tree_env(root, FIXMONO_CACHE=str(tmp_path / "c"))
    proc = subprocess.Popen([sys.executable, "-m", "fixmono.cli.drift", "--fix", fix_id, "--run", "--installed"],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), f"the reproducer never started: {proc.communicate(timeout=60)}"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and err == "drift_matrix: interrupted; no report was written\n", err
    reproducer = int(started.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{reproducer}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{reproducer}").exists() or \
        Path(f"/proc/{reproducer}/stat").read_text().split()[2] == "Z", "the reproducer outlived the run"


def test_why_a_fix_is_not_run_here_names_what_its_fix_py_lacks():
    from types import SimpleNamespace
    fixes = [SimpleNamespace(id="none", reproduce=None, repro_needs=""),
             SimpleNamespace(id="unnamed", reproduce=print, repro_needs=""),
             SimpleNamespace(id="rocm", reproduce=print, repro_needs="rocm"),
             SimpleNamespace(id="cpu", reproduce=print, repro_needs="cpu")]
    here, elsewhere = behaviour.runnable(fixes)
    assert [f.id for f in here] == ["cpu"]
    assert elsewhere == {"none": "it has no reproducer (fix.py declares no reproduce=)",
                         "unnamed": "its reproducer names no machine (fix.py declares no repro_needs=: cpu, cuda or "
                                    "rocm)",
                         "rocm": "its reproducer needs rocm"}
