"""ROCm/xla#777 as C++ syntax-tree transformations (fixmono/engines/cpp.py).

rocm_dnn.cc (6 sites):
  1. a process-wide `absl::Mutex` right after `class MIOpenAccess {...};`
  2-5. a lock on it in MIOpenSupport::PopulateMIOpenFindDb (first statement: the
     Find calls), MIOpenSupport::GetMIOpenConvolveAlgorithmsImmediateMode (first
     statement: the GetSolution calls, which the PR left unlocked and which
     ConvolveRunnerFromDesc's algo_id==0 path runs), and before the
     `GetHandle` statement of MIOpenSupport::ConvolveRunnerFromDesc (the
     CompileSolution switch) and RocmFusedConvRunner::Create (the fusion-plan
     compile). Each lock must cover the MIOpen calls named in LOCKS, in its block.
  6. PopulateMIOpenFindDb's `LOG(FATAL)` on a failed scratch allocation becomes
     `return absl::ResourceExhaustedError(...)`.
The global lock is always taken before the per-device handle lock, and no
locked function calls another, so the lock order is fixed (no deadlock).

autotuner miopen.cc (MIOpenBackend::GetSupportedConfigs, 3 sites + include):
  the `if (do_not_autotune_)` check moves before the first autotuning call,
  and each `return Get*ConvolutionCustomCallConfigs(...)` falls back to the
  default config (the statements of that same check, copied) when it fails.

Matched by function and call names, never by line numbers, so `wrap::`
prefixes, TF_/ABSL_ macro renames and reformatting do not matter.
"""
from __future__ import annotations

import re

from fixmono.engines.cpp import CppDocument, CppTransform, Edit, Plan, enclosing_statement, indent_at, line_start, walk

MUTEX = "miopen_global_mutex"
ACCEPTED_MUTEX = re.compile(r"absl::Mutex\s+(\w*miopen\w*global\w*|\w*global\w*miopen\w*)\s*\(\s*absl::kConstInit\s*\)")
MUTEX_DECL = """

// Serialises MIOpen's Find, GetSolution, CompileSolution and CompileFusionPlan
// across all GPUs of the process. MIOpenAccess only locks per device handle,
// and MIOpen's kernel cache is not safe when devices compile concurrently
// (segfault in miopen::kernels() with 8 GPUs, ROCm/xla#777).
ABSL_CONST_INIT static absl::Mutex {name}(absl::kConstInit);"""

# function -> (where the lock goes, MIOpen calls it must cover)
LOCKS = {
    "MIOpenSupport::PopulateMIOpenFindDb": ("start", r"miopenFindConvolution\w*Algorithm"),
    "MIOpenSupport::GetMIOpenConvolveAlgorithmsImmediateMode": ("start", r"miopenConvolution\w*GetSolution\b"),
    "MIOpenSupport::ConvolveRunnerFromDesc": ("GetHandle", r"miopenConvolution\w*CompileSolution"),
    "RocmFusedConvRunner::Create": ("GetHandle", r"ScopedFusionPlanConvolutionBiasActivation::Create"),
}
UNLOCKED_FUSION_PLANS = re.compile(r"ScopedFusionPlanBatchNormActivation\w*")


def lock_statement(doc: CppDocument, mutex: str) -> str:
    text = doc.src.decode("utf-8", "replace")
    by_reference = re.search(r"absl::MutexLock\s+\w+\s*[({]\s*[A-Za-z_][\w.]*\s*[)}]", text)
    return f"absl::MutexLock global_lock({'' if by_reference else '&'}{mutex});"


def callee_matches(doc: CppDocument, node, pattern: str) -> list:
    rx = re.compile(pattern)
    return [c for c in walk(node) if c.type == "call_expression"
            and rx.search(doc.text(c.child_by_field_name("function")).replace(" ", ""))]


class RocmDnnLocks(CppTransform):
    def __init__(self):
        super().__init__("serialise MIOpen compilation across GPUs with a process-wide mutex",
                         "class MIOpenAccess")

    def plan(self, doc: CppDocument) -> Plan:
        plan = Plan()
        access = doc.classes("MIOpenAccess")
        if not access:
            return plan
        plan.anchors = 1
        text = doc.src.decode("utf-8", "replace")
        existing = ACCEPTED_MUTEX.search(text)
        mutex = existing.group(1) if existing else MUTEX
        if existing:
            plan.found("the process-wide mutex")
        else:
            semicolon = access[0].next_sibling
            if semicolon is None or semicolon.type != ";":
                plan.problems.append("class MIOpenAccess is not followed by ';'")
                return plan
            plan.change(Edit(semicolon.end_byte, semicolon.end_byte, MUTEX_DECL.format(name=mutex)),
                        what="the process-wide mutex")
        lock = lock_statement(doc, mutex)
        regions = {}
        for name, (where, covers) in LOCKS.items():
            region = self._lock(doc, plan, name, where, covers, mutex, lock)
            if region:
                regions[name] = region
        self._check_no_nested_locking(doc, plan, regions)
        self._scratch_error(doc, plan)
        self._check_unlocked_fusion_plans(doc, plan)
        return plan

    def _lock(self, doc, plan, name, where, covers, mutex, lock):
        """Lock `name`; returns (where the lock starts, its block), or None."""
        functions = doc.functions(name)
        if len(functions) != 1:
            plan.problems.append(f"expected one definition of {name}, found {len(functions)}")
            return
        body = functions[0].child_by_field_name("body")
        held = [d for d in walk(body) if d.type == "declaration" and
                re.match(rf"absl::MutexLock\s+\w+\s*[({{]\s*&?\s*{mutex}\s*[)}}]", doc.text(d))]
        short = name.removeprefix("MIOpenSupport::")
        if held:
            plan.found(f"the lock in {short}")
            return held[0].start_byte, held[0].parent
        if where == "start":
            anchor = body.named_children[0] if body.named_children else None
        else:
            calls = doc.calls(body, where)
            anchor = enclosing_statement(calls[0]) if calls else None
        if anchor is None:
            plan.problems.append(f"{name}: no {'statement' if where == 'start' else where + ' call'} to lock before")
            return
        block = anchor.parent
        covered = callee_matches(doc, block, covers)
        if not covered or any(c.start_byte < anchor.start_byte for c in covered):
            plan.problems.append(f"{name}: a lock before {doc.text(anchor).splitlines()[0]!r} would not "
                                 f"cover every call matching {covers}")
            return
        indent = indent_at(doc.src, anchor.start_byte)
        at = line_start(doc.src, anchor.start_byte)
        plan.change(Edit(at, at, f"{indent}{lock}\n"), what=f"the lock in {short}")
        return anchor.start_byte, block

    def _check_no_nested_locking(self, doc, plan, regions) -> None:
        """absl::Mutex is not reentrant: no locked region may call another
        function that takes the lock (that would deadlock on first use)."""
        for name, (start, block) in regions.items():
            for other in regions:
                callee = other.split("::", 1)[1] if other.startswith("MIOpenSupport::") else other
                inside = [c for c in doc.calls(block, callee) if c.start_byte > start]
                if other != name and inside:
                    plan.problems.append(f"{name} would call {other} with the global lock held "
                                         f"(line {inside[0].start_point[0] + 1}): deadlock")

    def _scratch_error(self, doc, plan) -> None:
        functions = doc.functions("MIOpenSupport::PopulateMIOpenFindDb")
        if len(functions) != 1:
            return  # none or several: _lock reported it as a problem
        function = functions[0]
        fatal = [s for s in walk(function) if s.type == "expression_statement"
                 and doc.text(s).startswith("LOG(FATAL)") and "scratch memory" in doc.text(s)]
        if not fatal:
            if "ResourceExhaustedError" in doc.text(function):
                plan.found("an error, not LOG(FATAL), on a failed scratch allocation")
            else:
                plan.problems.append("PopulateMIOpenFindDb: neither the scratch-allocation LOG(FATAL) "
                                     "nor a ResourceExhaustedError")
            return
        log = fatal[0]
        following = log.next_named_sibling
        status_var = re.search(r"(\w+)\.status\(\)", doc.text(log))
        size_call = doc.calls(function, "AllocateBytes")
        if following is None or following.type != "return_statement" or not status_var or not size_call:
            plan.problems.append("PopulateMIOpenFindDb: the scratch-allocation failure branch has an "
                                 "unexpected shape")
            return
        size = doc.text(size_call[0].child_by_field_name("arguments"))[1:-1].strip()
        indent = indent_at(doc.src, log.start_byte)
        text = (f"return absl::ResourceExhaustedError(absl::StrCat(\n"
                f"{indent}    \"Failed to allocate scratch memory for MIOpen autotuning (\",\n"
                f"{indent}    {size}, \" bytes): \", {status_var.group(1)}.status().message()));")
        plan.change(Edit(log.start_byte, following.end_byte, text),
                    what="an error, not LOG(FATAL), on a failed scratch allocation")

    def _check_unlocked_fusion_plans(self, doc, plan) -> None:
        """The batch-norm fusion plans also call miopenCompileFusionPlan, in their
        constructors. They are dead code in the versions checked; if a version
        starts using them, stop rather than leave a compile path unlocked."""
        for node in walk(doc.root):
            if node.type == "declaration" and UNLOCKED_FUSION_PLANS.match(doc.text(node)):
                plan.problems.append(f"line {node.start_point[0] + 1} creates a batch-norm fusion plan, "
                                     "whose CompileFusionPlan this fix does not lock; review it")
                return


FALLBACK_CALLS = ("GetFusedConvolutionCustomCallConfigs", "GetConvolutionCustomCallConfigs")
LOG_INCLUDE = "absl/log/log.h"


class AutotunerFallback(CppTransform):
    def __init__(self):
        super().__init__("check do_not_autotune_ first and fall back to the default config",
                         "MIOpenBackend::GetSupportedConfigs")

    def plan(self, doc: CppDocument) -> Plan:
        plan = Plan()
        functions = doc.functions("MIOpenBackend::GetSupportedConfigs")
        if not functions:
            return plan
        plan.anchors = 1
        if len(functions) > 1:
            plan.problems.append(f"{len(functions)} definitions of MIOpenBackend::GetSupportedConfigs")
            return plan
        body = functions[0].child_by_field_name("body")
        guard = [n for n in walk(body) if n.type == "if_statement"
                 and doc.text(n.child_by_field_name("condition")).replace(" ", "") == "(do_not_autotune_)"]
        returns = [r for r in walk(body) if r.type == "return_statement"
                   and any(doc.text(r).replace(" ", "").startswith(f"return{c}(") for c in FALLBACK_CALLS)]
        calls = [c for c in walk(body) if c.type == "call_expression"
                 and doc.text(c.child_by_field_name("function")) in FALLBACK_CALLS]
        if len(guard) != 1 or not calls:
            plan.problems.append(f"GetSupportedConfigs: expected one `if (do_not_autotune_)` and autotuning "
                                 f"calls, found {len(guard)} and {len(calls)}")
            return plan
        guard = guard[0]
        self._move_guard(doc, plan, guard, min(calls, key=lambda c: c.start_byte))
        defaults = [doc.text(s) for s in guard.child_by_field_name("consequence").named_children]
        for ret in returns:
            self._fallback(doc, plan, ret, defaults)
        if len(returns) < 2:  # the other call(s) already have their result checked
            plan.found("a default-config fallback after each autotuning call", sites=2 - len(returns))
        self._include(doc, plan)
        return plan

    def _move_guard(self, doc, plan, guard, first_call) -> None:
        if guard.start_byte < first_call.start_byte:
            plan.found("the do_not_autotune_ check before autotuning")
            return
        first = first_call
        while first.parent is not None and first.parent.id != guard.parent.id:
            first = first.parent
        if first.parent is None:
            plan.problems.append("do_not_autotune_ check and the autotuning call are in different blocks")
            return
        guard_start = line_start(doc.src, guard.start_byte)
        guard_end = doc.src.index(b"\n", guard.end_byte) + 1
        text = doc.src[guard_start:guard_end].decode()
        blank_after = re.match(rb"\r?\n", doc.src[guard_end:guard_end + 2])  # CRLF files too
        at = line_start(doc.src, first.start_byte)
        plan.change(Edit(at, at, text + "\n"),
                    Edit(guard_start, guard_end + (blank_after.end() if blank_after else 0), ""),
                    what="the do_not_autotune_ check before autotuning")

    def _fallback(self, doc, plan, ret, defaults) -> None:
        if ret.parent.type != "compound_statement":
            plan.problems.append(f"line {ret.start_point[0] + 1}: return without braces around it")
            return
        call = ret.named_children[0]
        name = doc.text(call.child_by_field_name("function"))
        var = "fused_configs" if "Fused" in name else "conv_configs"
        indent = indent_at(doc.src, ret.start_byte)
        inner = indent + "  "
        lines = [f"auto {var} = {reflow_call(doc, call, indent, f'auto {var} = ')};",
                 f"{indent}if (!{var}.ok()) {{",
                 f"{inner}LOG(WARNING) << \"MIOpen autotuning failed (\" << {var}.status()",
                 f"{inner}             << \"); falling back to the default config\";",
                 *(inner + _reindent(d, inner) for d in defaults),
                 f"{indent}}}",
                 f"{indent}return {var};"]
        plan.change(Edit(ret.start_byte, ret.end_byte, "\n".join(lines)), what=f"a default-config fallback after {name}")

    def _include(self, doc, plan) -> None:
        includes = [n for n in walk(doc.root) if n.type == "preproc_include"]
        paths = {doc.text(n.child_by_field_name("path")).strip('"<>'): n for n in includes}
        if LOG_INCLUDE in paths or not plan.edits:
            return
        before = [p for p in paths if p.startswith("absl/") and p < LOG_INCLUDE]
        if not before:
            plan.problems.append("no absl include to put absl/log/log.h after")
            return
        node = paths[max(before)]
        at = doc.src.index(b"\n", node.start_byte) + 1
        plan.edits.append(Edit(at, at, f'#include "{LOG_INCLUDE}"\n'))


def split_arguments(text: str) -> list[str]:
    """Top-level comma-separated arguments of "(a, f(b, c), d)", whitespace collapsed."""
    args, depth, current = [], 0, ""
    for ch in text.strip()[1:-1]:
        if ch in "([{":  # not <>: "->" and comparisons would unbalance them
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            args.append(current)
            current = ""
        else:
            current += ch
    args.append(current)
    return [" ".join(a.split()) for a in args if a.strip()]


def reflow_call(doc: CppDocument, call, indent: str, prefix: str, width: int = 80) -> str:
    """The call as text, re-wrapped (clang-format's Google style, roughly) so
    that `prefix` + call fits the line width."""
    name = doc.text(call.child_by_field_name("function"))
    args = split_arguments(doc.text(call.child_by_field_name("arguments")))
    one_line = f"{name}({', '.join(args)})"
    if len(indent) + len(prefix) + len(one_line) + 1 <= width:
        return one_line
    lines, line = [], indent + "    "
    for i, arg in enumerate(args):
        piece = arg + ("," if i < len(args) - 1 else ")")
        if line.strip() and len(line) + 1 + len(piece) + (1 if i == len(args) - 1 else 0) > width:
            lines.append(line)
            line = indent + "    "
        line += ("" if not line.strip() else " ") + piece
    lines.append(line)
    return f"{name}(\n" + "\n".join(lines)


def _reindent(statement: str, indent: str) -> str:
    """A copied multi-line statement with its continuation lines re-based."""
    first, *rest = statement.split("\n")
    return "\n".join([first, *(indent + line.lstrip() for line in rest)])


ROCM_DNN = RocmDnnLocks()
AUTOTUNER = AutotunerFallback()
