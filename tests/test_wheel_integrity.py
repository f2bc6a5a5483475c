"""A wheel this project did not build is verified before any of it is used
(tag network: hostile variants are built here from the real, published
transformer-engine 2.20.2 wheel). Every hostile wheel, through every command
that opens wheels (patch_wheel, patch_wheel --verify, make_patch and
drift_matrix through `pip:`), is refused with exit 2 and one line naming the
member and the rule, writes no output and nothing outside --out."""
import base64
import hashlib
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT, published_wheel

pytestmark = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads a wheel (tag: network)")

VERSION = "2.20.2"
INIT = "transformer_engine/pytorch/__init__.py"
INFO = f"transformer_engine-{VERSION}.dist-info"
GEMM = "transformer_engine/pytorch/cpp_extensions/gemm.py"


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def rebuild(src: Path, dest: Path, edit) -> Path:
    """A copy of the wheel `src` at `dest`, its members passed through
    edit(members) (a list of [ZipInfo, bytes]; RECORD is left as published
    unless edit changes it)."""
    with zipfile.ZipFile(src) as zf:
        members = [[info, zf.read(info)] for info in zf.infolist()]
    members = edit(members) or members
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in members:
            zf.writestr(info, data)
    return dest


def record_with(members, extra_rows):
    """RECORD rewritten to list `extra_rows` too (so only the rule under test is broken)."""
    for item in members:
        if item[0].filename == f"{INFO}/RECORD":
            text = item[1].decode() + "".join(f"{name},{h},{size}\n" for name, h, size in extra_rows)
            item[1] = text.encode()


def add(name: str, data: bytes, listed: bool = True, mode: int | None = None):
    def edit(members):
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        if mode is not None:
            info.create_system, info.external_attr = 3, mode << 16
        members.append([info, data])
        if listed:
            record_with(members, [(name, digest(data), len(data))])
    return edit


def tamper(members):
    for item in members:
        if item[0].filename == INIT:
            item[1] += b"\nimport os; os.system('touch /tmp/PWNED')\n"


def drop(members):
    return [m for m in members if m[0].filename != INIT]


def duplicate(members):
    (item,) = [m for m in members if m[0].filename == INIT]
    members.append([zipfile.ZipInfo(INIT), item[1]])


def bomb(members):
    data = bytes(64 << 20)  # 64 MiB of zeros: ~1000:1 deflated
    add("transformer_engine/zeros.bin", data)(members)


def lying_dist_info(members):
    for item in members:
        if item[0].filename.startswith(INFO + "/"):
            item[0].filename = item[0].filename.replace(INFO, "transformer_engine-9.9.9.dist-info")
    for item in members:
        if item[0].filename.endswith(".dist-info/RECORD"):
            item[1] = item[1].replace(INFO.encode(), b"transformer_engine-9.9.9.dist-info")


# name, how the wheel is made from the published one, what the one line must say
CASES = [
    ("tampered member", tamper, f"{INIT}: hash does not match RECORD"),
    ("member missing from RECORD", add("transformer_engine/extra.py", b"x = 1\n", listed=False),
     "transformer_engine/extra.py: not listed in RECORD"),
    ("RECORD lists a missing member", drop, f"{INIT}: listed in RECORD but not in the wheel"),
    ("'..' name", add("../../../x/SLIP", b"slip\n"), "../../../x/SLIP: '..' or empty part in the name"),
    ("absolute name", add("/x/ABS", b"abs\n"), "/x/ABS: absolute name"),
    ("duplicate name", duplicate, f"{INIT}: duplicate member name"),
    ("symlink entry", add("transformer_engine/link", b"/etc/passwd", mode=stat.S_IFLNK | 0o777),
     "transformer_engine/link: symlink entry"),
    ("zip bomb", bomb, "transformer_engine/zeros.bin: compression ratio"),
    ("lying dist-info name", lying_dist_info, "transformer_engine-9.9.9.dist-info: does not match the file name"),
    ("truncated file", None, "not a valid zip file, truncated or damaged"),
    ("wrong --expect-sha256", None, "expected 0000000000"),
]


@pytest.fixture(scope="module")
def published() -> Path:
    return published_wheel("transformer-engine", VERSION)


@pytest.fixture(scope="module")
def series() -> Path:
    """patches/transformer-engine, generated at BASE = this wheel."""
    return REPO_ROOT / "patches" / "transformer-engine"


def hostile(published: Path, tmp: Path, case) -> Path:
    name, edit, _ = case
    dest = tmp / "in" / published.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if name == "truncated file":
        dest.write_bytes(published.read_bytes()[: published.stat().st_size // 2])
    elif edit is None:
        dest.write_bytes(published.read_bytes())
    else:
        rebuild(published, dest, edit)
    return dest


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run_tool(tool: str, *args, env=None):
    full = {**os.environ, **(env or {})}
    full.pop("MAKE_PATCH_DEBUG", None)
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / tool), *map(str, args)],
                          capture_output=True, text=True, env=full, timeout=600)


def one_line_refusal(proc, message):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_the_published_wheel_passes(published, series, tmp_path):
    proc = run_tool("patch_wheel", published, series, "--out", tmp_path / "out", "--expect-sha256",
                    hashlib.sha256(published.read_bytes()).hexdigest())
    assert proc.returncode == 0, proc.stderr
    (out,) = (tmp_path / "out").glob("*.whl")
    verify = run_tool("patch_wheel", "--verify", out, "--json")
    assert verify.returncode == 0, verify.stderr
    origin = json.loads(verify.stdout)["provenance"]
    assert origin["input"] == {"wheel": published.name, "sha256": hashlib.sha256(published.read_bytes()).hexdigest(),
                               "expected_sha256": hashlib.sha256(published.read_bytes()).hexdigest()}
    (patch,) = [p for p in series.glob("*.patch")]
    assert origin["fixes"] == [{"id": "te-rocm-unfused-bias-grad-fp32-wgrad", "patch": patch.name,
                                "patch_sha256": hashlib.sha256(patch.read_bytes()).hexdigest()}]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_patch_wheel_refuses(published, series, tmp_path, case):
    wheel = hostile(published, tmp_path, case)
    before = listing(tmp_path)
    extra = ["--expect-sha256", "0" * 64] if case[0] == "wrong --expect-sha256" else []
    proc = run_tool("patch_wheel", wheel, series, "--out", tmp_path / "out", *extra)
    one_line_refusal(proc, case[2])
    assert listing(tmp_path) == before  # no output wheel, no --out folder, nothing beside them


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "wrong --expect-sha256"], ids=lambda c: c[0])
def test_patch_wheel_verify_refuses(published, tmp_path, case):
    """--verify reads an output wheel: the same rules hold before anything else."""
    wheel = hostile(published, tmp_path, case)
    one_line_refusal(run_tool("patch_wheel", "--verify", wheel), case[2])


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "wrong --expect-sha256"], ids=lambda c: c[0])
def test_pip_sources_refuse(published, tmp_path, case):
    """make_patch and drift_matrix through `pip:`, with pip configured to find
    only the hostile wheel (a local folder, as a mirror would serve it)."""
    wheel = hostile(published, tmp_path, case)
    env = {"PIP_FIND_LINKS": str(wheel.parent), "PIP_NO_INDEX": "1", "FIXMONO_CACHE": str(tmp_path / "cache"),
           "PIP_CONFIG_FILE": os.devnull}
    spec = f"pip:transformer-engine=={VERSION}"
    # a local index's file is read where it is, through the same checks as patch_wheel's
    message = case[2]
    one_line_refusal(run_tool("make_patch", "--all", "--upstream", spec, "--check", env=env), message)
    one_line_refusal(run_tool("drift_matrix", "--fix", "te-rocm-unfused-bias-grad-fp32-wgrad", "--versions",
                              f"transformer-engine={VERSION}", env=env), message)
    assert not any(p.name.endswith(".py") for p in (tmp_path / "cache").rglob("*"))  # nothing of it extracted


def test_a_tampered_cache_entry_is_rebuilt(tmp_path):
    """A file of the materialised wheel changed in the cache is noticed on
    read (its RECORD hash), the entry built again, and the answer is right."""
    env = {"FIXMONO_CACHE": str(tmp_path / "cache")}
    first = run_tool("make_patch", "--all", "--upstream", f"pip:transformer-engine=={VERSION}", "--check",
                     "--json", env=env)
    assert first.returncode == 0, first.stderr
    entry = tmp_path / "cache" / "upstreams" / f"transformer-engine-{VERSION}"
    repo_env = {"GIT_DIR": str(entry / ".git"), "GIT_WORK_TREE": str(entry)}
    (entry / GEMM).write_text("def general_gemm():\n    return 'fixed already, trust me'\n")
    for args in (["add", GEMM], ["-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--amend", "--no-edit"]):
        subprocess.run(["git", *args], env={**os.environ, **repo_env}, check=True, capture_output=True)
    again = run_tool("make_patch", "--all", "--upstream", f"pip:transformer-engine=={VERSION}", "--check",
                     "--json", env=env)
    assert again.returncode == 0, again.stderr
    answer = [{k: v for k, v in run.items() if k != "wheel"} for run in json.loads(again.stdout)["runs"]]
    assert answer == [{k: v for k, v in run.items() if k != "wheel"} for run in json.loads(first.stdout)["runs"]]
    assert "trust me" not in (entry / GEMM).read_text()


def test_status_reads_the_provenance_back(published, series, tmp_path):
    """The patched wheel installed (pip --target): `fixes status` shows which
    wheel it was built from and with which fixes, and the fix as present."""
    assert run_tool("patch_wheel", published, series, "--out", tmp_path / "out").returncode == 0
    (out,) = (tmp_path / "out").glob("*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                    str(site), str(out)], check=True, capture_output=True, env={**os.environ, "PIP_CONSTRAINT": ""})
    proc = run_tool("fixes", "status", "--json", env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    (row,) = [r for r in json.loads(proc.stdout)["fixes"] if r["fix"] == "te-rocm-unfused-bias-grad-fp32-wgrad"]
    assert row["installed_files"] == "already fixed", row
    assert row["provenance"]["input"]["sha256"] == hashlib.sha256(published.read_bytes()).hexdigest()
    assert [f["id"] for f in row["provenance"]["fixes"]] == ["te-rocm-unfused-bias-grad-fp32-wgrad"]
    text = run_tool("fixes", "status", env={"PYTHONPATH": str(site), "NO_COLOR": "1"}).stdout
    assert f"built by patch_wheel from {published.name}" in text


def test_a_wheel_that_is_not_the_published_one_is_refused(published, tmp_path):
    """An index (a PEP 503 folder here) that publishes another sha256 than the
    file it serves: make_patch and drift_matrix through `pip:` refuse it,
    and nothing of it reaches the cache."""
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / published.name).write_bytes(published.read_bytes())
    page = tmp_path / "simple" / "transformer-engine" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="{(tmp_path / "files" / published.name).as_uri()}#sha256={"0" * 64}">{published.name}</a>')
    env = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": (tmp_path / "simple").as_uri(),
           "FIXMONO_CACHE": str(tmp_path / "cache")}
    message = f"expected {'0' * 64} (the file is not the published wheel)"
    one_line_refusal(run_tool("make_patch", "--all", "--upstream", f"pip:transformer-engine=={VERSION}", "--check",
                              env=env), message)
    one_line_refusal(run_tool("drift_matrix", "--fix", "te-rocm-unfused-bias-grad-fp32-wgrad", "--versions",
                              f"transformer-engine={VERSION}", env=env), message)
    assert not any(p.suffix == ".py" for p in (tmp_path / "cache").rglob("*"))
