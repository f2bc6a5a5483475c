"""Remembered rewrites (engines/remembered.py) give what the transformation
gives: on every inline case and every fixture of the catalogue, the result
(or the error) with the cache off, on a miss and on a hit is the same, and a
hit runs no libcst at all. A damaged entry is computed again; a change to the
fix's code is a miss."""
import dataclasses
import json
import sys
import types
from pathlib import Path

import pytest

from fixmono.engines import python as engine
from fixmono.engines.port import DiffTransform
from fixmono.engines.remembered import diff_code, fingerprint
from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed
from fixmono.model.registry import discover
from fixmono.testing import change_for, fixture_changes, for_fix

ERRORS = (NotApplicable, TargetSyntaxError, TransformFailed)
INPUTS = [(f"{fix.id}: case {case.name}", change_for(fix, case), case.before) for fix in discover()
          for case in fix.cases] + \
         [(f"{fix.id}: fixture of {change.path}", change, fix.fixture_text(change)) for fix, change in fixture_changes()]
PYTHON = [item for item in INPUTS if isinstance(item[1].transform, engine.PythonTransform)]  # libcst's, remembered
DIFF = [item for item in INPUTS if isinstance(item[1].transform, DiffTransform)]  # the port engine's, likewise


def outcome(change, text):
    try:
        return change.transform.rewrite(text)
    except ERRORS as err:
        return (type(err).__name__, str(err))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FIXMONO_REWRITE_CACHE", raising=False)
    return tmp_path / "cache" / "rewrites"


def test_the_catalogue_has_python_inputs_to_check():
    assert len(PYTHON) > 40, len(PYTHON)


@pytest.mark.parametrize("name, change, text", [for_fix(item[0].split(":")[0], *item, id=item[0]) for item in PYTHON])
def test_off_miss_and_hit_agree(cache, monkeypatch, name, change, text):
    monkeypatch.setenv("FIXMONO_REWRITE_CACHE", "off")
    plain = outcome(change, text)
    monkeypatch.delenv("FIXMONO_REWRITE_CACHE")
    miss = outcome(change, text)
    assert len(list(cache.rglob("*.json"))) == 1
    monkeypatch.setattr(engine.PythonTransform, "_rewrite", lambda self, source: pytest.fail("a hit parsed again"))
    hit = outcome(change, text)
    assert plain == miss == hit


@pytest.mark.parametrize("name, change, text", [for_fix(item[0].split(":")[0], *item, id=item[0]) for item in DIFF])
def test_ported_diffs_off_miss_and_hit_agree(cache, monkeypatch, name, change, text):
    monkeypatch.setenv("FIXMONO_REWRITE_CACHE", "off")
    plain = outcome(change, text)
    monkeypatch.delenv("FIXMONO_REWRITE_CACHE")
    miss = outcome(change, text)
    assert len(list(cache.rglob("*.json"))) == 1
    monkeypatch.setattr(DiffTransform, "_rewrite", lambda self, source: pytest.fail("a hit ported again"))
    hit = outcome(change, text)
    assert plain == miss == hit


def test_a_diff_with_other_hunks_or_path_is_another_key():
    (_, change, _), *_ = DIFF
    hunks, path = change.transform.hunks, change.transform.path
    assert diff_code(path, hunks) == diff_code(path, tuple(hunks))
    assert diff_code(path, hunks) != diff_code(path + "x", hunks)
    assert diff_code(path, hunks) != diff_code(path, hunks[:-1] + (dataclasses.replace(hunks[-1], start=hunks[-1].start + 1),))


def test_a_diffs_key_holds_every_source_the_port_reads_with():
    """An edit of any module the port runs (the alignment, the syntax step of either language, the C/C++
    scopes, the diff's line splitting), tree-sitter or Python is another key: every module of fixmono's
    engines and model loaded by ports of both languages with their pre-images is in it."""
    from fixmono.engines import remembered
    from fixmono.testing import hunks_between

    cpp = "int F(int a) {\n  int b = a;\n  return b;\n}\n"
    py = "def f(a):\n    b = a\n    return b\n"
    for path, pre, old, new in (("f.cc", cpp, "  int b = a;\n", "  int b = a + 1;\n"),
                                ("f.py", py, "    b = a\n", "    b = a + 1\n")):
        release = pre.replace(old, old.replace("a", "(a)"))  # the edited line changed: the syntax step reads it
        with pytest.raises(TransformFailed):  # (the two edits meet)
            DiffTransform(path, hunks_between(pre, pre.replace(old, new), path)).rewrite(release, pre_image=pre)
    engine_bytes = remembered.port_engine()
    loaded = [m for name, m in sys.modules.items() if name.startswith(("fixmono.engines.", "fixmono.model."))]
    assert {"fixmono.engines.structure", "fixmono.engines.structure_cpp", "fixmono.engines.cpp"} <= \
        {m.__name__ for m in loaded}
    for module in loaded:
        assert Path(module.__file__).read_bytes() in engine_bytes, module.__name__
    assert f"{sys.version_info[:2]}".encode() in engine_bytes
    assert remembered.package_version("tree-sitter-cpp").encode() in engine_bytes


def test_a_damaged_entry_is_computed_again(cache):
    name, change, text = next(item for item in PYTHON if "case" in item[0])
    first = outcome(change, text)
    (entry,) = cache.rglob("*.json")
    data = json.loads(entry.read_text())
    if "source" in data:
        data["source"] = "import os  # not what the transformation gives\n"
    else:
        data["message"] = "not what the transformation said"
        data["error"] = "NoSuchError"
    entry.write_text(json.dumps(data))
    assert outcome(change, text) == first


def test_changed_code_is_another_key(tmp_path, monkeypatch):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "transform.py").write_text("X = 1\n")
    module = types.ModuleType("fixmono_test_pkg.transform")
    module.__file__ = str(folder / "transform.py")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    before = fingerprint(module.__name__, engine.__file__, "1.0")
    fingerprint.cache_clear()
    (folder / "helpers.py").write_text("Y = 2\n")  # a helper beside the transformation counts too
    assert fingerprint(module.__name__, engine.__file__, "1.0") != before
    fingerprint.cache_clear()
    assert fingerprint(module.__name__, engine.__file__, "1.1") != fingerprint(module.__name__, engine.__file__, "1.0")
    fingerprint.cache_clear()


def test_two_transforms_of_one_module_are_two_keys(cache, monkeypatch):
    """Two PythonTransforms defined in one module, on one text, each get their own result (a review found the
    second returned the first's: the key was the module's folder only)."""
    import libcst as cst

    module = types.ModuleType("fixmono_test_two.transform")
    module.__file__ = __file__  # a real file: the key's fingerprint reads its folder
    monkeypatch.setitem(sys.modules, module.__name__, module)

    def returning(value):
        class Returns(engine.SiteTransformer):
            def leave_Return(self, original, updated):
                self.anchors += 1
                if updated.value is not None and engine.code(updated.value) == value:
                    self.found(value)
                    return updated
                self.change(value)
                return updated.with_changes(value=cst.parse_expression(value))
        Returns.__module__ = module.__name__
        Returns.__qualname__ = f"Returns{value}"
        return Returns
    text = "def f():\n    return 0\n"
    one = engine.PythonTransform(returning("1"), "return 1", "a return")
    two = engine.PythonTransform(returning("2"), "return 2", "a return")
    assert "return 1" in one.rewrite(text).source and "return 2" in two.rewrite(text).source
    assert len(list(cache.rglob("*.json"))) == 2
