"""The hot-fix and --validate on routers defined from our fixtures (no network),
and the hot-fix on the installed transformers (5.23.0 in .venv: already fixed)."""
import importlib.util
import sys
from pathlib import Path

import pytest

from fixmono.fixes.transformers.moe_router_double_softmax import hotfix, validate
from fixmono.fixes.transformers.moe_router_double_softmax.routers import (FAMILIES, Family, check_router,
                                                                          router_classes)
from fixmono.fixes.transformers.moe_router_double_softmax.transform import TRANSFORM

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class FixtureFamily(Family):
    @property
    def module(self) -> str:
        return "fixmono_router_fixture"


@pytest.fixture
def fixture_module(tmp_path):
    """The mixtral-style fixture imported from a file, as a modeling module is (the hot-fix reads its source)."""
    path = tmp_path / "fixmono_router_fixture.py"
    path.write_text((FIXTURES / "router_float.py").read_text())
    spec = importlib.util.spec_from_file_location("fixmono_router_fixture", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module.__name__] = module
    spec.loader.exec_module(module)
    yield module
    hotfix.disable()
    del sys.modules[module.__name__]


def test_fixture_routers_return_probabilities_until_rewritten():
    for name in ("router.py", "router_float.py", "omni_routers.py"):
        text = (FIXTURES / name).read_text()
        for cls in router_classes(text).values():
            assert check_router(cls)["returns_probabilities"] and not check_router(cls)["returns_raw_logits"]
        for cls in router_classes(TRANSFORM.rewrite(text).source).values():
            result = check_router(cls)
            assert result == {"returns_raw_logits": True, "returns_probabilities": False, "same_choice": True,
                              "same_weights": True}, (name, result)


def test_hotfix_rewrites_the_class_method_and_undoes_it(fixture_module):
    cls = fixture_module.SmallMixTopKRouter
    family = FixtureFamily("fixture", ("SmallMixTopKRouter", "NoSuchTopKRouter"), "float")
    original = cls.forward
    assert hotfix.enable([family]) == "enabled: 1 routers return raw router_logits (SmallMixTopKRouter)"
    assert hotfix.enable([family]) == "already enabled"
    assert check_router(cls)["returns_raw_logits"] and check_router(cls)["same_weights"]
    assert hotfix.disable() == "disabled: 1 routers back to the installed forward"
    assert cls.forward is original and check_router(cls)["returns_probabilities"]
    assert hotfix.disable() == "not enabled; nothing to do"


def test_hotfix_on_the_installed_release_does_nothing():
    pytest.importorskip("transformers")
    assert hotfix.enable() == "no router here returns probabilities as router_logits; nothing to do"
    assert hotfix.disable() == "not enabled; nothing to do"


def test_validate_passes_the_fix_and_catches_a_wrong_text():
    path = FAMILIES[0].path
    text = (FIXTURES / "router_float.py").read_text()
    assert validate.check({path: text}, {path: TRANSFORM.rewrite(text).source}) is None
    # a "fix" that renames the softmax but leaves topk on the raw logits returns raw logits, picks wrongly weighted
    wrong = text.replace("router_logits = torch.nn.functional.softmax", "router_probs = torch.nn.functional.softmax")
    problem = validate.check({path: text}, {path: wrong})
    assert problem and "SmallMixTopKRouter" in problem and "'same_weights': False" in problem
