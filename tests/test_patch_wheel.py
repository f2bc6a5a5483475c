"""tools/patch_wheel: a series carried into a built wheel, verified after install."""
import base64
import csv
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import transformers

from fixmono.testing import REPO_ROOT
from tests.helpers import TF_DIFF, TF_PATH, TF_TEXT, make_patch
from fixmono.testing import make_repo, write_wheel

TE_GEMM = REPO_ROOT / "fixes/transformer_engine/rocm_unfused_bgrad/fixtures/gemm_rocm.py"
GEMM_PATH = "transformer_engine/pytorch/cpp_extensions/gemm.py"
TE_FILES = {"transformer_engine/__init__.py": "", GEMM_PATH: TE_GEMM.read_text()}


def build_wheel(path: Path, name: str, version: str, files: dict[str, str], wheel_version: str = "1.0",
                unlisted: dict[str, str] = {}) -> Path:
    return write_wheel(path, name, version, files, unlisted, wheel_version)


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


@pytest.fixture(scope="module")
def te_series(tmp_path_factory) -> Path:
    """The series make_patch writes for a TE-shaped checkout (read-only in the tests)."""
    tmp = tmp_path_factory.mktemp("te")
    repo = make_repo(tmp / "te", TE_FILES)
    assert make_patch("--all", "--upstream", str(repo), "--out", str(tmp / "series")).returncode == 0
    return tmp / "series"


def test_te_series_into_a_te_shaped_wheel(tmp_path, te_series):
    wheel = build_wheel(tmp_path, "transformer_engine", "9.9.0", TE_FILES)
    proc = run(wheel, te_series, "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "verified: te-rocm-unfused-bias-grad-fp32-wgrad: " + GEMM_PATH + " has the fix" in proc.stdout
    (new,) = (tmp_path / "out").iterdir()  # nothing else: no staging folder left
    assert new.name == "transformer_engine-9.9.0+fixmono-py3-none-any.whl"
    check_record(new)
    with zipfile.ZipFile(new) as zf:
        assert "rocm_unfused_bgrad" in zf.read(GEMM_PATH).decode()
        assert "Version: 9.9.0+fixmono" in zf.read("transformer_engine-9.9.0+fixmono.dist-info/METADATA").decode()


def test_transformers_series_strips_src_for_the_wheel(tmp_path):
    """The checked-in transformers series (paths src/transformers/...) onto a
    wheel built from the installed transformers files, which are its BASE."""
    package = Path(transformers.__file__).parent
    series = REPO_ROOT / "patches" / "transformers"
    targets = {line.split()[2][len("a/src/transformers/"):] for patch in series.glob("*.patch")
               for line in patch.read_text().splitlines() if line.startswith("diff --git a/src/transformers/")}
    files = {f"transformers/{rel}": (package / rel).read_text() for rel in {"__init__.py", *targets}}
    wheel = build_wheel(tmp_path, "transformers", transformers.__version__, files)
    proc = run(wheel, series, "--out", tmp_path / "out", "--suffix", "ours1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("has the fix") == len(targets) >= 3  # every file of every patch of the series
    assert "transformers-moe-aux-loss-world-size: transformers/trainer.py has the fix" in proc.stdout
    (new,) = (tmp_path / "out").glob("*.whl")
    assert f"transformers-{transformers.__version__}+ours1-" in new.name


def test_a_diff_is_ported_onto_a_wheel_whose_lines_moved(tmp_path):
    """--diff: the user's patch (made where the method starts at line 4) ported
    onto a release where a method above moved it; `git apply` of the same bytes
    would need the exact line, the port engine finds it by its class."""
    moved = TF_TEXT.replace("class Scheduler:\n", "class Scheduler:\n    def reset(self):\n        self.step = 0\n\n")
    wheel = build_wheel(tmp_path, "transformers", "9.1.0", {"transformers/__init__.py": "", TF_PATH: moved})
    (tmp_path / "fix.patch").write_text(TF_DIFF)
    proc = run(wheel, "--diff", tmp_path / "fix.patch", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "verified: diff-scheduler-no-division-by-zero: transformers/fixmono_example.py has the fix" in proc.stdout
    (new,) = (tmp_path / "out").iterdir()
    check_record(new)
    with zipfile.ZipFile(new) as zf:
        assert zf.read(TF_PATH).decode() == moved.replace("step / self.warmup", "step / max(1, self.warmup)")
    # a diff whose code is not in the wheel: one line, no wheel
    other = build_wheel(tmp_path / "o", "transformers", "9.0.0", {"transformers/__init__.py": "",
                                                                    TF_PATH: "x = 1\n"})
    proc = run(other, "--diff", tmp_path / "fix.patch", "--out", tmp_path / "out2")
    assert proc.returncode == 2 and "fix.patch does not apply to transformers-9.0.0" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "out2").exists()


def series_dir(path: Path, text: str, patches: dict[str, str] = {}) -> Path:
    path.mkdir()
    (path / "series").write_text(text)
    for name, body in patches.items():
        (path / name).write_text(body)
    return path


def a_file(path: Path, data: bytes = b"keep") -> Path:
    path.write_bytes(data)
    return path


def a_dir(path: Path) -> Path:
    path.mkdir()
    return path


TE_1_0 = "transformer_engine-1.0-py3-none-any.whl"
XLA_PATCH = {"0001-x.patch": "Subject: x\n\nFix-Id: xla-rocm-miopen-global-mutex\n"}
ROOT_READS_ALL = pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")


def case(id: str, make_args, message: str, marks=()):
    return pytest.param(make_args, message, id=id, marks=marks)


# Each case: its arguments, made in the test's folder t.tmp from a good TE wheel
# (t.wheel), the TE series (t.series) and an --out folder that does not exist
# yet (t.out); and what the one error line says.
BAD_INPUT = [
    case("out-in-proc", lambda t: [t.wheel, t.series, "--out", "/proc/x"], "--out /proc/x cannot be created"),
    case("out-is-a-file", lambda t: [t.wheel, t.series, "--out", a_file(t.tmp / "f")], "exists and is not a directory"),
    case("out-under-a-file", lambda t: [t.wheel, t.series, "--out", a_file(t.tmp / "f") / "out"],
         "cannot be created: Not a directory"),
    case("suffix-traversal", lambda t: [t.wheel, t.series, "--out", t.out, "--suffix", "../../x"],
         "--suffix '../../x' is not a local version label"),
    case("suffix-empty", lambda t: [t.wheel, t.series, "--out", t.out, "--suffix", ""],
         "--suffix '' is not a local version label"),
    case("suffix-space", lambda t: [t.wheel, t.series, "--out", t.out, "--suffix", "a b"],
         "--suffix 'a b' is not a local version label"),
    case("suffix-double-dot", lambda t: [t.wheel, t.series, "--out", t.out, "--suffix", "a..b"],
         "--suffix 'a..b' is not a local version label"),
    case("series-empty", lambda t: [t.wheel, series_dir(t.tmp / "s", "\n"), "--out", t.out], "names no patches"),
    case("series-file-missing", lambda t: [t.wheel, t.tmp, "--out", t.out], "no `series` file"),
    case("series-names-missing-patch", lambda t: [t.wheel, series_dir(t.tmp / "s", "0001-x.patch\n"), "--out", t.out],
         "names 0001-x.patch, which is missing"),
    case("series-of-compiled-fix", lambda t: [t.wheel, series_dir(t.tmp / "s", "0001-x.patch\n", XLA_PATCH),
                                              "--out", t.out], "refusing fixes that change compiled code"),
    case("wheel-missing", lambda t: [t.tmp / TE_1_0, t.series, "--out", t.out], "no such file"),
    case("wheel-unreadable", lambda t: [t.wheel.chmod(0) or t.wheel, t.series, "--out", t.out],
         "Permission denied", marks=ROOT_READS_ALL),
    case("wheel-is-a-dir", lambda t: [a_dir(t.tmp / TE_1_0), t.series, "--out", t.out], "not a wheel file"),
    case("wheel-not-a-zip", lambda t: [a_file(t.tmp / TE_1_0), t.series, "--out", t.out],
         "not a valid zip file, truncated or damaged"),
    case("wheel-member-not-in-record", lambda t: [build_wheel(t.tmp, "transformer_engine", "1.0", TE_FILES,
                                                              unlisted={"transformer_engine/x.py": "x = 1\n"}),
                                                  t.series, "--out", t.out], "transformer_engine/x.py: not listed in RECORD"),
    case("wheel-sha256-not-expected", lambda t: [t.wheel, t.series, "--out", t.out, "--expect-sha256", "0" * 64],
         "expected 0000000000000000"),
    case("expect-sha256-not-hex", lambda t: [t.wheel, t.series, "--out", t.out, "--expect-sha256", "xyz"],
         "--expect-sha256 'xyz' is not a sha256"),
    case("verify-with-a-series", lambda t: ["--verify", t.wheel, t.series], "--verify takes only the wheel"),
    case("verify-an-unpatched-wheel", lambda t: ["--verify", t.wheel], "not a wheel patch_wheel wrote"),
    case("wheel-of-another-project", lambda t: [build_wheel(t.tmp, "numpy", "1.0", {"numpy/__init__.py": ""}),
                                                t.series, "--out", t.out], "numpy is not an upstream of any fix"),
    # past the checks: an existing --out is left as it was, a created one removed
    case("patch-does-not-apply", lambda t: [build_wheel(t.tmp, "transformer_engine", "1.0", {GEMM_PATH: "x = 1\n"}),
                                            t.series, "--out", a_dir(t.out)], "does not apply"),
    case("wheel-does-not-install", lambda t: [build_wheel(t.tmp, "transformer_engine", "1.0", TE_FILES, "99.0"),
                                              t.series, "--out", t.out / "a" / "b"], "does not install"),
    case("no-arguments", lambda t: [], "the following arguments are required: wheel"),
    case("no-series", lambda t: [t.wheel], "the following arguments are required: series"),
]


def tree(path: Path) -> dict:
    return {p: p.is_file() and (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


@pytest.mark.parametrize("make_args, message", BAD_INPUT)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, te_series, make_args, message):
    t = SimpleNamespace(tmp=tmp_path, series=te_series, out=tmp_path / "out",
                        wheel=build_wheel(a_dir(tmp_path / "wheels"), "transformer_engine", "9.9.0", TE_FILES))
    args = make_args(t)
    before = tree(tmp_path)
    proc = run(*args)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("patch_wheel: error: ") and message in line, line
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert tree(tmp_path) == before  # no wheel, no staging folder, no created --out


def test_declared_size_and_special_files_are_refused_before_inflating(tmp_path, monkeypatch):
    """Two rules the published-wheel table cannot reach cheaply: a member
    declaring more than the limit (the limit lowered here), and a FIFO entry."""
    import stat

    from fixmono.model.errors import UserError
    from fixmono.sources import verify

    big = build_wheel(a_dir(tmp_path / "big"), "transformer_engine", "1.0",
                      {**TE_FILES, "transformer_engine/blob.bin": os.urandom(2 << 20).hex()})
    monkeypatch.setattr(verify, "MAX_MEMBER", 1 << 20)
    monkeypatch.setattr(verify, "member_digest", lambda *a: pytest.fail("inflated a refused member"))
    with pytest.raises(UserError, match=r"transformer_engine/blob.bin: declares 4194304 bytes, above"):
        verify.verify_wheel(big)
    monkeypatch.undo()
    fifo = build_wheel(a_dir(tmp_path / "fifo"), "transformer_engine", "1.0", TE_FILES)
    with zipfile.ZipFile(fifo, "a") as zf:
        info = zipfile.ZipInfo("transformer_engine/pipe")
        info.create_system, info.external_attr = 3, (stat.S_IFIFO | 0o644) << 16
        zf.writestr(info, "")
    with pytest.raises(UserError, match="transformer_engine/pipe: special-file entry"):
        verify.verify_wheel(fifo)
