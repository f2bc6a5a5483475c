"""The C++ transformations on our fixtures (shaped like ROCm/xla's files)."""
import json
import re
from pathlib import Path

import pytest

from fixmono.apply.contract import apply_change
from fixmono.model.outcome import Status
from fixmono.engines.cpp import CppDocument
from fixmono.testing import make_patch, make_repo
from fixmono.fixes.xla.miopen_global_mutex.fix import AUTOTUNER_CC, FIX, ROCM_DNN_CC

FIXTURES = Path(__file__).parent / "fixtures"
ROCM_DNN = (FIXTURES / "rocm_dnn.cc").read_text()
AUTOTUNE = (FIXTURES / "autotuner_miopen.cc").read_text()
CHANGES = {c.path: c for c in FIX.changes}


def lines_added_and_removed(before: str, after: str):
    import difflib
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    return ([l[1:] for l in diff if l.startswith("+") and not l.startswith("+++")],
            [l[1:] for l in diff if l.startswith("-") and not l.startswith("---")])


@pytest.mark.parametrize("prefix", ["wrap::", ""])  # before and after #804 removed the prefixes
def test_rocm_dnn_gets_mutex_four_locks_and_the_error(prefix):
    source = ROCM_DNN.replace("wrap::miopen", prefix + "miopen")
    out = apply_change(CHANGES[ROCM_DNN_CC], source)
    assert out.status is Status.APPLIED, out.detail
    added, removed = lines_added_and_removed(source, out.new_text)
    assert added.count("ABSL_CONST_INIT static absl::Mutex miopen_global_mutex(absl::kConstInit);") == 1
    assert sum("absl::MutexLock global_lock(miopen_global_mutex);" in l for l in added) == 4
    assert [l.strip() for l in removed] == [
        'LOG(FATAL) << "Failed to allocate scratch memory - "',
        "<< allocated.status().message();",
        'return absl::InternalError("Out of memory");']
    assert "return absl::ResourceExhaustedError(absl::StrCat(" in out.new_text
    assert len(CppDocument(out.new_text).errors()) == len(CppDocument(source).errors())
    assert apply_change(CHANGES[ROCM_DNN_CC], out.new_text).status is Status.ALREADY_APPLIED


def test_lock_comes_after_the_algo_id_lookup_and_before_the_handle():
    out = apply_change(CHANGES[ROCM_DNN_CC], ROCM_DNN).new_text
    body = out[out.index("MIOpenSupport::ConvolveRunnerFromDesc("):out.index("absl::Status MIOpenSupport::GetMIOpen")]
    assert body.index("GetMIOpenConvolveAlgorithmsImmediateMode(") < body.index("global_lock") \
        < body.index("GetHandle(") < body.index("CompileSolution(")


def test_pointer_form_when_the_file_never_locks_by_reference():
    source = ROCM_DNN.replace("absl::MutexLock lock(mutex_);", "absl::MutexLock lock(&mutex_);")
    out = apply_change(CHANGES[ROCM_DNN_CC], source)
    assert "absl::MutexLock global_lock(&miopen_global_mutex);" in out.new_text


def test_the_prs_own_mutex_name_counts_as_present():
    """A tree with ROCm/xla#777 applied has miopen_global_autotune_mutex: the
    missing GetSolution lock is added with that name, nothing else."""
    fixed = apply_change(CHANGES[ROCM_DNN_CC], ROCM_DNN).new_text.replace(
        "miopen_global_mutex", "miopen_global_autotune_mutex")
    partial = fixed.replace("  absl::MutexLock global_lock(miopen_global_autotune_mutex);\n  auto miopen = "
                            "miopen_->GetHandle(parent_, stream);\n  TF_ASSIGN_OR_RETURN(auto input_nd, "
                            "scope(input_descriptor));\n  size_t count",
                            "  auto miopen = miopen_->GetHandle(parent_, stream);\n  TF_ASSIGN_OR_RETURN("
                            "auto input_nd, scope(input_descriptor));\n  size_t count")
    assert partial != fixed
    out = apply_change(CHANGES[ROCM_DNN_CC], partial)
    assert out.status is Status.APPLIED and "1 site(s) changed" in out.detail
    assert out.new_text == fixed


def test_masking_removes_the_preprocessor_and_macro_errors():
    """Unmasked, the fixture's unbalanced #if/#else, ASSIGN_OR_RETURN(auto x, ...)
    and ABSL_GUARDED_BY give ERROR nodes; masked, only the two macro invocations
    without ';' remain (one line each). On the real rocm_dnn.cc of
    rocm-jaxlib-v0.9.1 the unmasked parse had one ERROR of 4482 lines."""
    from fixmono.engines.cpp import _parser, walk
    raw = [n for n in walk(_parser().parse(ROCM_DNN.encode()).root_node) if n.type == "ERROR" or n.is_missing]
    masked = CppDocument(ROCM_DNN).errors()
    assert len(raw) > len(masked)
    assert [(e.start_point[0], e.end_point[0]) for e in masked] == [(25, 25), (26, 26)]


def test_autotuner_checks_first_and_falls_back():
    out = apply_change(CHANGES[AUTOTUNER_CC], AUTOTUNE)
    assert out.status is Status.APPLIED, out.detail
    text = out.new_text
    assert text.index("if (do_not_autotune_)") < text.index("GetFusedConvolutionCustomCallConfigs(")
    assert text.count("falling back to the default config") == 2
    assert text.count("GetDefaultConfig(instr)") == 3
    assert '#include "absl/log/log.h"' in text
    assert apply_change(CHANGES[AUTOTUNER_CC], text).status is Status.ALREADY_APPLIED


def test_a_tree_without_the_autotuner_still_gets_rocm_dnn_fixed():
    from fixmono.apply.contract import apply_fix
    files = {ROCM_DNN_CC: ROCM_DNN.encode()}
    outcome = apply_fix(FIX, files.get)
    assert outcome.status is Status.APPLIED
    assert list(outcome.new_files) == [ROCM_DNN_CC]
    assert "(optional, skipped)" in outcome.detail


@pytest.mark.parametrize("condition", ["TF_ROCM_VERSION >= 50000 && \\\n    TF_ROCM_VERSION < 70000",
                                       "TF_ROCM_VERSION >= 50000 \\\n    && !defined(FOO)"])
def test_multi_line_if_before_gethandle_stays_whole(condition):
    """A `#if` continued over two lines around GetHandle: the lock goes after
    the whole directive, never between its lines."""
    at = ROCM_DNN.index("  auto miopen = miopen_->GetHandle(parent_, stream);\n\n  switch")
    end = ROCM_DNN.index("  switch", at)
    source = ROCM_DNN[:at] + f"#if {condition}\n" + ROCM_DNN[at:end] + "#endif\n" + ROCM_DNN[end:]
    out = apply_change(CHANGES[ROCM_DNN_CC], source)
    assert out.status is Status.APPLIED, out.detail
    assert f"#if {condition}\n  absl::MutexLock global_lock(miopen_global_mutex);\n  auto miopen" in out.new_text
    added, removed = lines_added_and_removed(source, out.new_text)
    assert not any("TF_ROCM_VERSION" in l or "defined(FOO)" in l for l in added + removed)


@pytest.mark.parametrize("path,source", [(ROCM_DNN_CC, ROCM_DNN), (AUTOTUNER_CC, AUTOTUNE)])
def test_crlf_files_get_crlf_lines_only(path, source):
    crlf = source.replace("\n", "\r\n")
    out = apply_change(CHANGES[path], crlf)
    assert out.status is Status.APPLIED, out.detail
    assert re.search(r"(?<!\r)\n", out.new_text) is None  # no LF-only line
    assert out.new_text == apply_change(CHANGES[path], source).new_text.replace("\n", "\r\n")


def test_two_definitions_of_populate_find_db_fail_cleanly():
    start = ROCM_DNN.index("absl::Status MIOpenSupport::PopulateMIOpenFindDb")
    end = ROCM_DNN.index("\n}\n", start) + 3
    out = apply_change(CHANGES[ROCM_DNN_CC], ROCM_DNN + "\n" + ROCM_DNN[start:end])
    assert out.status is Status.FAILED
    assert "expected one definition of MIOpenSupport::PopulateMIOpenFindDb, found 2" in out.detail


def test_a_partly_fixed_tree_is_told_which_parts_were_there(tmp_path):
    """Like ROCm/xla#777's head: mutex and three locks there, the GetSolution
    lock missing. The status and the commit message name both sides."""
    fixed = apply_change(FIX.changes[0], ROCM_DNN).new_text
    lines = fixed.splitlines(True)
    function = next(i for i, l in enumerate(lines) if "MIOpenSupport::GetMIOpenConvolveAlgorithmsImmediateMode(" in l)
    lock = next(i for i in range(function, len(lines)) if "global_lock(" in lines[i])
    partial = "".join(lines[:lock] + lines[lock + 1:])
    repo = make_repo(tmp_path / "xla", {"xla/stream_executor/BUILD": "", ROCM_DNN_CC: partial})
    run = make_patch(FIX.id, "--upstream", str(repo), "--out", str(tmp_path / "o"), "--json")
    assert run.returncode == 0, run.stderr
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    assert "1 site(s) changed, 5 already there" in result["detail"]
    assert "this patch adds: the lock in GetMIOpenConvolveAlgorithmsImmediateMode" in result["detail"]
    patch = (tmp_path / "o" / result["patch"]).read_text()
    assert "Parts of this fix were already in the tree." in patch
    assert "already there: the process-wide mutex, the lock in PopulateMIOpenFindDb" in patch
