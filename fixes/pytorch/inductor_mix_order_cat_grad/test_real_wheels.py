"""Against the simd.py of published torch wheels (read by HTTP range requests,
~1.4 MB each; tag network): the status on each kind of release, --validate
running the rewritten function of each affected release on the double."""

import pytest

from fixmono.fixes.pytorch.inductor_mix_order_cat_grad.fix import FIX
from fixmono.testing import release_result

EXPECTED = {"2.9.1": "not-applicable", "2.10.0": "applied", "2.12.0": "applied", "2.14.1": "applied",
            "2.15.0": "already-applied"}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_published_release(version):
    result = release_result(FIX.id, "torch", version)
    assert result["status"] == EXPECTED[version], result
