"""Discovery of fixes and the checks on their declarations."""
import os
from pathlib import Path

import pytest

from tools.fixlib.model import Dep3, FileChange, Fix, FixDeclarationError
from tools.fixlib.registry import REPO_ROOT, discover, fix_packages
from fixes.pytorch.batchnorm_negative_running_var.transform import TRANSFORM


def test_every_fix_loads_with_its_package():
    fixes = discover()
    assert fixes and all(f.package.startswith("fixes.") for f in fixes)
    assert len({f.id for f in fixes}) == len(fixes)


def test_all_fixes_are_listed_in_fixes_build():
    """//fixes:all (what make_patch ships with) must name every fix folder. The
    BUILD file in runfiles is a link to the source tree, where all folders are."""
    build = REPO_ROOT / "fixes" / "BUILD.bazel"
    source_root = Path(os.path.realpath(build)).parent.parent
    listed = build.read_text()
    for package in fix_packages(source_root):
        label = "//" + package.replace(".", "/") + ":lib"
        assert f'"{label}"' in listed, f"{label} is missing from ALL_FIXES in fixes/BUILD.bazel"


def make(**kw):
    base = dict(id="a-fix", title="t", upstream="pytorch", description="d",
                dep3=Dep3(origin="vendor", last_update="2026-01-01"), backends=("cpu",),
                changes=(FileChange("a.py", TRANSFORM),))
    return Fix(**{**base, **kw})


@pytest.mark.parametrize("kw,message", [
    ({"id": "Not_Kebab"}, "kebab-case"),
    ({"dep3": Dep3(origin="vendor", last_update="22/11/2026")}, "YYYY-MM-DD"),
    ({"backends": ("tpu",)}, "unknown backends"),
    ({"changes": ()}, "no file changes"),
    ({"changes": (FileChange("a.py", TRANSFORM), FileChange("a.py", TRANSFORM))}, "same path twice"),
    ({"changes": (FileChange("a.py", TRANSFORM, sites=0),)}, "at least one site"),
    ({"title": "two\nlines"}, "one line"),
])
def test_bad_declarations_are_rejected(kw, message):
    with pytest.raises(FixDeclarationError, match=message):
        make(**kw)


def test_dep3_trailers_skip_empty_fields():
    d = Dep3(origin="upstream, https://x/1", last_update="2026-01-01", forwarded="not-needed")
    assert d.trailers() == [("Origin", "upstream, https://x/1"), ("Forwarded", "not-needed"),
                            ("Last-Update", "2026-01-01")]
