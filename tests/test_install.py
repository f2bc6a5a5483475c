"""The installable distribution (tag network: its dependencies come from the
index): the wheel tools/build_wheel.py builds holds the package `fixmono`
only, with the catalogue's fixes, reproducers, validate checks and hot-fixes
and no tests; installed into a fresh venv that also holds an unrelated
package named `tools`, every subcommand runs; `pip uninstall` leaves nothing
of it behind."""
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fixmono.cli.main import COMMANDS
from fixmono.model.registry import discover
from fixmono.sources.verify import verify_wheel
from fixmono.testing import REPO_ROOT

pytestmark = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="installs from the index (tag: network)")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "build_wheel.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


def test_the_wheel_holds_fixmono_only_with_every_fix_and_no_tests(wheel):
    checked = verify_wheel(wheel)  # our own wheel passes the checks we put others' through
    names = set(checked.members)
    assert {n.split("/")[0] for n in names} == {"fixmono", checked.dist_info, "fixmono-hotfixes.pth"}
    assert not [n for n in names if Path(n).name.startswith("test_") and "/fixtures/" not in n]
    for fix in discover():
        folder = fix.package.replace(".", "/")
        diff = ("fix.patch",) if (fix.folder / "fix.patch").is_file() else ()  # an imported fix is its diff
        for part in ("fix.py", "__init__.py", "README.md", *diff):
            assert f"{folder}/{part}" in names, (fix.id, part)
        if fix.reproduce:
            assert f"{folder}/repro.py" in names, fix.id
    with zipfile.ZipFile(wheel) as zf:
        entry_points = zf.read(f"{checked.dist_info}/entry_points.txt").decode()
        metadata = zf.read(f"{checked.dist_info}/METADATA").decode()
    assert "fixmono = fixmono.cli.main:entry" in entry_points
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert not [r for r in requires if r.split()[0].lower() in ("torch", "jax", "jaxlib", "transformers")]


def site_files(venv: Path) -> set[str]:
    return {str(p.relative_to(venv)) for p in venv.rglob("*") if "__pycache__" not in p.parts}


def test_installed_in_a_fresh_venv_beside_an_unrelated_tools_package(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "tools").mkdir()
    (site / "tools" / "__init__.py").write_text("raise RuntimeError('the unrelated tools package was imported')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIP_CONSTRAINT="", PIP_NO_CACHE_DIR="1")  # Bazel's sandbox: the user's pip cache is read-only
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
                             capture_output=True, text=True, env=env, timeout=600)
    assert install.returncode == 0, install.stderr
    before_uninstall = site_files(venv)
    fixmono = venv / "bin" / "fixmono"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    top = subprocess.run([fixmono, "--help"], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert top.returncode == 0 and all(name in top.stdout for name in COMMANDS), top.stdout + top.stderr
    for name in COMMANDS:
        run = subprocess.run([fixmono, name, "--help"], capture_output=True, text=True, cwd=elsewhere, env=env)
        assert run.returncode == 0 and "usage:" in run.stdout, (name, run.stdout, run.stderr)
    status = subprocess.run([fixmono, "status", "--json"], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["command"] == "fixmono status" and Path(report["python"]).resolve() == venv.resolve()
    assert {row["fix"] for row in report["fixes"]} == {f.id for f in discover()}
    assert {row["installed_files"] for row in report["fixes"]} <= {"not installed", "not in the installed package "
                                                                   "(C++/tests: built into the binary)"}
    bad = subprocess.run([fixmono, "no-such-command"], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    ours = {p for p in before_uninstall if "fixmono" in p}
    assert ours, "nothing of fixmono was installed"
    uninstall = subprocess.run([python, "-m", "pip", "uninstall", "-y", "--quiet", "fixmono"], capture_output=True,
                               text=True, env=env)
    assert uninstall.returncode == 0, uninstall.stderr
    after = site_files(venv)
    assert not {p for p in after if "fixmono" in p}
    assert after == before_uninstall - ours  # the dependencies and the unrelated tools package stay


def test_hotfixes_from_the_environment_at_start_up(wheel, tmp_path):
    """The wheel's .pth: with FIXMONO_HOTFIXES unset nothing of fixmono is
    imported at start-up; set, the named hot-fix is applied when its trigger
    module is first imported (jax here, reached through a .pth to this
    project's venv), logged once, and nothing is imported before that."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FIXMONO_"))}
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                              "--disable-pip-version-check", str(wheel)], capture_output=True, text=True,
                             env={**env, "PIP_CONSTRAINT": "", "PIP_NO_CACHE_DIR": "1"})
    assert install.returncode == 0, install.stderr
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    import sysconfig

    (site / "libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # jax, libcst from this venv
    probe = ("import sys; print(sorted(m for m in sys.modules if m.split('.')[0] == 'fixmono'))\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'torch')))\n"
             "import jax._src.cudnn.fused_attention_stablehlo as m\n"
             "print(m._fix_seqlen_offsets.__code__.co_filename)\n")
    unset = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env)
    assert unset.returncode == 0, unset.stderr
    assert unset.stdout.splitlines()[0] == "[]" and unset.stdout.splitlines()[2] != "<_fix_seqlen_offsets>"
    assert "FIXMONO" not in unset.stderr
    named = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                           env={**env, "FIXMONO_HOTFIXES": "jax-cudnn-gqa-kv-offsets"})
    assert named.returncode == 0, named.stderr
    ours, libraries, function = named.stdout.splitlines()
    assert ours != "[]" and libraries == "[]"  # fixmono's hook is in, and it imported neither jax nor torch
    assert function == "<_fix_seqlen_offsets>"  # the transformed function, defined by the hot-fix
    assert named.stderr.count("FIXMONO_HOTFIXES: jax-cudnn-gqa-kv-offsets: enabled") == 1, named.stderr
