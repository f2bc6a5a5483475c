"""Against published transformers wheels (downloads ~12 MB each, cached;
tag network): the status on each kind of release, and the reproducer two-sided
on the last affected release's own function."""

import pytest

from fixmono.testing import release_result
from fixmono.fixes.transformers.moe_sentinel_router_grad import repro
from fixmono.fixes.transformers.moe_sentinel_router_grad.fix import FIX

EXPECTED = {"5.0.0": "not-applicable", "5.3.0": "already-applied", "5.8.0": "applied",
            "5.17.0": "applied", "5.18.0": "already-applied"}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_published_release(version):
    result = release_result(FIX.id, "transformers", version)
    assert result["status"] == EXPECTED[version], result


def test_reproducer_on_the_last_affected_release():
    result = repro.reproduce("5.17.0")
    assert result.verdict.value == "reproduced", result.summary
    assert result.details["unpatched"]["sentinel_grad_max"] > 0 and result.details["patched"]["right"]
