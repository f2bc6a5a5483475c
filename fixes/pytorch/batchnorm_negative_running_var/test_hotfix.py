"""The runtime check of BatchNorm statistics."""
import warnings

import pytest
import torch
from torch import nn

from fixmono.fixes.pytorch.batchnorm_negative_running_var import hotfix
from fixmono.fixes.pytorch.batchnorm_negative_running_var.fix import FIX


def model_with_bad_stats():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Sequential(nn.BatchNorm2d(4)))
    model.eval()
    with torch.no_grad():
        model[1].running_var.copy_(torch.tensor([1.0, -0.5, 2.0, -3.0]))
        model[3][0].running_var.copy_(torch.tensor([1.0, float("nan"), 1.0, 1.0]))
    return model


@pytest.fixture(autouse=True)
def hook_off():
    yield
    hotfix.disable()


def test_raise_names_modules_and_channels():
    with pytest.raises(hotfix.InvalidRunningVar) as err:
        hotfix.check_running_var(model_with_bad_stats())
    msg = str(err.value)
    assert "1: running_var negative in channels [1, 3] (2)" in msg
    assert "3.0: running_var non-finite in channels [1] (1)" in msg


def test_clamp_repairs_with_a_warning_and_stops_nan():
    model = model_with_bad_stats()
    x = torch.randn(2, 3, 5, 5)
    assert torch.isnan(model(x)).any()
    with pytest.warns(RuntimeWarning, match="clamped"):
        found = hotfix.check_running_var(model, on_invalid="clamp")
    assert len(found) == 2
    assert torch.equal(model[1].running_var, torch.tensor([1.0, 0.0, 2.0, 0.0]))
    assert not torch.isnan(model(x)).any()
    assert hotfix.check_running_var(model) == []


def test_valid_model_passes_silently():
    model = nn.Sequential(nn.BatchNorm1d(3)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hotfix.check_running_var(model, on_invalid="clamp") == []


def test_global_hook_checks_eval_forward_and_is_reversible():
    model = model_with_bad_stats()
    x = torch.randn(2, 3, 5, 5)
    assert "enabled" in FIX.hotfix.apply()
    assert "already enabled" in FIX.hotfix.apply()  # idempotent
    with pytest.raises(hotfix.InvalidRunningVar, match="negative in channels"):
        model(x)
    model.train()
    model(x)  # training uses batch statistics: nothing to check
    model.eval()
    assert "disabled" in FIX.hotfix.remove()
    assert "was not enabled" in FIX.hotfix.remove()
    assert torch.isnan(model(x)).any()  # back to upstream behaviour


def test_global_hook_clamps_once_per_statistics_version():
    model = model_with_bad_stats()
    hotfix.enable(on_invalid="clamp")
    with pytest.warns(RuntimeWarning):
        out = model(torch.randn(2, 3, 5, 5))
    assert not torch.isnan(out).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(torch.randn(2, 3, 5, 5))  # repaired and unchanged: no second warning


def test_bad_mode_is_rejected():
    with pytest.raises(ValueError, match="on_invalid"):
        hotfix.check_running_var(nn.BatchNorm1d(2), on_invalid="ignore")
