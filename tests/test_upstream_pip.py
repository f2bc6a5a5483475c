"""`--upstream pip:NAME==VERSION`: the wheel's Python files in a scratch git
repository. Offline with a wheel we build ourselves; the real torch wheel
under the `network` tag (tests/BUILD.bazel)."""
import json
import os
from pathlib import Path

import pytest

from fixmono.output.progress import STEP_LINE
from fixmono.testing import git, write_wheel
from tests.helpers import BN_FIX, FIXTURE, make_patch


def build_wheel(directory: Path, version: str = "99.0.0") -> Path:
    """A tiny torch-named wheel of our own (a py3-none-any wheel fits any platform)."""
    return write_wheel(directory, "torch", version, {"torch/__init__.py": "__version__ = 'fake'\n",
                                                     "torch/_C.so": b"\x7fELF not python",
                                                     "test/test_jit_fuser_te.py": FIXTURE.read_text()})


def offline_env(tmp: Path, cache: str = "cache") -> dict:
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp / "wheels"), "PIP_CONFIG_FILE": os.devnull,
            "FIXMONO_CACHE": str(tmp / cache)}


def test_wheel_is_materialised_and_patched(tmp_path):
    build_wheel(tmp_path / "wheels")
    run = make_patch("--all", "--upstream", "pip:torch==99.0.0", "--out", str(tmp_path / "o"), "--json",
                     env=offline_env(tmp_path))
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)["runs"][0]
    assert result["results"][0]["status"] == "applied"
    assert (tmp_path / "o" / "BASE").read_text().startswith("pip:torch==99.0.0 ")
    repo = tmp_path / "cache" / "upstreams" / "torch-99.0.0"
    files = git(repo, "ls-files").split()
    assert files == ["test/test_jit_fuser_te.py", "torch/__init__.py"]  # Python files only
    assert git(repo, "status", "--porcelain") == ""


def test_materialised_repository_is_deterministic_and_cached(tmp_path):
    build_wheel(tmp_path / "wheels")
    heads = []
    for cache in ("c1", "c2"):
        run = make_patch("--all", "--upstream", "pip:torch==99.0.0", "--check", "--json",
                         env=offline_env(tmp_path, cache))
        heads.append(json.loads(run.stdout)["runs"][0]["base"])
    assert heads[0] == heads[1]
    for wheel in (tmp_path / "wheels").iterdir():
        wheel.unlink()  # the cache alone must serve a second run
    run = make_patch("--all", "--upstream", "pip:torch==99.0.0", "--check", env=offline_env(tmp_path, "c1"))
    assert run.returncode == 0 and "applied" in run.stdout
    assert not list((tmp_path / "c1" / "upstreams").glob(".tmp-*"))


@pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads wheels (tag: network)")
def test_real_wheels_main_job(tmp_path):
    """The main job against the default upstreams (published wheels). The
    batchnorm fix targets a test file no wheel carries: not-applicable, saying
    what to pass. The TE fix targets the wheel's gemm.py: applied; so are the
    Python fixes of the newer seeds (the transformers one already-applied:
    5.23.0 has it)."""
    cache = tmp_path / "cache"  # read afresh: what the wheel read costs shows below
    run = make_patch("--all", "--upstream", "default", "--out", str(tmp_path / "o"), "--json",
                     env={"FIXMONO_CACHE": str(cache)})
    assert run.returncode == 0, run.stderr
    runs = {r["project"]: r for r in json.loads(run.stdout)["runs"]}
    assert runs["pytorch"]["upstream"] == "pip:torch==2.13.0"
    (bn,) = [x for x in runs["pytorch"]["results"] if x["fix"] == BN_FIX]
    assert bn["status"] == "not-applicable" and "pass --upstream <pytorch git checkout>" in bn["detail"]
    statuses = {r["fix"]: r["status"] for run_ in runs.values() for r in run_["results"]}
    # the fixes the default releases carry Python for: applied, or already-applied where the release has the fix
    expected = {"pytorch-memory-budget-rng-recompute": "applied", "pytorch-inductor-mix-order-cat-grad": "applied",
                "jax-cudnn-gqa-kv-offsets": "applied", "jaxlib-rocm-plugin-discovery": "applied",
                "transformers-moe-sentinel-router-grad": "already-applied",
                "transformers-moe-router-double-softmax": "already-applied"}
    assert {k: statuses[k] for k in expected} == expected
    assert (tmp_path / "o" / "pytorch" / "series").read_text() == \
        ("0001-pytorch-inductor-masked-store-cache.patch\n0002-pytorch-inductor-mix-order-cat-grad.patch\n"
         "0003-pytorch-memory-budget-rng-recompute.patch\n")
    for project in ("jax", "jaxlib", "transformers"):
        assert (tmp_path / "o" / project / "series").read_text().strip(), project
    (xla,) = runs["xla"]["results"]  # no wheel carries XLA's C++
    assert xla["status"] == "not-applicable" and "pass --upstream <xla checkout>" in xla["detail"]
    te = runs["transformer-engine"]["results"]
    assert [r["status"] for r in te] == ["applied"]
    assert (tmp_path / "o" / "transformer-engine" / "series").read_text() == te[0]["patch"] + "\n"
    # the materialised wheel is real upstream text: the files the fixes target, nothing more
    partitioner = (cache / "upstreams/torch-2.13.0/torch/_functorch/partitioners.py").read_text()
    assert "def choose_saved_values_set(" in partitioner
    assert not (cache / "upstreams/torch-2.13.0/torch/_decomp/decompositions.py").exists()
    wheel = runs["pytorch"]["wheel"]  # read by ranges from an HTTP index: a small part of the wheel
    assert wheel["read"] != "range" or (wheel["verified"] == "member-crc" and wheel["bytes"] < wheel["size"] / 50)


def test_wheel_without_python_files_is_bad_input(tmp_path):
    write_wheel(tmp_path / "wheels", "torch", "98.0.0", {"torch/lib/libtorch.so": b"\x7fELF"})
    run = make_patch("--all", "--upstream", "pip:torch==98.0.0", "--check", env=offline_env(tmp_path))
    assert run.returncode == 2, run.stderr
    assert run.stderr == ("make_patch: error: pip:torch==98.0.0: the wheel torch-98.0.0-py3-none-any.whl "
                          "has no Python files\n")


def test_user_git_config_and_variables_do_not_reach_the_scratch_repository(tmp_path):
    """A global config that ignores *.py and a failing pre-commit hook, as a
    user may have: the materialised repository is the same as without them."""
    build_wheel(tmp_path / "wheels")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (hooks / "pre-commit").chmod(0o755)
    (tmp_path / "ignore").write_text("*.py\n")
    (tmp_path / "gitconfig").write_text(f"[core]\n\texcludesFile = {tmp_path / 'ignore'}\n"
                                        f"\thooksPath = {hooks}\n")
    hostile = {**offline_env(tmp_path, "c1"), "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig")}
    bases = []
    for env in (hostile, offline_env(tmp_path, "c2")):
        run = make_patch("--all", "--upstream", "pip:torch==99.0.0", "--check", "--json", env=env)
        assert run.returncode == 0, run.stderr
        bases.append(json.loads(run.stdout)["runs"][0]["base"])
    assert bases[0] == bases[1]


def test_default_opens_every_upstream_before_writing(tmp_path):
    """--upstream default: torch's wheel is there, the other projects' are not.
    The first download failure is bad input, and no series (not even torch's)
    is written."""
    build_wheel(tmp_path / "wheels", version="2.13.0")
    run = make_patch("--all", "--upstream", "default", "--out", str(tmp_path / "o"), env=offline_env(tmp_path))
    assert run.returncode == 2, run.stderr
    assert ": could not download" in run.stderr and "torch==" not in run.stderr and run.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()


def remove_one_object(repo: Path) -> None:
    loose = sorted(p for p in (repo / ".git" / "objects").glob("??/*"))
    loose[0].unlink()


def truncate_head(repo: Path) -> None:
    (repo / ".git" / "HEAD").write_text("")


def empty_git_dir(repo: Path) -> None:
    import shutil
    shutil.rmtree(repo / ".git")
    (repo / ".git").mkdir()


def garbage_object(repo: Path) -> None:
    loose = sorted(p for p in (repo / ".git" / "objects").glob("??/*"))
    for path in loose:
        path.chmod(0o644)
        path.write_bytes(b"not zlib")


@pytest.mark.parametrize("damage", [remove_one_object, truncate_head, empty_git_dir, garbage_object])
def test_a_damaged_cache_entry_is_rebuilt(tmp_path, damage):
    build_wheel(tmp_path / "wheels")
    env = offline_env(tmp_path)
    first = make_patch("--all", "--upstream", "pip:torch==99.0.0", "--check", "--json", env=env)
    assert first.returncode == 0, first.stderr
    damage(tmp_path / "cache" / "upstreams" / "torch-99.0.0")
    again = make_patch("--all", "--upstream", "pip:torch==99.0.0", "--check", "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert all(STEP_LINE.match(line) for line in again.stderr.splitlines()), again.stderr  # progress, no warning
    assert json.loads(again.stdout)["runs"][0]["base"] == json.loads(first.stdout)["runs"][0]["base"]
