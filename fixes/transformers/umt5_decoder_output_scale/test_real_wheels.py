"""Statuses on published transformers wheels (tag network): 5.2.0 (no bug: it
keeps the checkpoint's setting) is refused whole, never half-patched. 5.3.0:
the config hunk's header names only the class, its context is not all there,
and what is lies in another method than the one the diff was made in: which
method cannot be told from the diff, so it is refused (failed), never guessed."""
import pytest

from fixmono.fixes.transformers.umt5_decoder_output_scale.fix import FIX
from fixmono.testing import release_result

EXPECTED = {"5.2.0": "failed", "5.3.0": "failed", "5.23.0": "applied", "5.24.0": "already-applied"}


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_on_published_release(version):
    result = release_result(FIX.id, "transformers", version)
    assert result["status"] == EXPECTED[version], result
