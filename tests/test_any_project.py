"""Any project, not only the catalogue's upstreams: a diff needs no fix, so
`make-patch --diff`, `drift --diff`, `patch-wheel --diff` and `patch-env --diff`
port it onto any git checkout, any `pip:NAME==VERSION` and any installed
distribution. Our own small trees shaped like diffusers (src/diffusers/...),
accelerate (src/accelerate/...) and vllm (vllm/...), made at test time; the
wheels are made here and served from a find-links folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT, git, make_patch, make_repo, snapshot, write_wheel
from tests.helpers import TF_TEXT

MODULE = TF_TEXT  # a scheduler module of our own (tests/helpers.py)
FIXED = MODULE.replace("return step / self.warmup", "return step / max(1, self.warmup)")
LATER = "import os\n" + MODULE.replace("class Scheduler:\n", "class Scheduler:\n    def reset(self):\n"
                                                           "        self.step = 0\n\n")
SHAPES = {  # a project of no fix: where its package is in its repository
    "diffusers": "src/diffusers/schedulers/scheduling_ddim.py",
    "accelerate": "src/accelerate/scheduler.py",
    "vllm": "vllm/engine/arg_utils.py",
}
HUNK = """@@ -4,4 +4,4 @@ class Scheduler:
     def factor(self, step):
         if step < self.warmup:
-            return step / self.warmup
+            return step / max(1, self.warmup)
         return 1.0
"""


def diff_of(path: str, form: str) -> str:
    """The fix as a team carries it: git's a/ b/, quilt's pkg.orig/ pkg/, -p0, svn's Index:."""
    old, new = {"git": (f"a/{path}", f"b/{path}"), "quilt": (f"proj-1.0.orig/{path}", f"proj-1.0/{path}"),
                "p0": (path, path)}.get(form, (path, path))
    head = f"Index: {path}\n{'=' * 67}\n" if form == "index" else ""
    return f"From: A User <user@example.com>\nSubject: [PATCH] Scheduler: no division by zero\n\n---\n" \
           f"{head}--- {old}\n+++ {new}\n{HUNK}"


def checkout(tmp_path: Path, name: str, text: str = LATER) -> Path:
    path = SHAPES[name]
    package = path.removeprefix("src/").split("/")[0]
    return make_repo(tmp_path / name, {path: text, path.rsplit("/", 1)[0] + "/__init__.py": "",
                                       path.split(package)[0] + f"{package}/__init__.py": "__version__ = '1.0'\n",
                                       "README.md": f"{name}-shaped, ours\n"})


@pytest.mark.parametrize("form", ["git", "quilt", "p0", "index"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_diff_is_ported_onto_any_checkout(tmp_path, name, form):
    repo = checkout(tmp_path, name)
    before = snapshot(repo)
    (tmp_path / "fix.patch").write_text(diff_of(SHAPES[name], form))
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", str(repo), "--out",
                      str(tmp_path / "out"), "--json")
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["project"] == name and [r["status"] for r in run["results"]] == ["applied"]
    assert snapshot(repo) == before
    (written,) = sorted((tmp_path / "out").glob("0001-*.patch"))
    git(repo, "am", "-q", str(written))
    assert (repo / SHAPES[name]).read_text() == LATER.replace("return step / self.warmup",
                                                              "return step / max(1, self.warmup)")


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_branch_and_already_applied_on_any_checkout(tmp_path, name):
    repo = checkout(tmp_path, name)
    (tmp_path / "fix.patch").write_text(diff_of(SHAPES[name], "git"))
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", str(repo), "--branch", "fixed")
    assert proc.returncode == 0, proc.stderr
    assert "max(1, self.warmup)" in git(repo, "show", f"fixed:{SHAPES[name]}")
    done = checkout(tmp_path / "done", name, FIXED)
    again = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", str(done), "--check", "--json")
    assert json.loads(again.stdout)["runs"][0]["results"][0]["status"] == "already-applied", again.stderr


def test_catalogue_fixes_do_not_run_on_another_project(tmp_path):
    repo = checkout(tmp_path, "vllm")
    proc = make_patch("--all", "--upstream", str(repo), "--check")
    assert proc.returncode == 2 and "not a known upstream" in proc.stderr, proc.stderr


# pip: a made-up distribution of ours, in both layouts
DISTS = {"tinyfusers": "src/tinyfusers/schedulers/ddim.py", "tinyllm": "tinyllm/engine/args.py"}


def links(tmp_path: Path, versions: dict[str, str]) -> dict:
    """Wheels of every DISTS distribution, a version each per `versions` (version -> module text), in a
    find-links folder; the environment that points pip at it only."""
    folder = tmp_path / "links"
    for dist, path in DISTS.items():
        member = path.removeprefix("src/")
        for version, text in versions.items():
            write_wheel(folder, dist, version, {f"{dist}/__init__.py": "", member: text,
                                                member.rsplit("/", 1)[0] + "/__init__.py": ""})
    return offline_pip(folder, tmp_path)


def offline_pip(folder: Path, tmp_path: Path) -> dict:
    """The environment that points pip at the find-links `folder` only, with a cache of the test's own."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(folder), "PIP_CONFIG_FILE": os.devnull,
            "FIXMONO_CACHE": str(tmp_path / "cache")}


@pytest.mark.parametrize("form", ["git", "quilt", "p0"])
@pytest.mark.parametrize("dist", sorted(DISTS))
def test_a_diff_is_ported_onto_any_pip_release(tmp_path, dist, form):
    env = links(tmp_path, {"1.0": MODULE})
    (tmp_path / "fix.patch").write_text(diff_of(DISTS[dist], form))
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", f"pip:{dist}==1.0", "--out",
                      str(tmp_path / "out"), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert (run["project"], run["results"][0]["status"]) == (dist, "applied")
    (written,) = sorted((tmp_path / "out").glob("0001-*.patch"))
    assert f"+++ b/{DISTS[dist]}" in written.read_text()  # the repository's layout: src/NAME/... or NAME/...


def drift(*args, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "drift_matrix"), *map(str, args)],
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=600)


@pytest.mark.parametrize("form", ["quilt", "p0"])
@pytest.mark.parametrize("dist", sorted(DISTS))
def test_drift_takes_any_pypi_name(tmp_path, dist, form):
    env = links(tmp_path, {"1.0": "x = 1\n", "1.1": MODULE, "1.2": LATER, "1.3": FIXED})
    (tmp_path / "fix.patch").write_text(diff_of(DISTS[dist], form))
    proc = drift("--diff", tmp_path / "fix.patch", "--versions", f"{dist}=1.0,1.1,1.2,1.3", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    (cells,) = json.loads(proc.stdout)["matrix"].values()
    assert [(c["version"], c["status"]) for c in cells] == [
        ("1.0", "not-applicable"), ("1.1", "applied"), ("1.2", "applied"), ("1.3", "already-applied")]


@pytest.mark.parametrize("spelling", ["torch", "pytorch"])
def test_drift_versions_takes_the_pypi_name_and_the_project_name(tmp_path, spelling):
    folder = tmp_path / "links"
    write_wheel(folder, "torch", "99.0.0", {"torch/__init__.py": "", "torch/optim/sched.py": MODULE})
    (tmp_path / "fix.patch").write_text(diff_of("torch/optim/sched.py", "git"))
    env = offline_pip(folder, tmp_path)
    proc = drift("--diff", tmp_path / "fix.patch", "--versions", f"{spelling}=99.0.0", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    (cells,) = json.loads(proc.stdout)["matrix"].values()
    assert [c["status"] for c in cells] == ["applied"]


def patch_wheel(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "patch_wheel"), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("form", ["git", "quilt", "p0"])
@pytest.mark.parametrize("dist", sorted(DISTS))
def test_patch_wheel_takes_a_wheel_of_any_distribution(tmp_path, dist, form):
    links(tmp_path, {"1.0": MODULE})
    (tmp_path / "fix.patch").write_text(diff_of(DISTS[dist], form))
    proc = patch_wheel(next((tmp_path / "links").glob(f"{dist}-1.0-*.whl")), "--diff", tmp_path / "fix.patch",
                       "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    (built,) = (tmp_path / "out").glob(f"{dist}-1.0+fixmono-*.whl")
    with zipfile.ZipFile(built) as zf:
        assert zf.read(DISTS[dist].removeprefix("src/")).decode() == FIXED


def fixmono(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fixmono", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")})


@pytest.mark.parametrize("dist", sorted(DISTS))
def test_patch_env_patches_any_installed_distribution_and_undoes_it(tmp_path, dist):
    links(tmp_path, {"1.0": MODULE})
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                           "--no-index", "--no-cache-dir", "--disable-pip-version-check",
                           str(next((tmp_path / "links").glob(f"{dist}-1.0-*.whl")))],
                          capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": ""})
    assert proc.returncode == 0, proc.stderr
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    installed = site / DISTS[dist].removeprefix("src/")
    (tmp_path / "fix.patch").write_text(diff_of(DISTS[dist], "git"))
    done = fixmono("patch-env", "--python", str(python), "--diff", str(tmp_path / "fix.patch"))
    assert done.returncode == 0 and "patched" in done.stdout, done.stdout + done.stderr
    assert installed.read_text() == FIXED
    status = fixmono("status", "--python", str(python), "--diff", str(tmp_path / "fix.patch"), "--json")
    assert json.loads(status.stdout)["fixes"][0]["installed_files"] == "patched by fixmono", status.stdout
    undo = fixmono("patch-env", "--python", str(python), "--undo")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert installed.read_text() == MODULE


@pytest.mark.parametrize("spelling", ["torch", "pytorch"])
def test_pip_upstream_takes_the_pypi_name_and_the_project_name(tmp_path, spelling):
    folder = tmp_path / "wheels"
    write_wheel(folder, "torch", "99.0.0", {"torch/__init__.py": "", "torch/optim/sched.py": MODULE})
    (tmp_path / "fix.patch").write_text(diff_of("torch/optim/sched.py", "git"))
    env = offline_pip(folder, tmp_path)
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", f"pip:{spelling}==99.0.0", "--check",
                      "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert (run["project"], run["results"][0]["status"]) == ("pytorch", "applied")


@pytest.mark.parametrize("spelling, project", [("torch", "pytorch"), ("pytorch", "pytorch"),
                                               ("transformer-engine", "transformer-engine"), ("jaxlib", "jaxlib")])
def test_import_upstream_takes_the_pypi_name_and_the_project_name(spelling, project):
    from fixmono.cli.import_patch import parse_args

    assert parse_args(["x.patch", "--upstream", spelling, "--into", str(REPO_ROOT)]).upstream == project


def test_import_upstream_names_the_catalogue_projects():
    from fixmono.cli.import_patch import parse_args
    from fixmono.model.errors import UserError

    with pytest.raises(UserError, match="not a project of the catalogue .*pytorch.*or their PyPI names"):
        parse_args(["x.patch", "--upstream", "diffusers", "--into", str(REPO_ROOT)])


@pytest.mark.parametrize("form", ["git", "p0"])
def test_a_diff_is_ported_onto_any_remote(tmp_path, form):
    """--upstream file://REPO@REF of a vllm-shaped repository: the diff's paths at every level fetched."""
    repo = checkout(tmp_path, "vllm")
    bare = tmp_path / "served.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    git(bare, "config", "uploadpack.allowFilter", "true")
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    (tmp_path / "fix.patch").write_text(diff_of(SHAPES["vllm"], form))
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", f"file://{bare}@HEAD", "--check",
                      "--json", env={"FIXMONO_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert (run["project"], run["results"][0]["status"]) == ("served", "applied")
