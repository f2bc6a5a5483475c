"""Discovery of fixes and the checks on their declarations."""
import os
from pathlib import Path

import pytest

from fixmono.model.errors import FixDeclarationError
from fixmono.model.fix import Dep3, FileChange, Fix
from fixmono.model.registry import discover, fix_packages
from fixmono.testing import REPO_ROOT
from fixmono.fixes.pytorch.batchnorm_negative_running_var.transform import TRANSFORM


@pytest.mark.catalogue
def test_every_fix_loads_with_its_package():
    fixes = discover()
    assert fixes and all(f.package.startswith("fixmono.fixes.") for f in fixes)
    assert len({f.id for f in fixes}) == len(fixes)


@pytest.mark.catalogue
def test_every_fix_folder_reaches_make_patch():
    """//fixes:all (what make_patch and the tests ship with) is generated from
    the folders (tools/catalogue.bzl): under Bazel, every fix folder of the
    source tree must be in the runfiles. fixes/BUILD.bazel in runfiles links to
    the source tree, where all folders are."""
    source = Path(os.path.realpath(REPO_ROOT / "fixes" / "BUILD.bazel")).parent
    in_source = sorted("fixmono.fixes." + ".".join(p.parent.relative_to(source).parts) for p in source.glob("*/*/fix.py"))
    assert fix_packages() == in_source


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


def test_ctrl_c_inside_a_fix_import_is_an_interrupt_not_a_broken_fix(monkeypatch, capsys):
    """Python 3.11 wraps a KeyboardInterrupt raised while a dataclass is built
    (libcst's, on import) in a RuntimeError: still Ctrl-C, exit 130."""
    import types
    from fixmono.cli import make_patch as cli
    from fixmono.model import registry

    def interrupted_import(name):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as err:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from err

    monkeypatch.setattr(registry, "importlib", types.SimpleNamespace(import_module=interrupted_import))
    assert cli.main(["--all", "--upstream", "default", "--check"]) == 130
    assert capsys.readouterr().err == "make_patch: interrupted; the checkout was not changed\n"
