"""patches/ is what make_patch generates from each series' BASE (tag network:
the BASE of the Python upstreams is a published wheel)."""
import os
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT
from tests.helpers import make_patch

PATCHES = Path(os.path.realpath(REPO_ROOT / "patches" / "README.md")).parent  # the source tree's patches/
PROJECTS = sorted(p.name for p in PATCHES.iterdir() if (p / "BASE").is_file())
# series made from a published wheel: regenerated here. patches/xla's BASE is a ROCm/xla branch on GitHub,
# which CI cannot reach: tests/test_xla_series.py checks it against make_patch's output offline.
FROM_WHEELS = [p for p in PROJECTS if (PATCHES / p / "BASE").read_text().startswith("pip:")]


@pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads wheels (tag: network)")
@pytest.mark.parametrize("project", FROM_WHEELS)
def test_series_is_regenerated_byte_identical(tmp_path, project):
    spec, _sha = (PATCHES / project / "BASE").read_text().split()
    run = make_patch("--all", "--upstream", spec, "--out", str(tmp_path / "series"))
    assert run.returncode == 0, run.stderr
    checked_in = {p.name: p.read_bytes() for p in (PATCHES / project).iterdir()}
    fresh = {p.name: p.read_bytes() for p in (tmp_path / "series").iterdir()}
    assert fresh == checked_in, f"patches/{project} is stale: run tools/make_patch --all --upstream default --out patches"


def test_every_series_names_its_files():
    assert PROJECTS, "no series in patches/"
    for project in PROJECTS:
        names = (PATCHES / project / "series").read_text().split()
        assert sorted(names) == sorted(p.name for p in (PATCHES / project).glob("*.patch"))
