"""tools/patch_wheel: a series carried into a built wheel, verified after install."""
import base64
import csv
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import transformers

from tools.fixlib.registry import REPO_ROOT
from tests.helpers import make_patch
from tools.fixlib.testing import make_repo

TE_GEMM = REPO_ROOT / "fixes/transformer_engine/rocm_unfused_bgrad/fixtures/gemm_rocm.py"
GEMM_PATH = "transformer_engine/pytorch/cpp_extensions/gemm.py"


def build_wheel(path: Path, name: str, version: str, files: dict[str, str]) -> Path:
    info = f"{name}-{version}.dist-info"
    wheel = path / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for arcname, text in files.items():
            zf.writestr(arcname, text)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return wheel


def run(*args):
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "patch_wheel"), *map(str, args)],
                          capture_output=True, text=True)


def check_record(wheel: Path):
    with zipfile.ZipFile(wheel) as zf:
        (record,) = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
        rows = list(csv.reader(zf.read(record).decode().splitlines()))
        assert {r[0] for r in rows} == set(zf.namelist())
        for name, digest, size in rows:
            if name == record:
                continue
            data = zf.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data), name


def test_te_series_into_a_te_shaped_wheel(tmp_path):
    files = {"transformer_engine/__init__.py": "", GEMM_PATH: TE_GEMM.read_text()}
    repo = make_repo(tmp_path / "te", files)
    assert make_patch("--all", "--upstream", str(repo), "--out", str(tmp_path / "series")).returncode == 0
    wheel = build_wheel(tmp_path, "transformer_engine", "9.9.0", files)
    proc = run(wheel, tmp_path / "series", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "verified: te-rocm-unfused-bias-grad-fp32-wgrad: " + GEMM_PATH + " has the fix" in proc.stdout
    (new,) = (tmp_path / "out").glob("*.whl")
    assert new.name == "transformer_engine-9.9.0+fixmono-py3-none-any.whl"
    check_record(new)
    with zipfile.ZipFile(new) as zf:
        assert "rocm_unfused_bgrad" in zf.read(GEMM_PATH).decode()
        assert "Version: 9.9.0+fixmono" in zf.read("transformer_engine-9.9.0+fixmono.dist-info/METADATA").decode()


def test_transformers_series_strips_src_for_the_wheel(tmp_path):
    """The checked-in transformers series (paths src/transformers/...) onto a
    wheel built from the installed transformers files, which are its BASE."""
    package = Path(transformers.__file__).parent
    files = {f"transformers/{rel}": (package / rel).read_text()
             for rel in ("__init__.py", "integrations/moe.py", "modeling_utils.py")}
    wheel = build_wheel(tmp_path, "transformers", transformers.__version__, files)
    proc = run(wheel, REPO_ROOT / "patches" / "transformers", "--out", tmp_path / "out", "--suffix", "ours1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("has the fix") == 2
    (new,) = (tmp_path / "out").glob("*.whl")
    assert f"transformers-{transformers.__version__}+ours1-" in new.name


def test_compiled_fixes_and_bad_input_are_refused(tmp_path):
    series = tmp_path / "xla"
    series.mkdir()
    (series / "series").write_text("0001-x.patch\n")
    (series / "0001-x.patch").write_text("Subject: x\n\nFix-Id: xla-rocm-miopen-global-mutex\n")
    wheel = build_wheel(tmp_path, "transformer_engine", "1.0", {"transformer_engine/__init__.py": ""})
    for args, message in (((wheel, series), "refusing fixes that change compiled code"),
                          ((tmp_path / "nope.whl", series), "not a wheel file"),
                          ((wheel, tmp_path), "no `series` file")):
        proc = run(*args)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
