"""The reproducer on this machine (CPU: the real paths agree, so not-reproduced,
naming ROCm), and its comparison logic against the fault-injecting double."""
import json

import pytest
import torch

from fixmono.model.fix import Verdict
from fixmono.fixes.pytorch.batchnorm_negative_running_var import repro


def test_invalid_data_really_gives_eager_nan():
    i, x = repro.make_inputs("cpu", valid=False)
    assert (x + repro.EPS < 0).any(), "the seed must give negative variances"
    out = repro.bn(i, x)
    per_channel_nan = torch.isnan(out).transpose(0, 1).reshape(x.numel(), -1).all(dim=1)
    assert torch.equal(per_channel_nan, x + repro.EPS < 0)  # NaN exactly where var + eps < 0


def test_fixed_data_gives_no_nan():
    i, x = repro.make_inputs("cpu", valid=True)
    assert not torch.isnan(repro.bn(i, x)).any()


def test_mismatch_count_uses_equal_nan_semantics():
    a = torch.tensor([1.0, float("nan"), 3.0, float("nan")])
    assert repro.mismatches(a, a.clone()) == 0
    assert repro.mismatches(a, torch.tensor([1.0, 0.0, 3.0, float("nan")])) == 1


def test_real_paths_on_cpu_agree_and_name_rocm():
    result = repro.reproduce(device="cpu")
    assert result.verdict is Verdict.NOT_REPRODUCED, result.summary
    assert "ROCm" in result.needs
    paths = {r["path"]: r for r in result.details["invalid_running_var"]}
    assert paths["nnc"]["fused"], "the NNC fuser must form a TensorExprGroup, else nothing is tested"
    assert paths["nnc"]["mismatched"] == 0 and paths["nnc"]["total"] > 0
    if paths["inductor"]["error"] is None:
        assert paths["inductor"]["mismatched"] == 0
    assert result.details["eager_nan_elements"] > 0


def test_double_reproduces_and_the_fix_removes_it():
    result = repro.reproduce(device="cpu", simulate_rocm=True)
    assert result.verdict is Verdict.REPRODUCED
    assert "fault-injecting double" in result.summary
    (bad,) = result.details["invalid_running_var"]
    (good,) = result.details["fixed_running_var"]
    # every NaN element of eager becomes a mismatch; none with valid statistics
    assert bad["mismatched"] > 0 and good["mismatched"] == 0


def test_cli_exit_codes(capsys):
    assert repro.main(["--device", "cpu", "--simulate-rocm"]) == 1
    assert capsys.readouterr().out.startswith("reproduced:")
    assert repro.main(["--device", "cpu", "--no-compile", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "not-reproduced"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU answer")
def test_missing_gpu_is_skipped():
    result = repro.reproduce(device="cuda")
    assert result.verdict is Verdict.SKIPPED and result.verdict.exit_code == 77
