"""The C++ engine: masking, lookup by qualified name, splicing, and refusing
edits that break the parse."""
import re

import pytest

from fixmono.apply.contract import apply_change
from fixmono.model.outcome import Status
from fixmono.engines.cpp import CppDocument, CppTransform, Edit, Plan, apply_edits, enclosing_statement, line_start, mask
from fixmono.model.errors import TransformFailed
from fixmono.model.fix import FileChange

SOURCE = """\
#include "a.h"
#define TWO_LINES(x) \\
  do { x; } while (0)
namespace n {
class Widget {
 public:
  int Size() const { return size_; }
  static Widget Create(int n);
 private:
  int size_ ABSL_GUARDED_BY(mu_);
};
Widget Widget::Create(int n) {
  TF_ASSIGN_OR_RETURN(std::unique_ptr<Widget> w, Make(n));
#if USE_NEW
  if (n > 0) {
#elif USE_OLD
  if (n > 1) {
#else
  if (n > 2) {
#endif
    w->Grow(n);
  }
  return *w;
}
}  // namespace n
"""


def test_mask_keeps_length_and_lines():
    masked = mask(SOURCE.encode())
    assert len(masked) == len(SOURCE.encode())
    assert masked.count(b"\n") == SOURCE.count("\n")
    text = masked.decode()
    assert "#if" not in text and "n > 1" not in text and "n > 2" not in text and "n > 0" in text
    assert "do { x; }" not in text  # the #define body
    assert "ABSL_GUARDED_BY" not in text
    assert "TF_ASSIGN_OR_RETURN(" in text and "std::unique_ptr<Widget>" not in text  # type blanked, name kept
    assert "w, Make(n)" in text


def test_masked_source_parses_without_errors():
    assert CppDocument(SOURCE).errors() == []


def test_functions_by_qualified_name_inline_and_out_of_line():
    doc = CppDocument(SOURCE)
    assert [doc.qualified_name(f) for f in doc.functions("Widget::Size")] == ["Widget::Size"]
    assert [doc.qualified_name(f) for f in doc.functions("Widget::Create")] == ["Widget::Create"]
    assert doc.functions("Create") and not doc.functions("Other::Create")
    (grow,) = doc.calls(doc.root, "Grow")
    assert doc.text(enclosing_statement(grow)) == "w->Grow(n);"


def test_edits_splice_into_the_original_bytes():
    src = SOURCE.encode()
    at = src.index(b"    w->Grow")
    out = apply_edits(src, [Edit(at, at, "    Log();\n")])
    assert out.replace(b"    Log();\n", b"") == src  # everything else byte-identical, #if kept
    with pytest.raises(TransformFailed, match="overlapping"):
        apply_edits(src, [Edit(0, 10, "a"), Edit(5, 12, "b")])


class InsertBrace(CppTransform):
    """A deliberately bad transformation: opens a brace it never closes."""

    def __init__(self):
        super().__init__("bad edit", "Widget::Create")

    def plan(self, doc):
        plan = Plan(anchors=1)
        (grow,) = doc.calls(doc.root, "Grow")
        plan.change(Edit(grow.start_byte, grow.start_byte, "if (x) { "))
        return plan


def test_an_edit_that_adds_parse_errors_is_refused():
    out = apply_change(FileChange("w.cc", InsertBrace()), SOURCE)
    assert out.status is Status.FAILED and "would add parse errors" in out.detail


def test_a_file_that_does_not_parse_fails_with_the_line():
    broken = "int f() {\n" + "  x = = ;\n" * 20 + "}\n" + "))))\n" * 20
    out = apply_change(FileChange("w.cc", InsertBrace()), broken)
    assert out.status is Status.FAILED and "does not parse" in out.detail


def test_continuation_lines_of_every_directive_are_masked():
    src = b"#if defined(A) && \\\n    B > 1\nint x;\n#endif\n#pragma omp parallel \\\n  for\nint y;\n"
    masked = mask(src)
    assert len(masked) == len(src) and masked.count(b"\n") == src.count(b"\n")
    assert b"B > 1" not in masked and b"for" not in masked
    assert b"int x;" in masked and b"int y;" in masked
    assert CppDocument(src.decode()).errors() == []


def test_line_start_never_splits_a_continued_line():
    src = b"  #if A && \\\r\n    B\r\n  f();\r\n"
    assert line_start(src, src.index(b"B")) == 0
    assert line_start(src, src.index(b"f()")) == src.index(b"  f()")


class InsertIntoDirective(CppTransform):
    """A deliberately bad transformation: inserts after the first line of a #if."""

    def __init__(self):
        super().__init__("bad edit", "f")

    def plan(self, doc):
        plan = Plan(anchors=1)
        at = doc.src.index(b"\n") + 1
        plan.change(Edit(at, at, "g();\n"))
        return plan


def test_an_edit_inside_a_multi_line_directive_is_refused():
    src = "#if A && \\\n    B\nvoid f() {}\n#endif\n"
    out = apply_change(FileChange("w.cc", InsertIntoDirective()), src)
    assert out.status is Status.FAILED and "split the preprocessor directive at line 1" in out.detail


def test_inserted_text_follows_crlf():
    src = SOURCE.replace("\n", "\r\n").encode()
    at = src.index(b"    w->Grow")

    class Insert(CppTransform):
        def plan(self, doc):
            plan = Plan(anchors=1)
            plan.change(Edit(at, at, "    Log();\n    Log2();\n"))
            return plan

    new = Insert("log", "w").rewrite(src.decode()).source
    assert "    Log();\r\n    Log2();\r\n    w->Grow" in new
    assert re.search(r"(?<!\r)\n", new) is None  # no LF-only line
