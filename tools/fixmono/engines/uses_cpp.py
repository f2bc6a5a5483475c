"""The uses check (uses.py) for C/C++, best effort: a function call a diff adds
(`Foo(...)`, `ns::Foo(...)`, `Foo<T>(...)`; not a member call, whose class is
not known here) must be named somewhere the file can see in the target tree:
the file itself, or a header it includes (found beside the includer, from the
tree's root, or from a folder above it or its `include/` folder; their
includes in turn). Names are matched as words, so a header that names it
anywhere counts: a miss is reported only where no text of the file or its
headers names it at all. Such a call is then
- certainly missing where the diff's pre-image defines or declares the name
  itself (a function of upstream's file that this release's file lacks) and
  nothing read could hide it: every include found in the tree (the standard
  library's and the GPU vendors' SDK headers aside), none computed
  (`#include MACRO`), no name made by `##`: the port fails, naming it;
- else not checked (it may come from a header the tree does not hold, such as
  <cuda_runtime.h> or a library's): said beside the result, never a failure.
The tree is read through a callback, never built or compiled."""
from __future__ import annotations

import posixpath
import re
from typing import Callable

from fixmono.engines.cpp import CppDocument
from fixmono.model.patchfile import new_line_numbers

Read = Callable[[str], "bytes | None"]
WORD = re.compile(r"[A-Za-z_]\w*")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
COMPUTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[^<"\s]', re.M)  # `#include SOME_MACRO`
# the standard library's headers: not in a project's tree, and no name a diff's pre-image defines comes from them
STANDARD = frozenset("""algorithm any array atomic barrier bit bitset cassert ccomplex cctype cerrno cfenv cfloat
    charconv chrono cinttypes ciso646 climits clocale cmath codecvt compare complex concepts condition_variable
    coroutine csetjmp csignal cstdalign cstdarg cstdbool cstddef cstdint cstdio cstdlib cstring ctgmath ctime
    cuchar cwchar cwctype deque exception execution expected filesystem format forward_list fstream functional
    future initializer_list iomanip ios iosfwd iostream istream iterator latch limits list locale map
    memory memory_resource mutex new numbers numeric optional ostream print queue random ranges ratio regex
    scoped_allocator semaphore set shared_mutex source_location span sstream stack stdexcept stop_token
    streambuf string string_view syncstream system_error thread tuple type_traits typeindex typeinfo
    unordered_map unordered_set utility valarray variant vector version assert.h complex.h ctype.h errno.h
    fenv.h float.h inttypes.h iso646.h limits.h locale.h math.h setjmp.h signal.h stdalign.h stdarg.h
    stdatomic.h stdbool.h stddef.h stdint.h stdio.h stdlib.h string.h tgmath.h threads.h time.h uchar.h
    wchar.h wctype.h""".split())
# GPU vendors' SDK headers (CUDA, its libraries, ROCm): never in a project's tree, and they declare their own
# names (cuda*, cublas*, hip*), never a function a diff's pre-image defines for itself
VENDOR = re.compile(r"(cuda|cublas|cudnn|cufft|curand|cusparse|cusolver|nccl|nvrtc|nvToolsExt|nvml|hip|rocblas|"
                    r"hipblas|rccl|miopen)\w*\.h|(cuda|cub|thrust|nvtx3|hip|miopen|rocprim|hipcub)/.*")
MAX_HEADERS = 400  # headers read for one file at most (a miss past them is not checked)


def unresolved_calls(path: str, old_text: str, new_text: str, read: Read,
                     pre_image: str | None = None) -> tuple[list[str], list[str]]:
    """(the calls `new_text` adds to `old_text` that the tree certainly lacks, one line each; the names of
    those it could not check)."""
    rows = new_line_numbers(old_text, new_text)
    if not rows:
        return [], []
    doc = CppDocument(new_text)
    calls = []  # (name, line, offset of the name): a name the diff itself defines is written elsewhere too
    for node in doc.nodes("call_expression"):
        line = node.start_point[0] + 1
        if line in rows and (name := callee(node)) is not None and \
                not doc.text(node.child_by_field_name("function")).startswith("std::"):  # the standard library's
            calls.append((doc.text(name), line, name.start_byte))
    calls.sort(key=lambda call: call[2])
    if not calls:
        return [], []
    callee_at = {at for _, _, at in calls}
    seen = {m.group().decode() for m in re.finditer(rb"[A-Za-z_]\w*", doc.src) if m.start() not in callee_at}
    wanted = {name for name, _, _ in calls} - seen
    if not wanted:
        return [], []
    unfound = headers_naming(path, new_text, read, wanted, seen)
    wanted -= seen
    if not wanted:
        return [], []
    upstream = declared_in(pre_image) if pre_image is not None else set()
    misses, unchecked = [], []
    for name, line, _ in calls:
        if name not in wanted:
            continue
        if name in upstream and not unfound:  # every header read, none that may hide it
            misses.append(f"the change calls `{name}` (line {line}), which neither this file nor a header it "
                          "includes names in this release (the diff's pre-image defines it)")
        elif name not in unchecked:
            unchecked.append(name)
    return list(dict.fromkeys(misses)), unchecked


def callee(call):
    """The name node a call calls where it is a plain, qualified or template function (`ns::Foo<T>` -> Foo)."""
    node = call.child_by_field_name("function")
    while node is not None and node.type in ("qualified_identifier", "template_function"):
        node = node.child_by_field_name("name")
    return node if node is not None and node.type == "identifier" else None


def declarator_name(doc: CppDocument, node) -> str | None:
    target = node.child_by_field_name("name") if node.type.startswith("preproc") else \
        node.child_by_field_name("declarator")
    words = WORD.findall(doc.text(target)) if target is not None else []
    return words[-1] if words else None


def declared_in(text: str) -> set[str]:
    """The names a C/C++ text defines or declares as functions or macros."""
    doc = CppDocument(text)
    return {name for node in doc.nodes("function_declarator", "preproc_def", "preproc_function_def")
            if (name := declarator_name(doc, node))}


def headers_naming(path: str, text: str, read: Read, wanted: set[str], seen: set[str]) -> list[str]:
    """Read the headers `text` includes (and theirs), adding the words they hold to `seen`, until every name
    of `wanted` is seen; what may declare a name unseen: each include not found in the tree (but the
    standard library's), a computed include, a name made by `##`, the headers read cut at MAX_HEADERS."""
    todo, done, unfound = [(path, text)], {path}, []
    while todo and not wanted <= seen:
        includer, source = todo.pop(0)
        if COMPUTED_INCLUDE.search(source):
            unfound.append(f"a computed #include in {includer}")
        if "##" in source:
            unfound.append(f"a name made by ## in {includer}")
        for kind, name in INCLUDE.findall(source):
            places = candidates(includer, name, kind == '"')
            if any(place in done for place in places):
                continue  # read already
            found = first_readable(read, places)
            if found is None or found is UNREADABLE:
                unfound += [] if found is None and kind == "<" and (name in STANDARD or VENDOR.fullmatch(name)) \
                    else [name]
                continue
            if len(done) >= MAX_HEADERS:
                return unfound + [f"more than {MAX_HEADERS} headers"]
            done.add(found[0])
            header = found[1].decode("utf-8", "replace")
            seen.update(WORD.findall(header))
            todo.append((found[0], header))
    return unfound


UNREADABLE = object()


def first_readable(read: Read, places: list[str]):
    """(place, bytes) of the first of `places` the tree has; None where it has none; UNREADABLE where the
    first it has cannot be read (a symlink, over the size cap): what that header names is not known."""
    for place in places:
        try:
            data = read(place)
        except Exception:  # noqa: BLE001 -- the reader's refusal, whatever its kind: not known
            return UNREADABLE
        if data is not None:
            return place, data
    return None


def candidates(includer: str, name: str, quoted: bool) -> list[str]:
    """Where an include may be in the tree: beside its includer (quoted), from the root, then from each folder
    above the includer and its `include/` folder, nearest first."""
    out = [posixpath.join(posixpath.dirname(includer), name)] if quoted else []
    folder = posixpath.dirname(includer)
    while folder:
        out += [posixpath.join(folder, name), posixpath.join(folder, "include", name)]
        folder = posixpath.dirname(folder)
    out += [name, posixpath.join("include", name)]
    found = (posixpath.normpath(c) for c in dict.fromkeys(out))
    return [c for c in found if not c.startswith(("..", "/"))]  # never a file outside the tree (`/dev/zero`)
