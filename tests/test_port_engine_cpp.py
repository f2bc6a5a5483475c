"""The port engine on C/C++ files: scopes read with tree-sitter (engines/cpp.py)
and git's section header (`@@ ... @@ void Worker::Run() {`, qualifiers
included), so a hunk whose context drifted is placed in its own function and
never in a sibling with the same body. Diffs made by git from our own text;
each target is a release-like change of it."""
from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from fixmono.apply.contract import apply_change
from fixmono.engines.port import CppScopes, DiffTransform, blob_id, cpp_name, diff_fix
from fixmono.model.errors import TransformFailed
from fixmono.model.outcome import Status
from fixmono.model.patchfile import parse_patch
from fixmono.testing import hunks_between

PATH = "xla/service/worker.cc"
BASE = """#include "xla/service/worker.h"

namespace xla {

void Helper::Run() {
  int budget = Budget();
  Prepare(budget);
  Check(budget);
  Log(budget);
  Work(budget);
  Finish(budget);
}

void Worker::Run() {
  int budget = Budget();
  Prepare(budget);
  Check(budget);
  Log(budget);
  Work(budget);
  Finish(budget);
}

}  // namespace xla
"""


def fixed(text: str) -> str:
    """The fix: Worker::Run works on a clamped budget (Helper::Run is left alone)."""
    head, worker = text.split("void Worker::Run() {\n", 1)
    return head + "void Worker::Run() {\n" + worker.replace("  Work(budget);\n", "  Work(std::max(budget, 0));\n", 1)


def git_diff(tmp_path: Path, before: str, after: str) -> str:
    repo = tmp_path / "made"
    (repo / Path(PATH).parent).mkdir(parents=True)
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True, check=True)  # noqa: E731
    run("init", "-q")
    (repo / PATH).write_text(before)
    run("add", "-A")
    run("-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qm", "base")
    (repo / PATH).write_text(after)
    return run("diff").stdout


def git_apply(tmp_path: Path, diff: str, text: str) -> str | None:
    where = tmp_path / "apply"
    (where / Path(PATH).parent).mkdir(parents=True, exist_ok=True)
    (where / PATH).write_text(text)
    proc = subprocess.run(["git", "apply", "-"], cwd=where, input=diff, capture_output=True, text=True)
    return (where / PATH).read_text() if proc.returncode == 0 else None


MOVED = BASE.replace("namespace xla {\n", "namespace xla {\n\nint Budget() {\n  return 4;\n}\n")
# Worker::Run's first context line changed; Helper::Run's identical lines did not: `git apply` (offset)
# and `patch` put the change into Helper::Run, the engine into Worker::Run (its header names it)
DRIFTED = BASE.replace("void Worker::Run() {\n  int budget = Budget();\n  Prepare(budget);\n",
                       "void Worker::Run() {\n  int budget = Budget(/*floor=*/1);\n  Prepare(budget, true);\n")
TARGETS = {  # name: (target text, the status, the text the engine must give or None)
    "as made": (BASE, "applied", fixed(BASE)),
    "a function above": (MOVED, "applied", fixed(MOVED)),
    "its context drifted, the sibling's did not": (DRIFTED, "applied", fixed(DRIFTED)),
    "already fixed": (fixed(MOVED), "already-applied", None),
    "renamed, its lines in the sibling": (BASE.replace("Worker::Run", "Worker::Start"), "failed", None),
    "the function is not there": (BASE.split("void Worker::Run")[0].replace("Work(budget)", "Work(budget * 2)")
                                  + "}  // namespace xla\n", "not-applicable", None),
}


@pytest.fixture(scope="module")
def fix(tmp_path_factory):
    diff = git_diff(tmp_path_factory.mktemp("diff"), BASE, fixed(BASE))
    assert "@@ void Worker::Run() {" in diff  # git's default section header for a .cc file
    return diff, diff_fix(parse_patch(diff, "worker.patch"), "xla", "worker")


@pytest.mark.parametrize("name", TARGETS)
def test_a_cpp_hunk_goes_into_its_own_function(tmp_path, fix, name):
    diff, port = fix
    text, status, want = TARGETS[name]
    (change,) = port.changes
    outcome = apply_change(change, text)
    assert outcome.status.value == status, outcome.detail
    assert outcome.new_text == want
    by_git = git_apply(tmp_path, diff, text)
    if name == "its context drifted, the sibling's did not":  # git apply finds the sibling's lines, unchanged
        assert by_git is not None and by_git.split("void Worker::Run")[0].count("std::max") == 1
    elif by_git is not None and status == "applied":
        assert outcome.new_text == by_git  # where git apply is right, the same bytes


def test_the_scope_of_a_cpp_line():
    scopes = CppScopes(BASE)
    line = BASE.splitlines().index("  Work(budget);", 10) + 1
    assert scopes.chain(line) == ["xla", "Worker", "Run"]
    assert cpp_name("absl::Status Foo<T>::Bar(int x) {") == ["Foo", "Bar"]
    assert cpp_name("class Worker : public Base {") == ["Worker"] and cpp_name("}  // namespace xla") == []


def test_an_edit_that_breaks_the_parse_is_refused(tmp_path, fix):
    diff = git_diff(tmp_path, BASE, BASE.replace("  Finish(budget);\n}\n\n}", "  Finish(budget);\n\n}", 1))
    port = diff_fix(parse_patch(diff, "broken.patch"), "xla", "broken")
    outcome = apply_change(port.changes[0], BASE)
    assert outcome.status is Status.FAILED and "parse errors" in outcome.detail


def test_a_hunk_that_shows_its_own_function_line(tmp_path):
    """Short functions: the hunk's context holds `void Worker::Run() {` and git's
    header names the function above it (Helper::Run); the engine takes the
    function the hunk shows, and places it there when its neighbour drifted."""
    short = BASE.replace("  Check(budget);\n  Log(budget);\n", "")
    diff = git_diff(tmp_path, short, fixed(short))
    assert "@@ void Helper::Run() {" in diff
    port = diff_fix(parse_patch(diff, "short.patch"), "xla", "short")
    drifted = short.replace("void Worker::Run() {\n  int budget = Budget();\n",
                            "void Worker::Run() {\n  int budget = Budget(/*floor=*/1);\n")
    outcome = apply_change(port.changes[0], drifted)
    assert outcome.status is Status.APPLIED and outcome.new_text == fixed(drifted), outcome.detail


@pytest.mark.parametrize("form, status", [
    ("  Work(\n      std::max(budget, 0));\n", "already-applied"),  # the fixed statement over two lines
    ("  Work(std::max(\n      budget,\n      0));\n", "already-applied"),
    ("  Work(\n      std::max(budget, 1));\n", "failed"),  # over two lines, and other code
])
def test_a_cpp_fix_present_on_other_line_breaks_is_already_applied(tmp_path, fix, form, status):
    """Issue 40 part 4: the fix upstream in a reflowed form (clang-format put the
    statement over two lines) is found as the same tokens: already-applied, not failed."""
    _, port = fix
    (change,) = port.changes
    head, worker = BASE.split("void Worker::Run() {\n", 1)
    release = head + "void Worker::Run() {\n" + worker.replace("  Work(budget);\n", form, 1)
    outcome = apply_change(change, release)
    assert outcome.status.value == status, outcome.detail


def test_a_cpp_comment_line_the_hunk_removes_is_removed_where_the_context_drifted(tmp_path):
    """Issue 40 part 1 on the C/C++ path: a `//` line the hunk removes is gone from
    the result when the hunk is placed on normalised lines, or the hunk fails."""
    before = BASE.replace("void Worker::Run() {\n  int budget = Budget();\n",
                          "void Worker::Run() {\n  int budget = Budget();\n  // TODO: clamp the budget\n")
    after = before.replace("  // TODO: clamp the budget\n", "")
    diff = git_diff(tmp_path, before, after)
    (change,) = diff_fix(parse_patch(diff, "todo.patch"), "xla", "todo").changes
    drifted = before.replace("  Prepare(budget);\n  Check(budget);\n", "  Prepare(budget);  // tuned\n  Check(budget);\n", 2)
    outcome = apply_change(change, drifted)
    assert outcome.status is Status.APPLIED and "TODO" not in outcome.new_text, outcome.detail
    assert outcome.new_text == drifted.replace("  // TODO: clamp the budget\n", "")
    other = drifted.replace("  // TODO: clamp the budget\n", "  // TODO: log the budget\n")
    outcome = apply_change(change, other)  # another comment in its place: not the diff's line, not its post-image
    assert outcome.status is Status.FAILED, outcome.detail


# --- what real C/C++ diffs carry (found on TransformerEngine's backports: `git apply` took them, the engine
# refused): a kernel launch tree-sitter-cpp does not read, a header line git names by an attribute macro,
# a function whose body tree-sitter cannot read whole. Our own text, shaped like those files.

KERNELS = """#include "kernels.h"

template <typename T>
__global__ void __launch_bounds__(256) scale_kernel(const T* in, T* out, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = in[i] * s;
  }
}

void launch_scale(const float* in, float* out, float s, int n, cudaStream_t stream) {
  dim3 grid((n + 255) / 256);
  cudaLaunchConfig_t cfg = {grid, 256, 0, stream, NULL, 0};
  cudaLaunchKernelEx(&cfg, scale_kernel<float>, in, out, s, n);
  CHECK_CUDA(cudaGetLastError());
}
"""
LAUNCHED = KERNELS.replace(
    "  cudaLaunchConfig_t cfg = {grid, 256, 0, stream, NULL, 0};\n"
    "  cudaLaunchKernelEx(&cfg, scale_kernel<float>, in, out, s, n);\n",
    "  scale_kernel<float><<<grid, 256, 0, stream>>>(in, out, s, n);\n").replace(
    "    out[i] = in[i] * s;\n", "    out[i] = static_cast<T>(in[i] * s);\n")

DISPATCHED = """#include "dispatch.h"

void Reduce(const Tensor& input, Tensor* output, int splits) {
  Prepare(input);
  DISPATCH_TYPE(
      input.dtype, T, for (int i = 0; i < splits; i++) {
        const char* mode = std::getenv("REDUCE_MODE");
        if (mode != nullptr && mode[0] == '1') {
          ReduceAtomic<T>(input, output, i);
        } else if (mode != nullptr && mode[0] == '2') {
          ReduceMultiAtomic<T>(input, output, i);
          break;
        } else {
          ReducePlain<T>(input, output, i);
        }
        Advance(output, i);
        Sync(output);
        Mark(output, i);
      });
  Finish(output);
}
"""


def transform_of(pre: str, post: str, path: str) -> DiffTransform:
    return DiffTransform(path, hunks_between(pre, post, path), blob_id(pre)[:9])


def test_a_diff_onto_its_own_pre_image_applies_at_its_lines():
    """The file is the diff's pre-image (its blob id): every hunk at its lines, as `git apply` puts it, with
    no scope to confirm (a header git wrote from another line of the file names none here)."""
    post = KERNELS.replace("  CHECK_CUDA(cudaGetLastError());\n", "  CHECK_CUDA(cudaPeekAtLastError());\n")
    transform = transform_of(KERNELS, post, "kernels.cu")
    transform.hunks = tuple(dataclasses.replace(h, header="void Reduce(const Tensor& input, Tensor* output)")
                            for h in transform.hunks)  # a function this file lacks
    done = transform.rewrite(KERNELS)
    assert done.source == post and done.evidence.startswith("the file is the diff's pre-image")


@pytest.mark.parametrize("pre_image", [None, KERNELS], ids=["hunks only", "with the pre-image"])
def test_cuda_launches_and_qualifiers_are_read_as_cpp(pre_image):
    """`__global__ void __launch_bounds__(256) scale_kernel(...)` is the function scale_kernel (the header
    git writes for its hunks names no `__launch_bounds__` scope), and a `<<<grid, ...>>>` launch the diff
    adds is a call (tree-sitter-cpp does not read CUDA: masked like macros), onto a release that moved."""
    assert cpp_name("__global__ void __launch_bounds__(256) scale_kernel(const T* in, T* out") == ["scale_kernel"]
    assert CppScopes(LAUNCHED).errors == 0
    release = KERNELS.replace('#include "kernels.h"\n', '#include "kernels.h"\n#include "log.h"\n')
    done = transform_of(KERNELS, LAUNCHED, "kernels.cu").rewrite(release, pre_image=pre_image)
    assert done.source == LAUNCHED.replace('#include "kernels.h"\n', '#include "kernels.h"\n#include "log.h"\n')


@pytest.mark.parametrize("release", [DISPATCHED, DISPATCHED.replace('#include "dispatch.h"\n',
                                                                    '#include "dispatch.h"\n#include "env.h"\n')],
                         ids=["the pre-image", "lines added above"])
def test_a_file_tree_sitter_cannot_read_whole_is_ported_by_its_text(release):
    """A function whose body is a macro's argument (tree-sitter reads no statement of it): its hunks are
    placed by their text alone, exactly and once, as `git apply` places them; not refused."""
    post = DISPATCHED.replace("        Sync(output);\n", "        Sync(output, /*blocking=*/true);\n")
    done = transform_of(DISPATCHED, post, "reduce.cc").rewrite(release)
    assert done.source == release.replace("        Sync(output);\n", "        Sync(output, /*blocking=*/true);\n")


def test_a_file_tree_sitter_cannot_read_whole_gets_no_guess():
    """Where its text is not in the file exactly, such a file is refused (no scopes to confirm a guess)."""
    post = DISPATCHED.replace("        Sync(output);\n", "        Sync(output, /*blocking=*/true);\n")
    release = DISPATCHED.replace("        Advance(output, i);\n", "        Advance(output, i + 1);\n")
    with pytest.raises(Exception):
        transform_of(DISPATCHED, post, "reduce.cc").rewrite(release)


HEADER = """#ifndef LIB_COMM_H_
#define LIB_COMM_H_

void reduce_bf16(void *input, void *output, int num_inputs, int input_size, cudaStream_t stream);

void send_all(const int src, const size_t src_offset, const int dst, const size_t dst_offset,
              const size_t bytes, int tp_rank,
              int tp_size, communicator *comm, cudaStream_t stream);

void recv_all(const int src, const size_t src_offset, const int dst, const size_t dst_offset,
              const size_t bytes, int tp_rank,
              int tp_size, communicator *comm, cudaStream_t stream);

#endif  // LIB_COMM_H_
"""


def test_prototypes_over_lines_in_a_header_are_no_scope():
    """A header of prototypes (TransformerEngine's userbuffers.h shape): the hunk shows `void send_all(...`
    above its change; it is no function defined here and encloses nothing. Onto a release with a line added
    above, the hunk goes where its text is, as `git apply` puts it."""
    post = HEADER.replace("              int tp_size, communicator *comm", "              int tp_size, int world_rank, "
                          "communicator *comm")
    transform = transform_of(HEADER, post, "lib/comm.h")
    release = HEADER.replace("#define LIB_COMM_H_\n", "#define LIB_COMM_H_\n#include <cstddef>\n")
    transform.old_blob = None  # not known to be the pre-image: placed by the hunks' own lines
    done = transform.rewrite(release)
    assert done.source == post.replace("#define LIB_COMM_H_\n", "#define LIB_COMM_H_\n#include <cstddef>\n")


MOVED_AWAY = """#include "ops.h"

static void Foo(int a);

static void Bar(int a)
{
  int b = a + 1;
  Log(b);
  Check(b);
  Setup();
  Run(a);
  Finish();
}

static void Foo(int a)
{
  int b = a * 2;
  Log(b);
  Check(b);
  Setup();
  Run(a);
  Finish();
}
"""


@pytest.mark.parametrize("pre_image", [None, MOVED_AWAY], ids=["hunks only", "with the pre-image"])
def test_a_fix_of_a_function_moved_away_is_never_put_into_its_look_alike(tmp_path, pre_image):
    """Foo's definition moved to another file in the release, its prototype stayed, and Bar's body has the
    lines of Foo's the hunk shows: git's header `static void Foo(int a)` begins the prototype's line, but
    names Foo, which is not here. Refused, never placed in Bar (found by a review: a prefix match of the
    header once let it through)."""
    at = MOVED_AWAY.rindex("  Run(a);\n")
    post = MOVED_AWAY[:at] + "  Run(a, kSafe);\n" + MOVED_AWAY[at + len("  Run(a);\n"):]
    diff = git_diff(tmp_path, MOVED_AWAY, post)
    assert "@@ static void Foo(int a)" in diff
    (hunk_file,) = parse_patch(diff, "foo.patch").files
    release = MOVED_AWAY[:MOVED_AWAY.index("static void Foo(int a)\n{")]
    with pytest.raises(TransformFailed):
        DiffTransform(PATH, hunk_file.hunks).rewrite(release, pre_image=pre_image)


@pytest.mark.parametrize("path", ["f.cc", "f.py"])
def test_hunks_listed_out_of_order_go_each_to_its_own_lines(path):
    """A hand-edited diff listing a later hunk first (GNU patch takes it; found by review: an insertion
    landed 8 lines off on the diff's own pre-image); two hunks over the same lines are refused."""
    source = "".join(f"x{n} = {n}\n" for n in range(17)) if path.endswith(".py") else "".join(
        f"  x{n}++;\n" for n in range(17))
    lines = source.splitlines(True)
    low = "".join(f" {line}" for line in lines[1:3])
    high = "".join(f" {line}" for line in lines[9:11])
    add = "print(1)\n" if path.endswith(".py") else "  C();\n"
    diff = (f"--- a/{path}\n+++ b/{path}\n@@ -10,2 +10,3 @@\n{high[:high.index(chr(10)) + 1]}+{add}"
            f"{high[high.index(chr(10)) + 1:]}@@ -2,2 +2,3 @@\n{low[:low.index(chr(10)) + 1]}+{add}"
            f"{low[low.index(chr(10)) + 1:]}")
    hunks = parse_patch(diff, "x.patch").files[0].hunks
    done = DiffTransform(path, hunks, blob_id(source)[:9]).rewrite(source)
    assert done.source == "".join(lines[:2] + [add] + lines[2:10] + [add] + lines[10:])
    overlapping = parse_patch(diff.replace("@@ -2,2 +2,3 @@", "@@ -10,2 +10,3 @@").replace(
        low, high), "y.patch").files[0].hunks
    with pytest.raises(TransformFailed, match="edit the same lines"):
        DiffTransform(path, overlapping).rewrite(source)
