"""--validate's compile check (engines/compile_check.py) on our own translation
units against the real headers of the installed torch (2.13.0 in .venv), with
the real g++: what compiles, what does not, and what cannot be checked; and
the SDPA fix's validation through make_patch on a checkout of our fixtures."""
import json

import pytest

from fixmono.engines import compile_check
from fixmono.engines.compile_check import Headers, compile_check as check, torch_headers
from fixmono.model.fix import ValidationNote
from fixmono.testing import catalogue_tree, make_patch, make_repo

HEADERS = torch_headers()
pytestmark = pytest.mark.skipif(HEADERS is None, reason="needs an installed torch with its headers")

UNIT = """#include <ATen/ATen.h>
namespace at::native {{
bool probe(const Tensor& q, const std::optional<Tensor>& mask) {{
  return {body};
}}
}}
"""
BEFORE = UNIT.format(body="q.requires_grad()")
AFTER = UNIT.format(body="q.requires_grad() || (mask.has_value() && mask->requires_grad())")


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """This module's own cache: every text here is compiled once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FIXMONO_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def test_a_patched_unit_that_compiles_is_a_note_saying_so():
    result = check(BEFORE, AFTER, "aten/src/probe.cpp", HEADERS)
    assert isinstance(result, ValidationNote)
    assert result.startswith("the patched probe.cpp compiles with torch ") and "-fsyntax-only" in result


def test_a_patched_unit_that_does_not_compile_is_a_problem_with_the_first_error():
    broken = UNIT.format(body="q.requires_grad() || mask->requires_gradient()")  # no such member
    result = check(BEFORE, broken, "aten/src/probe.cpp", HEADERS)
    assert not isinstance(result, ValidationNote)
    assert result.startswith("the patched probe.cpp does not compile with torch "), result
    assert "probe.cpp:" in result and "error:" in result and "requires_gradient" in result
    assert "fixmono-compile-" not in result  # the temporary folder is not in the message


def test_an_unpatched_unit_that_does_not_compile_means_the_check_says_nothing():
    foreign = "#include <ATen/native/NoSuchHeaderOfAnotherRelease.h>\n" + BEFORE
    result = check(foreign, foreign.replace("q.requires_grad()", "q.requires_grad() || true"), "x.cpp", HEADERS)
    assert isinstance(result, ValidationNote)
    assert result.startswith("compile check not run: the unpatched x.cpp does not compile with torch ")
    assert "a header it includes, ATen/native/NoSuchHeaderOfAnotherRelease.h, is not there" in result
    newer = BEFORE.replace("q.requires_grad()", "q.requires_grad_in_a_later_release()")  # compiles nowhere here
    result = check(newer, newer.replace("q.", "(q)."), "x.cpp", HEADERS)
    assert isinstance(result, ValidationNote) and "either: they are not its release's headers (" in result


def test_no_headers_or_no_compiler_is_a_note():
    assert check(BEFORE, AFTER, "p.cpp", None).startswith("compile check not run: no headers for p.cpp")
    assert check(BEFORE, AFTER, "p.cpp", HEADERS, compiler="no-such-cc") == \
        "compile check not run: no no-such-cc here"


def test_results_are_remembered_by_content(monkeypatch, tmp_path):
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path))
    assert check(BEFORE, AFTER, "p.cpp", HEADERS).startswith("the patched")
    assert len(list((tmp_path / "compiles").glob("*.json"))) == 2  # the unpatched and the patched text
    monkeypatch.setattr(compile_check, "bounded", lambda *a, **k: pytest.fail("compiled again"))
    assert check(BEFORE, AFTER, "p.cpp", HEADERS).startswith("the patched")
    other = Headers("other headers", HEADERS.dirs, HEADERS.defines)  # another key: would compile
    with pytest.raises(pytest.fail.Exception, match="compiled again"):
        check(BEFORE, AFTER, "p.cpp", other)


def test_make_patch_validate_compiles_the_sdpa_fix_on_our_fixture(tmp_path):
    repo = make_repo(tmp_path / "pytorch", catalogue_tree("pytorch"))
    run = make_patch("pytorch-sdpa-mask-grad-logsumexp", "--upstream", str(repo), "--check", "--validate", "--json")
    assert run.returncode == 0, run.stderr
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert result["status"] == "applied", result
    assert "validated: the patched attention.cpp compiles with torch " in result["detail"], result


def test_a_headers_folder_without_headers_is_one_line_and_exit_2(tmp_path):
    repo = make_repo(tmp_path / "pytorch", catalogue_tree("pytorch"))
    run = make_patch("pytorch-sdpa-mask-grad-logsumexp", "--upstream", str(repo), "--check", "--validate",
                     env={"FIXMONO_TORCH_HEADERS": str(tmp_path)})
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == (f"make_patch: error: FIXMONO_TORCH_HEADERS={tmp_path}: no include/ATen/ATen.h "
                                  "there; give a torch package folder (site-packages/torch, or torch/ of an "
                                  "unpacked wheel)")
