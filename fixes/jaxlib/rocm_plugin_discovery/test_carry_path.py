"""The whole carry path on the real jaxlib wheel (tag network; downloads the
~85 MB jaxlib 0.10.2 wheel for this interpreter): make_patch against
pip:jaxlib and pip:jax, tools/patch_wheel on the wheel (its compiled code
untouched), the patched wheel installed into a scratch site folder, and the
reproducer run there: not reproduced, while the stock wheel reproduces."""
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from fixmono.runtime.child import child_env, module_command
from fixmono.testing import make_patch
from fixmono.fixes.jaxlib.rocm_plugin_discovery.fix import FIX

REPO = Path(__file__).resolve().parents[3]
VERSION = "0.10.2"


def _repro(site: Path) -> dict:
    env = child_env()
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    proc = subprocess.run(module_command("fixmono.fixes.jaxlib.rocm_plugin_discovery.repro", "--json"),
                          capture_output=True, text=True, env=env)
    return json.loads(proc.stdout)


def _members(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        return {n.split("/", 1)[-1] if n.split("/")[0].endswith(".dist-info") else n:
                hashlib.sha256(zf.read(n)).hexdigest() for n in zf.namelist()}


def test_series_wheel_install_and_reproducer(tmp_path):
    on_jax = make_patch(FIX.id, "--upstream", f"pip:jax=={VERSION}", "--check", "--json")
    (jax_result,) = json.loads(on_jax.stdout)["runs"][0]["results"]
    assert jax_result["status"] == "not-applicable" and "jaxlib wheel" in jax_result["detail"]

    series = tmp_path / "series"
    run = make_patch(FIX.id, "--upstream", f"pip:jaxlib=={VERSION}", "--out", str(series), "--validate", "--json")
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert run.returncode == 0 and result["status"] == "applied", run.stdout + run.stderr

    dl = tmp_path / "dl"
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(dl),
                    f"jaxlib=={VERSION}"], check=True, capture_output=True)
    (wheel,) = dl.glob("jaxlib-*.whl")
    out = tmp_path / "out"
    patched = subprocess.run([sys.executable, str(REPO / "tools" / "patch_wheel"), str(wheel), str(series),
                              "--out", str(out)], capture_output=True, text=True)
    assert patched.returncode == 0, patched.stderr
    (new_wheel,) = out.glob("jaxlib-*.whl")
    before, after = _members(wheel), _members(new_wheel)
    compiled = [n for n in before if n.endswith((".so", ".pyd"))]
    assert compiled and all(after.get(n) == before[n] for n in compiled)  # the fix touches no compiled code
    changed = sorted(n for n in before if n.endswith(".py") and after.get(n) != before[n])
    assert changed == ["jaxlib/plugin_support.py"]

    stock, fixed = tmp_path / "stock", tmp_path / "fixed"
    for site, w in ((stock, wheel), (fixed, new_wheel)):
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                        str(site), str(w)], check=True, capture_output=True)
    assert _repro(stock)["verdict"] == "reproduced"
    verdict = _repro(fixed)
    assert verdict["verdict"] == "not-reproduced", verdict["summary"]
    assert verdict["details"]["jaxlib_path"].startswith(str(fixed))
