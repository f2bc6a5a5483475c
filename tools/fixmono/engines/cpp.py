"""The C++ engine: tree-sitter-cpp, edits spliced into the original bytes.

Real XLA and PyTorch files do not parse cleanly as written: `#if/#else`
branches with unbalanced braces, `*_ASSIGN_OR_RETURN(Type name, expr)` and
thread-safety annotations. `mask` blanks those in a same-length copy (every
byte offset stays valid) and the copy is parsed; edits are computed on the
tree and applied to the original text. After editing, the result is parsed
again and an edit that adds parse errors, or splits a multi-line directive, is
refused. Inserted text takes the file's newline style (CRLF stays CRLF).

A fix subclasses CppTransform and implements `plan(doc)`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from fixmono.model.errors import NotApplicable, TargetSyntaxError, TransformFailed
from fixmono.model.fix import Rewrite

MAX_ERROR_LINES = 10  # an ERROR node longer than this means the file does not parse
_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(\w+)")
_STRUCTURAL = (b"if", b"ifdef", b"ifndef", b"elif", b"else", b"endif", b"define")
_ANNOTATION = re.compile(
    rb"\bABSL_(?:CONST_INIT|NO_THREAD_SAFETY_ANALYSIS|MUST_USE_RESULT|ATTRIBUTE_\w+)\b"
    rb"|\bABSL_(?:PT_)?GUARDED_BY\([^()]*\)|\bABSL_\w*LOCKS_(?:REQUIRED|EXCLUDED)\([^()]*\)")
_ASSIGN_OR_RETURN = re.compile(rb"\b[A-Z_]*ASSIGN_OR_RETURN[A-Z_]*\(")
_CUDA_LAUNCH = re.compile(rb"<<<[^;{}]*?>>>")  # kernel<<<grid, block, shared, stream>>>(args): a call once blanked
_CUDA_ANNOTATION = re.compile(rb"\b__(?:global|device|host|forceinline|noinline|constant|shared|managed|grid_constant)__\b"
                              rb"|\b__launch_bounds__\([^()]*\)")


@lru_cache(maxsize=1)
def _language():
    import tree_sitter_cpp
    from tree_sitter import Language

    return Language(tree_sitter_cpp.language())


@lru_cache(maxsize=1)
def _parser():
    from tree_sitter import Parser

    return Parser(_language())


@lru_cache(maxsize=None)
def _query(types: tuple[str, ...]):
    from tree_sitter import Query

    return Query(_language(), "[" + " ".join(f"({t})" for t in types) + "] @node")


def _blank(data: bytearray, start: int, end: int) -> None:
    for i in range(start, end):
        if data[i] not in (0x0A, 0x0D):
            data[i] = 0x20


def directives(src: bytes) -> list[tuple[int, int, bytes]]:
    """(start, end, word) of every preprocessor directive; `end` is past its
    last continuation line (a line ending in a backslash continues it)."""
    found, pos, current = [], 0, None
    for line in src.splitlines(keepends=True):
        end = pos + len(line)
        if current is None and (m := _DIRECTIVE.match(line)):
            current = [pos, end, m.group(1)]
        if current is not None:
            current[1] = end
            if not line.rstrip(b"\r\n").endswith(b"\\"):
                found.append(tuple(current))
                current = None
        pos = end
    if current is not None:
        found.append(tuple(current))
    return found


def mask(src: bytes) -> bytes:
    """A same-length copy that tree-sitter parses: preprocessor conditionals
    reduced to their first branch, #define bodies, multi-line directives,
    annotations, CUDA's qualifiers and `<<<...>>>` launch configurations, the type in
    ASSIGN_OR_RETURN's first argument blanked."""
    out = bytearray(src)
    inactive = []  # one entry per open #if: True once past its first branch
    pos = 0
    for start, end, word in directives(src):
        if any(inactive):  # the code since the last directive is in a dropped branch
            _blank(out, pos, start)
        multi_line = len(src[start:end].splitlines()) > 1
        if word in _STRUCTURAL or multi_line or any(inactive):
            _blank(out, start, end)  # continuation lines included
        if word in (b"if", b"ifdef", b"ifndef"):
            inactive.append(False)
        elif word in (b"elif", b"else") and inactive:
            inactive[-1] = True
        elif word == b"endif" and inactive:
            inactive.pop()
        pos = end
    if any(inactive):
        _blank(out, pos, len(src))
    for pattern in (_ANNOTATION, _CUDA_ANNOTATION, _CUDA_LAUNCH):
        for m in pattern.finditer(out):
            _blank(out, m.start(), m.end())
    for m in _ASSIGN_OR_RETURN.finditer(bytes(out)):
        first = _first_argument(out, m.end())
        if first:
            start, stop = first
            name = re.search(rb"[A-Za-z_]\w*\s*$", bytes(out[start:stop]))
            if name and name.start() > 0:  # "Type name": keep only the name
                _blank(out, start, start + name.start())
    return bytes(out)


def _first_argument(data: bytearray, start: int) -> tuple[int, int] | None:
    depth = 0
    for i in range(start, min(len(data), start + 2000)):
        c = data[i]
        if c in b"(<[{":
            depth += 1
        elif c in b")>]}":
            if depth == 0:
                return None
            depth -= 1
        elif c == ord(",") and depth == 0:
            return start, i
    return None


def node_text(src: bytes, node) -> str:
    return src[node.start_byte:node.end_byte].decode("utf-8", "replace")


class CppDocument:
    """Original bytes, masked bytes, and the tree of the masked bytes."""

    def __init__(self, text: str):
        self.src = text.encode("utf-8")
        self.masked = mask(self.src)
        self.tree = _parser().parse(self.masked)
        self.root = self.tree.root_node

    def text(self, node) -> str:
        return node_text(self.src, node)

    def nodes(self, *types: str) -> list:
        """Every node of these types (what walk() would find, in no set order; matched in C)."""
        from tree_sitter import QueryCursor

        return QueryCursor(_query(types)).captures(self.root).get("node", [])

    def errors(self) -> list:
        """ERROR and MISSING nodes, in walk order (only subtrees tree-sitter says hold one are walked)."""
        return [n for n in walk(self.root, lambda n: n.has_error) if n.type == "ERROR" or n.is_missing]

    def check_parses(self) -> None:
        for err in self.errors():
            lines = err.end_point[0] - err.start_point[0] + 1
            if lines > MAX_ERROR_LINES:
                raise TargetSyntaxError(f"C++ does not parse from line {err.start_point[0] + 1} "
                                        f"to {err.end_point[0] + 1} (after masking macros)")

    def functions(self, qualname: str) -> list:
        """function_definition nodes named `qualname` ("Class::method" or
        "method"), whether defined out of line or inside the class body."""
        return [f for f in walk(self.root) if f.type == "function_definition"
                and _matches(self.qualified_name(f), qualname)]

    def qualified_name(self, function) -> str:
        declarator = function.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            # pointer/reference declarators (T* f(), T& f()) wrap the function declarator
            declarator = declarator.child_by_field_name("declarator") or (
                declarator.named_children[-1] if declarator.named_children else None)
        if declarator is None:
            return ""
        name = self.text(declarator.child_by_field_name("declarator")).replace(" ", "")
        classes = [self.text(a.child_by_field_name("name")) for a in ancestors(function)
                   if a.type in ("class_specifier", "struct_specifier") and a.child_by_field_name("name")]
        return "::".join([*reversed(classes), name])

    def classes(self, name: str) -> list:
        return [c for c in walk(self.root) if c.type in ("class_specifier", "struct_specifier")
                and c.child_by_field_name("body") is not None
                and c.child_by_field_name("name") is not None
                and self.text(c.child_by_field_name("name")) == name]

    def calls(self, node, callee: str) -> list:
        """call_expression nodes under `node` whose callee text ends with `callee`
        (so "GetHandle" finds miopen_->GetHandle, "Foo" finds wrap::Foo)."""
        return [c for c in walk(node) if c.type == "call_expression"
                and _matches(self.text(c.child_by_field_name("function")).replace(" ", ""), callee)]


def _matches(name: str, wanted: str) -> bool:
    return name == wanted or name.endswith("::" + wanted) or name.endswith("->" + wanted) \
        or name.endswith("." + wanted)


def walk(node, into=None):
    """`node` and every node below it, in order (`into`: only the nodes it is true of, and their subtrees)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if into is not None and not into(n):
            continue
        yield n
        stack.extend(reversed(n.children))


def ancestors(node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


def enclosing_statement(node):
    """The statement holding `node` that sits directly in a { } block."""
    while node.parent is not None and node.parent.type != "compound_statement":
        node = node.parent
    return node if node.parent is not None else None


def line_start(src: bytes, offset: int) -> int:
    """Start of the logical line holding `offset`: lines ending in a backslash
    continue into the next, so inserting after one would splice into it."""
    start = src.rfind(b"\n", 0, offset) + 1
    while start and src[max(0, start - 3):start - 1].endswith((b"\\", b"\\\r")):
        start = src.rfind(b"\n", 0, start - 1) + 1
    return start


def newline_of(src: bytes) -> str:
    """The file's newline style: CRLF when most of its lines end so."""
    return "\r\n" if src.count(b"\r\n") * 2 > src.count(b"\n") else "\n"


def indent_at(src: bytes, offset: int) -> str:
    start = line_start(src, offset)
    line = src[start:offset]
    return line[:len(line) - len(line.lstrip())].decode()


@dataclass(frozen=True)
class Edit:
    start: int  # byte offsets into the original source
    end: int
    text: str


def apply_edits(src: bytes, edits: list[Edit]) -> bytes:
    out, pos = [], 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        if e.start < pos:
            raise TransformFailed("overlapping edits (a bug in the transformation)")
        out += [src[pos:e.start], e.text.encode("utf-8")]
        pos = e.end
    out.append(src[pos:])
    return b"".join(out)


def check_outside_directives(src: bytes, edits: list[Edit]) -> None:
    """Refuse an edit that starts or ends inside a (multi-line) directive."""
    for start, end, _ in directives(src):
        for e in edits:
            if start < e.start < end or start < e.end < end:
                line = src.count(b"\n", 0, start) + 1
                raise TransformFailed(f"an edit would split the preprocessor directive at line {line}")


@dataclass
class Plan:
    """What a CppTransform found: anchors seen, edits to make, sites already fixed."""

    anchors: int = 0
    edits: list[Edit] = field(default_factory=list)
    changed: int = 0
    present: int = 0
    problems: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)  # what the changed sites are, for people
    already: list[str] = field(default_factory=list)  # what the present sites are

    def change(self, *edits: Edit, what: str = "") -> None:
        self.edits += edits
        self.changed += 1
        self.added += [what] if what else []

    def found(self, what: str = "", sites: int = 1) -> None:
        """`sites` site(s) already in fixed form."""
        self.present += sites
        self.already += [what] if what else []


class CppTransform:
    engine = "cpp"

    def __init__(self, description: str, anchor: str):
        self.description = description
        self.anchor = anchor

    def plan(self, doc: CppDocument) -> Plan:
        raise NotImplementedError

    def rewrite(self, source: str) -> Rewrite:
        doc = CppDocument(source)
        doc.check_parses()
        plan = self.plan(doc)
        if plan.problems:
            raise TransformFailed("; ".join(plan.problems))
        if plan.anchors == 0:
            raise NotApplicable(f"not found: {self.anchor}")
        labels = {"added": tuple(plan.added), "already": tuple(plan.already)}
        if not plan.edits:
            return Rewrite(source, plan.changed, plan.present, **labels)
        check_outside_directives(doc.src, plan.edits)
        newline = newline_of(doc.src)  # inserted text follows the file (CRLF stays CRLF)
        edits = [Edit(e.start, e.end, e.text.replace("\r\n", "\n").replace("\n", newline))
                 for e in plan.edits]
        new = apply_edits(doc.src, edits).decode("utf-8")
        before, after = len(doc.errors()), len(CppDocument(new).errors())
        if after > before:
            raise TransformFailed(f"the edit would add parse errors ({before} -> {after}); refusing it")
        return Rewrite(new, plan.changed, plan.present, **labels)
