"""tools/fixes status: installed versions, presence check on the installed
files, and the runtime hot-fixes turned on from FIXMONO_HOTFIXES."""
import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from fixmono.analysis import status
from fixmono.cli import status as status_cli
from fixmono.runtime import hotfixes
from fixmono.runtime.child import child_env
from fixmono.sources.installed import installed_path
from fixmono.apply.contract import apply_change
from fixmono.model.outcome import Status
from fixmono.model.projects import PROJECTS
from fixmono.model.registry import discover
from fixmono.testing import REPO_ROOT

MOE_FIX = "transformers-pin-moe-routing"


def installed(dist: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
BN_FIX = "pytorch-batchnorm-negative-running-var"


def fixes_cli(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")}
    env.pop("MAKE_PATCH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "fixmono.cli.status", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def report():
    run = fixes_cli("status", "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_json_lists_every_fix_with_project_and_installed_version(report):
    rows = {r["fix"]: r for r in report["fixes"]}
    assert list(rows) == [f.id for f in discover()]
    assert {i: r["project"] for i, r in rows.items()} == {f.id: f.upstream for f in discover()}
    assert rows[BN_FIX]["dist"] == "torch" and rows[BN_FIX]["version"] == installed("torch")
    assert rows[MOE_FIX]["version"] == installed("transformers")
    te = rows["te-rocm-unfused-bias-grad-fp32-wgrad"]
    assert te["version"] == installed("transformer-engine")
    if te["version"] is None:
        assert te["installed_files"] == status.NOT_INSTALLED
    assert rows["xla-rocm-miopen-global-mutex"]["dist"] == "jaxlib"
    import torch  # what this machine has, asked independently of status.py
    devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    name = ("rocm" if torch.version.hip else "cuda") if devices else "cpu"
    assert report["backend"]["name"] == name and report["backend"]["devices"] == devices


def test_installed_transformers_lacks_the_pin(report):
    row = next(r for r in report["fixes"] if r["fix"] == MOE_FIX)
    assert row["installed_files"] == status.NOT_FIXED and row["applies"] is True
    assert "site-packages/transformers/integrations/moe.py" in row["detail"]


def test_cpp_and_test_targets_are_not_looked_for_in_the_wheel(report):
    rows = {r["fix"]: r for r in report["fixes"]}
    for fid in (BN_FIX, "pytorch-revert-addmm-cublaslt-gate", "xla-rocm-miopen-global-mutex"):
        assert rows[fid]["installed_files"] == status.BUILT_IN and rows[fid]["applies"] is None


def test_repo_path_maps_to_the_installed_file():
    path = installed_path(PROJECTS["transformers"], "src/transformers/modeling_utils.py")
    assert path.is_file() and path.parent.name == "transformers"
    assert installed_path(PROJECTS["pytorch"], "test/test_jit_fuser_te.py") is None


def test_a_patched_copy_of_the_installed_files_reports_already_fixed(tmp_path):
    (fix,) = [f for f in discover() if f.id == MOE_FIX]
    project = PROJECTS["transformers"]
    for change in fix.changes:
        original = installed_path(project, change.path)
        outcome = apply_change(change, original.read_text(encoding="utf-8"))
        assert outcome.status is Status.APPLIED, outcome.detail
        copy = installed_path(project, change.path, site=tmp_path)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(outcome.new_text, encoding="utf-8")
    row = status.check_installed(fix, site=tmp_path)
    assert row["installed_files"] == status.FIXED, row["detail"]
    # and the unpatched copy is still "not fixed" through the same parameter
    for change in fix.changes:
        shutil.copyfile(installed_path(project, change.path),
                        installed_path(project, change.path, site=tmp_path))
    assert status.check_installed(fix, site=tmp_path)["installed_files"] == status.NOT_FIXED


def test_hotfix_from_env_is_logged_and_disable_reverts_it(monkeypatch, caplog):
    import torch

    from fixmono.fixes.pytorch.batchnorm_negative_running_var.hotfix import InvalidRunningVar

    bn = torch.nn.BatchNorm1d(4).eval()
    with torch.no_grad():
        bn.running_var.copy_(torch.tensor([1.0, -1.0, 1.0, 1.0]))
    monkeypatch.setenv("FIXMONO_HOTFIXES", BN_FIX)
    caplog.set_level(logging.INFO, logger="fixmono")
    try:
        messages = hotfixes.enable_from_env()
        assert len(messages) == 1 and "enabled" in messages[0]
        assert any(r.name == "fixmono" and BN_FIX in r.getMessage() and "enabled" in r.getMessage()
                   for r in caplog.records)
        with pytest.raises(InvalidRunningVar):
            bn(torch.randn(2, 4))
    finally:
        removed = hotfixes.disable_hotfixes([BN_FIX])
    assert "disabled" in removed[0]
    bn(torch.randn(2, 4))  # no check any more: the hook is gone


def test_hotfixes_without_a_runtime_form_are_skipped_with_a_line():
    messages = hotfixes.enable_hotfixes(["xla-rocm-miopen-global-mutex"])
    assert messages == ["xla-rocm-miopen-global-mutex: no runtime hot-fix (apply the patch and rebuild); skipped"]
    with pytest.raises(ValueError, match="unknown fix id"):
        hotfixes.enable_hotfixes(["no-such-fix"])


@pytest.mark.parametrize("args", [["--bogus"], ["frob"], ["status", "--timeout", "0"], ["status", "--timeout", "x"]])
def test_bad_input_is_one_line_and_exit_2(args):
    run = fixes_cli(*args)
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith("fixes: error:"), run.stderr


@pytest.mark.parametrize("args", [["--bogus"], ["--timeout", "0"], ["--python", "/no/such/python"]])
def test_fixmono_status_errors_are_prefixed_with_its_own_name(args):
    run = subprocess.run([sys.executable, "-m", "fixmono", "status", *args], capture_output=True, text=True,
                         env=child_env(), timeout=300)
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith("fixmono status: error:"), run.stderr


@pytest.mark.skipif(not (REPO_ROOT / "tools/fixes").exists(), reason="tools/fixes not in this tree")
def test_the_executable_prints_the_table_without_colour_when_piped():
    run = subprocess.run([sys.executable, str(REPO_ROOT / "tools/fixes")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "INSTALLED FILES" in run.stdout and "\033[" not in run.stdout
    assert f"{MOE_FIX}" in run.stdout and status.NOT_FIXED in run.stdout


def test_colour_only_when_asked():
    report = status.collect(fixes=[f for f in discover() if f.id == MOE_FIX])
    assert "\033[33mnot fixed" in status_cli.render(report, colour=True)
    assert "\033[" not in status_cli.render(report, colour=False)
