"""Statuses on published transformers wheels (tag network): the first 5.x
release, one in the middle, the last with the bug, the first with the fix."""
import pytest

from fixmono.fixes.transformers.falcon_packed_mask.fix import FIX
from fixmono.testing import release_result

EXPECTED = {"5.1.0": "failed", "5.4.0": "applied", "5.10.0": "applied", "5.23.0": "applied", "5.24.0": "already-applied"}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_published_release(version):
    result = release_result(FIX.id, "transformers", version)
    assert result["status"] == EXPECTED[version], result
