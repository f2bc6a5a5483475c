"""Patch files as input (model/patchfile.py): what git and diff write is read
(format-patch mails, plain `diff -u`, several files, CRLF, `\\ No newline at end
of file`), and what cannot be a fix is one line (UserError), never a traceback.
Every diff here is made by git or diff from text we write."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fixmono.apply.contract import apply_change
from fixmono.engines.port import diff_fix
from fixmono.model.errors import UserError
from fixmono.model.outcome import Status
from fixmono.model.patchfile import parse_patch, read_patch

BEFORE = "def f(x):\n    y = x + 1\n    return y\n\n\ndef g(x):\n    return x\n"
AFTER = "def f(x):\n    y = x + 2\n    return y\n\n\ndef g(x):\n    return x\n"


def repo(tmp: Path, files: dict[str, str]) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp)], check=True)
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(text.encode())
    subprocess.run(["git", "-C", str(tmp), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tmp), "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-qm", "base"],
                   check=True)
    return tmp


def format_patch(tmp: Path, before: dict[str, str], after: dict[str, str], message: str) -> str:
    root = repo(tmp, before)
    for name, text in after.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.encode())
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=A U Thor", "-c", "user.email=a@example.org",
                    "commit", "-qm", message], check=True, env={"GIT_AUTHOR_DATE": "2026-10-02T10:00:00+0000",
                                                                "PATH": "/usr/bin:/bin"})
    return subprocess.run(["git", "-C", str(root), "format-patch", "-1", "--stdout"], capture_output=True,
                          text=True, check=True).stdout


def test_a_format_patch_mail_gives_identity_and_dep3(tmp_path):
    text = format_patch(tmp_path, {"pkg/m.py": BEFORE}, {"pkg/m.py": AFTER},
                        "Fix the offset in f\n\nf added one too few.\n\n(cherry picked from commit 0123456789abcdef)")
    patch = parse_patch(text, "0001-fix.patch")
    assert (patch.subject, patch.date, patch.origin) == ("Fix the offset in f", "2026-10-02",
                                                        "commit 0123456789abcdef")
    assert patch.author == "A U Thor <a@example.org>" and "one too few" in patch.body
    fix = diff_fix(patch, "pytorch")
    assert fix.id == "diff-fix-the-offset-in-f" and fix.dep3.origin == "other, commit 0123456789abcdef"
    (change,) = fix.changes
    assert change.path == "pkg/m.py" and apply_change(change, BEFORE).new_text == AFTER


def test_a_plain_diff_u_and_several_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for side, text in (("a", BEFORE), ("b", AFTER)):
        (tmp_path / side / "m.py").write_text(text)
        (tmp_path / side / "n.py").write_text(text.replace("f(", "h("))
    out = subprocess.run(["diff", "-ru", "a", "b"], cwd=tmp_path, capture_output=True, text=True).stdout
    patch = parse_patch(out, "plain.diff")
    assert [f.path for f in patch.files] == ["m.py", "n.py"] and patch.subject is None
    fix = diff_fix(patch, "pytorch", "mine")
    assert [apply_change(c, BEFORE if c.path == "m.py" else BEFORE.replace("f(", "h(")).status
            for c in fix.changes] == [Status.APPLIED, Status.APPLIED]


@pytest.mark.parametrize("header, fields", [
    ("From: A U Thor <a@example.org>\nSubject: [PATCH 2/3] Fix the offset\nDate: Fri, 2 Oct 2026 10:00:00 +0000\n\n"
     "Body line.\n---\n", ("A U Thor <a@example.org>", "Fix the offset", "2026-10-02", None, "Body line.")),
    ("Description: Fix the offset\n f added one too few.\nAuthor: A U Thor <a@example.org>\n"
     "Origin: upstream, https://github.com/o/r/pull/12\nLast-Update: 2026-10-03\n---\n",  # DEP-3, as Debian writes
     ("A U Thor <a@example.org>", "Fix the offset", "2026-10-03", "upstream, https://github.com/o/r/pull/12",
      "f added one too few.")),
    ("Index: m.py\n===================================================================\n", (None, None, None, None, "")),
])
def test_header_lines_before_a_plain_diff(tmp_path, header, fields):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "m.py").write_text(BEFORE)
    (tmp_path / "b" / "m.py").write_text(AFTER)
    diff = subprocess.run(["diff", "-u", "a/m.py", "b/m.py"], cwd=tmp_path, capture_output=True, text=True).stdout
    patch = parse_patch(header + diff, "x.patch")
    assert (patch.author, patch.subject, patch.date, patch.origin, patch.body) == fields
    assert [f.path for f in patch.files] == ["m.py"]
    origin = diff_fix(patch, "pytorch", "mine").dep3.origin  # DEP-3's own Origin kept; else "other, ..."
    assert origin == ("upstream, https://github.com/o/r/pull/12" if "DEP" in header or "Description" in header
                      else "other")


@pytest.mark.parametrize("before, after", [
    (BEFORE.rstrip("\n"), AFTER.rstrip("\n")),  # no newline at the end, on both sides
    (BEFORE, AFTER.rstrip("\n")),  # the fix drops the last line end
    (BEFORE.replace("\n", "\r\n"), AFTER.replace("\n", "\r\n")),  # CRLF throughout
])
def test_line_ends_are_kept_as_the_diff_says(tmp_path, before, after):
    text = format_patch(tmp_path, {"m.py": before}, {"m.py": after}, "ends")
    (change,) = diff_fix(parse_patch(text), "pytorch", "ends").changes
    result = apply_change(change, before)
    assert result.status is Status.APPLIED and result.new_text == after
    assert apply_change(change, after).status is Status.ALREADY_APPLIED


@pytest.mark.parametrize("text, words", [
    ("", "no file changes"),
    ("just some words\nnot a diff\n", "no file changes"),
    ("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n x\n-y\n", "not a well-formed diff"),
    ("--- a//etc/passwd\n+++ b//etc/passwd\n@@ -1 +1 @@\n-x\n+y\n", "absolute"),
    ("--- a/../../x.py\n+++ b/../../x.py\n@@ -1 +1 @@\n-x\n+y\n", "climbs out"),
    ("diff --git a/w.bin b/w.bin\nindex 1..2 100644\nBinary files a/w.bin and b/w.bin differ\n", "binary"),
    ("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x\n+y\n--- a/m.py\n+++ b/m.py\n@@ -3 +3 @@\n-x\n+y\n", "twice"),
])
def test_what_cannot_be_a_fix_is_one_line(text, words):
    with pytest.raises(UserError, match=words) as err:
        parse_patch(text, "bad.patch")
    assert "\n" not in str(err.value)


def test_bytes_that_are_not_utf8_are_one_line(tmp_path):
    (tmp_path / "x.patch").write_bytes(b"--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-\xff\n+y\n")
    with pytest.raises(UserError, match="not UTF-8"):
        read_patch(tmp_path / "x.patch")


def staged_diff(tmp_path, before: dict, after: dict) -> str:
    root = repo(tmp_path, before)
    for name in before:
        if name not in after:
            (root / name).unlink()
    for name, text in after.items():
        (root / name).write_text(text)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return subprocess.run(["git", "-C", str(root), "diff", "--cached", "-M"], capture_output=True, text=True).stdout


def test_a_renamed_file_is_moved_with_its_changes_both_names_judged_together(tmp_path):
    """A rename with a change (git diff -M): applied where the old name is there
    (its hunks ported onto that text), already-applied where the new name has
    them, failed where both names are there or the new one lacks the change,
    not-applicable where neither is."""
    from fixmono.apply.contract import apply_fix

    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(6))
    changed = body.replace("return x + 3", "return x - 3")
    text = staged_diff(tmp_path, {"pkg/old.py": body}, {"pkg/new.py": changed})
    fix = diff_fix(parse_patch(text, "rename.patch"), "pytorch", "rename")

    def outcome(tree: dict):
        return apply_fix(fix, lambda path: tree[path].encode() if path in tree else None)

    moved = outcome({"pkg/old.py": "import os\n" + body})
    assert moved.status is Status.APPLIED and moved.new_files == {"pkg/new.py": "import os\n" + changed,
                                                                  "pkg/old.py": None}
    assert outcome({"pkg/new.py": changed}).status is Status.ALREADY_APPLIED
    assert outcome({"pkg/new.py": body}).status is Status.FAILED
    assert outcome({"pkg/old.py": body, "pkg/new.py": changed}).status is Status.FAILED
    assert outcome({}).status is Status.NOT_APPLICABLE


def test_an_added_and_a_deleted_file_are_placed_by_their_presence(tmp_path):
    """A diff that fixes m.py, adds new.py and deletes old.py: applied on the
    tree it was made on; already-applied on the tree after it; a new.py of
    other text, or an old.py that differs, is failed (never overwritten or
    deleted); the whole fix is never half applied."""
    from fixmono.apply.contract import apply_fix

    before = {"m.py": BEFORE, "old.py": "x = 1\n"}
    after = {"m.py": AFTER, "new.py": "z = 1\n"}
    fix = diff_fix(parse_patch(staged_diff(tmp_path, before, after), "files.patch"), "pytorch", "files")
    assert sorted((c.path, type(c.transform).__name__) for c in fix.changes) == [
        ("m.py", "DiffTransform"), ("new.py", "WholeFile"), ("old.py", "WholeFile")]

    def outcome(tree: dict):
        return apply_fix(fix, lambda path: tree[path].encode() if path in tree else None)

    applied = outcome(before)
    assert applied.status is Status.APPLIED and applied.new_files == {"m.py": AFTER, "new.py": "z = 1\n", "old.py": None}
    assert outcome(after).status is Status.ALREADY_APPLIED
    taken = outcome({**before, "new.py": "mine = 2\n"})
    assert taken.status is Status.FAILED and "refusing to overwrite" in taken.detail
    edited = outcome({"m.py": BEFORE, "old.py": "x = 2\n"})
    assert edited.status is Status.FAILED and "refusing to delete" in edited.detail
