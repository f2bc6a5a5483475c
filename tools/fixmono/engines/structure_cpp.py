"""The syntax step (structure.py) for C/C++: the units of a C/C++ text, its code
tokens and its defs, as structure.Syntax.

The tokens are tree-sitter-cpp's leaves of the text as written (a comment, a
string or char literal and a macro body one token each): tree-sitter's lexer
takes them even where the parse around them fails (`#if` branches with
unbalanced braces), and the masking of engines/cpp.py would blank code that
must be aligned. The defs come from the masked parse (CppScopes' reading).

A unit: the lines of one statement as C/C++ writes them over lines. A line's
statement goes on to the next line unless, outside parentheses and brackets,
its last token is `;`, `{`, `}`, `,` or `:` (a function's header and its `{` on
the next line are one unit, like Python's `def ...:`); a preprocessor directive
(with its continuation lines) is a unit of its own; a blank or comment line
ends a statement that is not inside parentheses. A unit's key is its code
tokens, so formatting, comments and line breaks do not make two statements
differ."""
from __future__ import annotations

import re
from dataclasses import dataclass

from fixmono.engines.structure import Read, Syntax, Token, Unit, statement_kind, trivia, without_trailing_commas

ATOMIC = {"string_literal", "raw_string_literal", "char_literal", "system_lib_string"}
ENDS_A_STATEMENT = {";", "{", "}", ",", ":"}
OPENS, CLOSES = {"(", "["}, {")", "]"}


@dataclass(frozen=True)
class Leaf:
    text: str
    comment: bool
    literal: bool  # a string or char literal: its text is its value, compared as written
    first: int  # its first line (0-based)
    last: int  # its last line
    start: int  # byte offsets in the text
    end: int


def leaves(data: bytes) -> list[Leaf]:
    """Every token of a C/C++ text as tree-sitter lexes it (no parse error drops one), in order."""
    from fixmono.engines.cpp import _parser

    cursor, out = _parser().parse(data).walk(), []
    while True:
        node = cursor.node
        if node.child_count and node.type not in ATOMIC:
            cursor.goto_first_child()
            continue
        if node.end_byte > node.start_byte:  # (a MISSING token has no text)
            (first, _), (last, column) = node.start_point, node.end_point
            text = data[node.start_byte:node.end_byte].decode("utf-8", "replace")
            out.append(Leaf(text, node.type == "comment", node.type in ATOMIC, first,
                            max(first, last - (column == 0)), node.start_byte, node.end_byte))
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return out


LITERALS = re.compile(r'''("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')''')


def key_of(leaf: Leaf) -> str:
    """A token as a key: a literal as written; a macro body's white space and line continuations collapsed
    outside the literals in it; `>>` as two `>` (tree-sitter lexes it either way by what it parsed around)."""
    if leaf.literal:
        return leaf.text
    if leaf.text == ">>":
        return "> >"
    parts = LITERALS.split(leaf.text)  # code, literal, code, ...
    return "".join(part if n % 2 else " ".join(part.replace("\\\n", " ").split()) + " " for n, part in
                   enumerate(parts)).strip()


def units_of(lines: list[str]) -> list[Unit] | None:
    """The units of a C/C++ text, in order, covering every line."""
    on_line: list[list[Leaf]] = [[] for _ in lines]
    glued = [False] * len(lines)  # glued[n]: lines n and n + 1 are in one unit
    for leaf in leaves("".join(lines).encode("utf-8")):
        if leaf.first < len(lines):
            on_line[leaf.first].append(leaf)
        for n in range(leaf.first, min(leaf.last, len(lines) - 1)):
            glued[n] = True  # a token over lines (a block comment, a raw string) is not cut
    directive = [False] * len(lines)
    depth, going_on, n = 0, False, 0
    while n < len(lines):
        code = [leaf for leaf in on_line[n] if not leaf.comment]
        if code and code[0].text.startswith("#"):  # a directive, over its continuation lines (a unit of its own)
            while n + 1 < len(lines) and lines[n].rstrip("\r\n").endswith("\\"):
                directive[n], glued[n] = True, True
                n += 1
            directive[n] = True
            n += 1
            continue  # the statement around it goes on after it
        for leaf in code:
            depth = depth + 1 if leaf.text in OPENS else max(0, depth - 1) if leaf.text in CLOSES else depth
        if code:
            going_on = depth > 0 or code[-1].text not in ENDS_A_STATEMENT
        elif depth == 0:
            going_on = False
        if going_on and n + 1 < len(lines):
            glued[n] = True
        n += 1
    out, start = [], 0
    for n in range(len(lines)):
        if n + 1 < len(lines) and glued[n] and not (directive[n + 1] and not directive[n]):
            continue
        out.append(unit(lines, on_line, start, n + 1, directive[start]))
        start = n + 1
    return out


def unit(lines: list[str], on_line: list[list[Leaf]], start: int, stop: int, is_directive: bool) -> Unit:
    found = [leaf for n in range(start, stop) for leaf in on_line[n]]
    code = [leaf for _, leaf in without_trailing_commas([(leaf.text, leaf) for leaf in found if not leaf.comment])]
    if not code:
        if stop - start == 1:
            return trivia(start, lines[start])
        return Unit(start, stop, " ".join(line.strip() for line in lines[start:stop]), False,
                    re.match(r"[ \t]*", lines[start])[0])
    return Unit(start, stop, " ".join(key_of(leaf) for leaf in code), True,
                re.match(r"[ \t]*", lines[start])[0], tuple(leaf.text for leaf in found if leaf.comment),
                any(leaf.last > leaf.first for leaf in found if not leaf.comment), nests=not is_directive)


def code_tokens(text: str) -> list[Token]:
    """The code tokens of a statement's text, with their offsets in it."""
    data = text.encode("utf-8")
    offset = (lambda b: b) if text.isascii() else (lambda b: len(data[:b].decode("utf-8", "replace")))
    return [Token(leaf.text, offset(leaf.start), offset(leaf.end)) for leaf in leaves(data) if not leaf.comment]


def defs_of(read: Read) -> dict[tuple[str, ...], tuple[int, int]]:
    """Qualified name (its namespaces and classes, then its own) -> (its first unit, its last unit) of each
    function, class, struct and namespace with a body; a name given twice (an overload) is left out."""
    from fixmono.engines.cpp import CppDocument, ancestors

    doc = CppDocument("".join(read.lines))
    out: dict = {}
    twice = set()
    for node in doc.nodes("function_definition", "class_specifier", "struct_specifier", "union_specifier",
                          "namespace_definition"):
        kinds = ("namespace_definition",) if node.type == "function_definition" else \
            ("namespace_definition", "class_specifier", "struct_specifier", "union_specifier")
        outer = [doc.text(a.child_by_field_name("name")) for a in ancestors(node)
                 if a.type in kinds and a.child_by_field_name("name") is not None]
        if node.type == "function_definition":  # its classes, in the class or out of it (Foo::Bar)
            own = re.sub(r"<[^<>]*>", "", doc.qualified_name(node)).split("::")
        elif node.child_by_field_name("body") is None or node.child_by_field_name("name") is None:
            continue
        else:
            own = [doc.text(node.child_by_field_name("name"))]
        name = tuple(list(reversed(outer)) + [part.strip() for part in own if part.strip()])
        if len(name) == len(outer) or node.start_point[0] >= len(read.lines):
            continue
        if name in out:
            twice.add(name)
        out[name] = (read.owner[node.start_point[0]], read.owner[min(node.end_point[0], len(read.lines) - 1)])
    return {name: span for name, span in out.items() if name not in twice}


CONTROL = {"if", "else", "for", "while", "do", "switch", "case", "default", "try", "catch"}
TYPE_KEYWORDS = {"enum", "struct", "class", "union", "namespace"}
CALLED = re.compile(r"([A-Za-z_~][\w~]*)\s*(?:<[^<>()]*>)?\s*\(")


def without_template(code: str) -> str:
    """A header without its leading `template <...>` (nested brackets counted)."""
    if not re.match(r"template\s*<", code):
        return code
    depth = 0
    for n, char in enumerate(code):
        depth += (char == "<") - (char == ">")
        if char == ">" and depth == 0:
            return code[n + 1:].strip()
    return code


def block_kind(header: str) -> tuple[str, str]:
    """What kind of block a C/C++ header (its lines) opens: (`case`, its label); (a control word, "") (`if`,
    `else`); (a keyword, its name) (`enum Kind`, `namespace detail`); ("function", its name) (storage and
    arguments aside); ("macro", the call) (`TEST_F(Suite, Case)`: its arguments name the block); else (its
    first word or sign, "")."""
    code = without_template(re.sub(r"(?s:/\*.*?\*/)|//[^\n]*", "", header).strip())
    words = re.findall(r"[A-Za-z_]\w*", code)
    if not words:
        return code[:1], ""
    if words[0] == "case":  # its label: another label's lines are another branch
        return "case", " ".join(code[4:].rsplit(":", 1)[0].split())
    if words[0] in CONTROL:  # `else if` is an `if` (a branch made the first or a later one), `else` alone not
        return ("if" if words[:2] == ["else", "if"] else words[0]), ""
    if words[0] in TYPE_KEYWORDS:
        named = [w for w in words[1:] if w not in ("class", "struct")]
        return words[0], named[0] if named else ""
    if not code.rstrip().endswith(("{", ")")):  # a statement over lines, no block header
        return statement_kind(code)
    if called := CALLED.search(code):
        if called[1].isupper():
            return "macro", code[called.start():code.find(")", called.end()) + 1]
        return "function", called[1]
    return words[0], ""


CPP = Syntax(units_of, code_tokens, defs_of, ("//", "/*"), block_kind)
