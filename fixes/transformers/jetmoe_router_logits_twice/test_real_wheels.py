"""Statuses on published transformers wheels (tag network)."""
import pytest

from fixmono.fixes.transformers.jetmoe_router_logits_twice.fix import FIX
from fixmono.testing import release_result

# 5.0.0 records router_logits from the gate in another form: the line the diff replaces is not there and
# other code stands where it was, so it is failed ("code differs"), never judged applied or absent
EXPECTED = {"5.0.0": "failed", "5.2.0": "applied", "5.23.0": "applied", "5.24.0": "already-applied"}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_published_release(version):
    result = release_result(FIX.id, "transformers", version)
    assert result["status"] == EXPECTED[version], result
