"""The uses check for C/C++ (engines/uses_cpp.py, best effort): a call a diff adds must be named by the
file or a header it includes in the target tree; a function of upstream's own file (its pre-image defines
it) that the release lacks fails the port; a call nothing in the tree names, where a system or library
header may declare it, is said to be not checked. Our own small tree, shaped like a C++ library."""
from __future__ import annotations

import difflib
import json
import subprocess

import pytest

from fixmono.apply.contract import apply_fix
from fixmono.engines.port import diff_fix
from fixmono.engines.uses import unresolved_uses
from fixmono.engines.uses_cpp import unresolved_calls
from fixmono.model.errors import Unreadable
from fixmono.model.outcome import Status
from fixmono.model.patchfile import parse_patch
from fixmono.testing import make_patch

PATH = "lib/ops/scale.cc"
SCALE = """#include "scale.h"
#include "lib/util/check.h"
#include <vector>

namespace lib {

float Scale(const std::vector<float>& in, float factor) {
  CHECK_ARG(factor > 0);
  float total = 0;
  for (float x : in) total += x * factor;
  return total;
}

}  // namespace lib
"""
TREE = {
    PATH: SCALE,
    "lib/ops/scale.h": '#include "lib/core/types.h"\nnamespace lib {\nfloat Scale(const std::vector<float>& in, '
                       'float factor);\n}\n',
    "lib/util/check.h": "#define CHECK_ARG(cond) do { if (!(cond)) Abort(#cond); } while (0)\nvoid Abort(const char*);\n",
    "lib/core/types.h": "namespace lib {\nusing Index = long;\nIndex Clamp(Index value, Index low, Index high);\n}\n",
    "include/lib/api.h": "namespace lib {\nvoid Publish(float value);\n}\n",
}
# upstream's file at the diff's base: it defines a helper the release's file lacks
PRE_IMAGE = SCALE.replace("namespace lib {\n\n", "namespace lib {\n\nstatic float Round(float x) { return x; }\n\n")
LINE = "  for (float x : in) total += x * factor;\n"


def read(tree: dict):
    return lambda path: tree[path].encode() if path in tree else None


def with_call(call: str, text: str = SCALE) -> str:
    return text.replace(LINE, LINE + f"  {call}\n")


@pytest.mark.parametrize("call", [
    "total = Clamp(total, 0, 10);",  # declared two includes down (scale.h -> lib/core/types.h)
    "Abort(\"negative\");",  # in a quoted header found from the tree's root
    "lib::Clamp(total, 0, 1);",  # qualified
    "total = std::max(total, 0.0f);",  # the standard library's
    "in.data()->Reset();",  # a member call: its class is not known here
    "CHECK_ARG(total >= 0);",  # a macro of an included header
])
def test_a_call_the_file_or_its_headers_name_is_there(call):
    assert unresolved_calls(PATH, SCALE, with_call(call), read(TREE), PRE_IMAGE) == ([], [])


def test_a_function_of_upstreams_file_the_release_lacks_fails():
    problems, unchecked = unresolved_calls(PATH, SCALE, with_call("total = Round(total);"), read(TREE), PRE_IMAGE)
    assert problems == ["the change calls `Round` (line 11), which neither this file nor a header it includes "
                        "names in this release (the diff's pre-image defines it)"] and unchecked == []
    # what the other callers see (bench_backports' usable column)
    assert unresolved_uses(PATH, SCALE, with_call("total = Round(total);"), read(TREE), True, PRE_IMAGE) == problems


@pytest.mark.parametrize("case, tree, pre_image, new", [
    ("no pre-image to tell", TREE, None, with_call("total = Round(total);")),
    ("upstream does not define it", TREE, SCALE, with_call("total = Round(total);")),
    ("a quoted include is not in the tree", {k: v for k, v in TREE.items() if k != "lib/util/check.h"}, PRE_IMAGE,
     with_call("total = Round(total);")),
])
def test_a_call_nothing_names_is_not_checked_where_a_header_may_declare_it(case, tree, pre_image, new):
    assert unresolved_calls(PATH, SCALE, new, read(tree), pre_image) == ([], ["Round"]), case


@pytest.mark.parametrize("header", ["<cuda_runtime.h>", "<cublasLt.h>", "<cub/cub.cuh>", "<hip/hip_runtime.h>"])
def test_a_gpu_vendors_header_hides_no_function_of_upstreams_file(header):
    """A CUDA file includes the SDK's headers, which the tree never holds: they declare the vendor's names,
    not a helper of upstream's own file, so that helper's absence stays certain."""
    old = SCALE.replace("#include <vector>\n", f"#include <vector>\n#include {header}\n")
    new = with_call("total = Round(total);", old)
    problems, _ = unresolved_calls(PATH, old, new, read(TREE | {PATH: old}), PRE_IMAGE)
    assert problems and "`Round`" in problems[0]


def test_a_function_the_diff_itself_adds_is_there():
    new = with_call("total = Round(total);").replace("namespace lib {\n\n",
                                                      "namespace lib {\n\nstatic float Round(float x) { return x; }\n\n")
    assert unresolved_calls(PATH, SCALE, new, read(TREE), PRE_IMAGE) == ([], [])


def test_a_header_under_an_include_folder_above_the_file_is_read():
    new = with_call("Publish(total);").replace('#include <vector>\n', '#include <vector>\n#include <lib/api.h>\n')
    assert unresolved_calls(PATH, SCALE, new, read(TREE), PRE_IMAGE) == ([], [])
    assert unresolved_calls(PATH, SCALE, new, read({k: v for k, v in TREE.items() if k != "include/lib/api.h"}),
                            PRE_IMAGE) == ([], ["Publish"])


def unified(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))


def test_apply_fix_fails_the_port_or_says_what_it_did_not_check():
    """Through apply_fix, as make_patch runs it: the pre-image found for the file tells the helper apart."""
    def found(path, blob):
        return (PRE_IMAGE.encode(), "in the test") if path == PATH else None

    missing = diff_fix(parse_patch(unified(PATH, SCALE, with_call("total = Round(total);")), "x.patch"), "lib")
    outcome = apply_fix(missing, read(TREE), pre_image=found, whole_tree=True)
    assert outcome.status is Status.FAILED and "the change calls `Round` (line 11)" in outcome.detail
    unknown = diff_fix(parse_patch(unified(PATH, SCALE, with_call("cudaDeviceSynchronize();")), "y.patch"), "lib")
    outcome = apply_fix(unknown, read(TREE), pre_image=found, whole_tree=True)
    (changed,) = outcome.files
    assert outcome.status is Status.APPLIED and changed.unchecked.startswith(
        "not checked: the added call(s) `cudaDeviceSynchronize`")


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(repo)})


def test_make_patch_onto_a_release_branch_fails_naming_the_call(tmp_path):
    """A main-branch fix calls a helper main's file has and the release's does not: the checkout holds the
    diff's pre-image blob, so the check knows the helper is upstream's own; --json says why."""
    repo = tmp_path / "lib"
    for path, text in TREE.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "init", "-q", "-b", "release")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "release")
    git(repo, "checkout", "-q", "-b", "main")
    (repo / PATH).write_text(PRE_IMAGE)
    git(repo, "commit", "-qam", "a helper")
    (repo / PATH).write_text(with_call("total = Round(total);", PRE_IMAGE))
    git(repo, "commit", "-qam", "the fix")
    (tmp_path / "fix.patch").write_text(subprocess.run(["git", "-C", str(repo), "format-patch", "-1", "--stdout"],
                                                       capture_output=True, text=True, check=True).stdout)
    git(repo, "checkout", "-q", "release")
    proc = make_patch("--diff", str(tmp_path / "fix.patch"), "--upstream", str(repo), "--check", "--json")
    assert proc.returncode == 1, proc.stderr
    (result,) = json.loads(proc.stdout)["runs"][0]["results"]
    assert result["status"] == "failed" and "the change calls `Round`" in result["detail"], result


@pytest.mark.parametrize("include", ['"/dev/zero"', '"../../../../etc/passwd"', "</proc/self/environ>"])
def test_an_include_outside_the_tree_is_never_read(include):
    asked = []

    def read(path):
        asked.append(path)
        return TREE[path].encode() if path in TREE else None

    new = with_call("Publish(total);").replace("#include <vector>\n", f"#include {include}\n")
    assert unresolved_calls(PATH, SCALE, new, read, PRE_IMAGE) == ([], ["Publish"])
    assert asked and not any(p.startswith(("/", "..")) for p in asked), asked


def test_a_header_the_tree_cannot_read_leaves_the_call_not_checked():
    """A quoted header that is a symlink or over the size cap (the checkout's read refuses it): what it
    declares is not known, so a call nothing else names is not checked, never failed, and nothing raises."""
    def read(path):
        if path == "lib/util/check.h":
            raise Unreadable(f"{path} is a symlink at HEAD; patch the file it points to")
        return TREE[path].encode() if path in TREE else None

    assert unresolved_calls(PATH, SCALE, with_call("total = Round(total);"), read, PRE_IMAGE) == ([], ["Round"])


@pytest.mark.parametrize("change", [
    ("#include <vector>\n", "#include <vector>\n#include <lib/api.h>\n"),  # a project header not found
    ("#include <vector>\n", "#include <vector>\n#include LIB_EXTRA_HEADER\n"),  # computed
    ('#include "scale.h"\n', '#include "scale.h"\n#define DECLARE(n) float n##_op(float)\n'),  # ## names
], ids=["an angle include not in the tree", "a computed include", "a name made by ##"])
def test_what_may_hide_a_declaration_leaves_the_call_not_checked(change):
    """Found by review: the release may declare the helper where the check cannot see (TE includes
    `<transformer_engine/gemm.h>` from `common/include/`, a folder no file of `pytorch/` is under)."""
    old = SCALE.replace(*change)
    new = with_call("total = Round(total);", old)
    tree = {k: v for k, v in TREE.items() if k != "include/lib/api.h"} | {PATH: old}
    assert unresolved_calls(PATH, old, new, read(tree), PRE_IMAGE) == ([], ["Round"])
