"""--validate, on the C++ syntax tree of the patched rocm_dnn.cc: the static
checks of the locking the fix promises.
  - coverage: each function of LOCKS holds a MutexLock on the process-wide
    mutex, declared before every MIOpen call it must serialise, in a block
    that contains them;
  - lock order: the global lock comes before the per-device handle
    (GetHandle), so every thread takes the two in the same order;
  - no deadlock: absl::Mutex is not reentrant, so no region holding the lock
    calls another function of LOCKS."""
from __future__ import annotations

import re
from typing import Mapping

from .fix import ROCM_DNN_CC
from .transform import ACCEPTED_MUTEX, LOCKS, callee_matches
from fixmono.engines.cpp import CppDocument, ancestors, walk


def check(before: Mapping[str, str], after: Mapping[str, str]) -> str | None:
    doc = CppDocument(after[ROCM_DNN_CC])
    declared = ACCEPTED_MUTEX.search(after[ROCM_DNN_CC])
    if not declared:
        return "no process-wide absl::Mutex for MIOpen is declared"
    mutex = declared.group(1)
    problems, regions = [], {}
    for name, (_, covers) in LOCKS.items():
        functions = doc.functions(name)
        if len(functions) != 1:
            problems.append(f"{len(functions)} definitions of {name}")
            continue
        body = functions[0].child_by_field_name("body")
        locks = [d for d in walk(body) if d.type == "declaration"
                 and re.match(rf"absl::MutexLock\s+\w+\s*[({{]\s*&?\s*{mutex}\s*[)}}]", doc.text(d))]
        if not locks:
            problems.append(f"{name} does not take {mutex}")
            continue
        lock, block = locks[0], locks[0].parent
        unlocked = [c for c in callee_matches(doc, body, covers)
                    if c.start_byte < lock.start_byte or block not in ancestors(c)]
        if unlocked:
            problems.append(f"{name}: the MIOpen call at line {unlocked[0].start_point[0] + 1} is outside the lock")
        handles = [c for c in doc.calls(block, "GetHandle") if c.start_byte < lock.start_byte]
        if handles:
            problems.append(f"{name}: the device handle (line {handles[0].start_point[0] + 1}) is taken "
                            "before the global lock: lock order differs between threads")
        regions[name] = (lock.start_byte, block)
    for name, (start, block) in regions.items():
        for other in regions:
            callee = other.split("::", 1)[1] if other.startswith("MIOpenSupport::") else other
            inside = [c for c in doc.calls(block, callee) if c.start_byte > start]
            if other != name and inside:
                problems.append(f"{name} calls {other} with the lock held (line {inside[0].start_point[0] + 1}): "
                                "deadlock")
    return "; ".join(problems) or None
