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
from fixmono.model.patchfile import parse_patch, read_patch, read_patches, resolve_strip

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


@pytest.mark.parametrize("encoding", ["quoted-printable", "base64"])
def test_a_mail_whose_body_is_encoded_is_decoded_as_git_am_does(tmp_path, encoding):
    """A format-patch mail as mail clients and list archives send it, its body quoted-printable (`==` written
    `=3D=3D`, long lines broken with soft `=` ends) or base64: the same hunks and message as the mail git
    wrote; a multipart mail (format-patch --attach) is one line, refused."""
    import base64
    import quopri

    long_line = "    y = x + 1  # " + "a long comment, " * 6 + "\n"
    after = AFTER.replace("    y = x + 2\n", "    y = x == 2\n" + long_line)
    text = format_patch(tmp_path, {"pkg/m.py": BEFORE}, {"pkg/m.py": after}, "Compare x\n\nIt was == once.")
    head, body = text.split("\n\n", 1)
    coded = quopri.encodestring(body.encode()) if encoding == "quoted-printable" else \
        base64.encodebytes(body.encode())
    mail = (head + f"\nMIME-Version: 1.0\nContent-Transfer-Encoding: {encoding}\n\n").encode() + coded
    assert b"x =3D=3D 2" in mail or encoding == "base64"
    (tmp_path / "mail.patch").write_bytes(mail)
    got, want = read_patch(str(tmp_path / "mail.patch")), parse_patch(text, "plain.patch")
    assert [f.hunks for f in got.files] == [f.hunks for f in want.files]
    assert (got.subject, got.body) == (want.subject, want.body) == ("Compare x", "It was == once.")
    multipart = (head + '\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="b"\n\n--b\n\n'
                 + body + "\n--b--\n").encode()
    (tmp_path / "attached.patch").write_bytes(multipart)
    with pytest.raises(UserError, match="a MIME multipart mail"):
        read_patch(str(tmp_path / "attached.patch"))


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


def test_dep3_bug_forwarded_and_applied_upstream_are_kept_as_written(tmp_path):
    """Debian's DEP-3 fields a fix made of the patch writes into its series mail as the patch has them
    (`Forwarded: not-needed` was written `no`, `Bug:` dropped); a patch without them: Forwarded no."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "m.py").write_text(BEFORE)
    (tmp_path / "b" / "m.py").write_text(AFTER)
    diff = subprocess.run(["diff", "-u", "a/m.py", "b/m.py"], cwd=tmp_path, capture_output=True, text=True).stdout
    header = ("Description: Fix the offset\nAuthor: A U Thor <a@example.org>\nOrigin: vendor\n"
              "Bug: https://bugs.example.org/12\nForwarded: not-needed\nApplied-Upstream: 2.1.0\n"
              "Last-Update: 2026-10-03\n---\n")
    dep3 = diff_fix(parse_patch(header + diff, "x.patch"), "pytorch", "mine").dep3
    assert dep3.trailers() == [("Origin", "vendor"), ("Bug", "https://bugs.example.org/12"),
                               ("Forwarded", "not-needed"), ("Applied-Upstream", "2.1.0"),
                               ("Last-Update", "2026-10-03")]
    plain = diff_fix(parse_patch(diff, "x.patch"), "pytorch", "mine").dep3
    assert (plain.bug, plain.forwarded, plain.applied_upstream) == (None, "no", None)


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
    ("diff --cc m.py\nindex 1,2..3\n--- a/m.py\n+++ b/m.py\n@@@ -1,2 -1,2 +1,2 @@@\n  x\n- y\n -z\n++w\n",
     "combined diff.*one parent"),  # `git show MERGE` (was taken for a change of mode alone)
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


@pytest.mark.parametrize("before, after", [("x = 1\n", ""), ("", "x = 1\n")], ids=["emptied", "filled"])
def test_a_git_diff_that_empties_a_file_or_fills_an_empty_one_edits_it(tmp_path, before, after):
    """git writes no `deleted file mode` / `new file mode` for a file emptied or filled: it is edited, as
    `git apply` reads it (not deleted, nor refused as a file the diff adds); a plain `diff -u` of the same
    texts, whose one hunk has an empty side, is read as `patch` reads it (deleted, added)."""
    from fixmono.apply.contract import apply_fix

    diff = staged_diff(tmp_path, {"pkg/__init__.py": before, "pkg/m.py": BEFORE}, {"pkg/__init__.py": after,
                                                                                   "pkg/m.py": BEFORE})
    patch = parse_patch(diff, "init.patch")
    assert [(f.path, f.kind) for f in patch.files] == [("pkg/__init__.py", "modified")]
    fix = diff_fix(patch, "pytorch", "init")
    tree = {"pkg/__init__.py": before, "pkg/m.py": BEFORE}
    done = apply_fix(fix, lambda path: tree[path].encode() if path in tree else None)
    assert done.status is Status.APPLIED and done.new_files == {"pkg/__init__.py": after}
    hunk = diff[diff.index("@@"):]
    plain_diff = parse_patch(f"--- a/pkg/__init__.py\n+++ b/pkg/__init__.py\n{hunk}", "plain.patch")
    assert plain_diff.files[0].kind == ("deleted" if before else "added")


# Every form of patch teams carry: the diff's own names kept, the strip level
# decided as patch and git apply decide it (model/patchfile.resolve_strip).
HUNK = "@@ -1,3 +1,3 @@\n def f(x):\n-    y = x + 1\n+    y = x + 2\n     return y\n"
UPSTREAM = {"torch/utils/cpp_extension.py", "build/build.py", "src/diffusers/models/attn.py", "pkg/m.py"}


def plain(old: str, new: str, before: str = "", hunk: str = HUNK) -> str:
    return f"{before}--- {old}\n+++ {new}\n{hunk}"


@pytest.mark.parametrize("text, path, level", [
    # quilt/Debian -p1 with any first component
    (plain("pytorch-2.7.0.orig/torch/utils/cpp_extension.py\t2025-01-01 00:00:00.000000000 +0000",
           "pytorch-2.7.0/torch/utils/cpp_extension.py\t2025-01-02 00:00:00.000000000 +0000"),
     "torch/utils/cpp_extension.py", 1),
    (plain("pkg.orig/m.py", "pkg/m.py"), "m.py", 1),  # the convention says 1, even where m.py is not there
    (plain("build/build.py", "build/build.py"), "build/build.py", 0),  # -p0
    (plain("torch/utils/cpp_extension.py\t(revision 12)", "torch/utils/cpp_extension.py\t(working copy)",
           "Index: torch/utils/cpp_extension.py\n===================================================================\n"),
     "torch/utils/cpp_extension.py", 0),  # svn / Anaconda
    (plain("src/diffusers/models/attn.py", "src/diffusers/models/attn.py",
           "diff --git src/diffusers/models/attn.py src/diffusers/models/attn.py\nindex 1111111..2222222 100644\n"),
     "src/diffusers/models/attn.py", 0),  # git diff --no-prefix
    (plain("a/src/diffusers/models/attn.py", "b/src/diffusers/models/attn.py"), "src/diffusers/models/attn.py", 1),
    (plain("a/repo/pkg/m.py", "b/repo/pkg/m.py"), "pkg/m.py", 2),  # made one folder up
    (plain("a/pkg/m.py", "b/pkg/m.py").replace("\n", "\r\n"), "pkg/m.py", 1),  # every line end made CRLF
    (plain("x/y/pkg/m.py", "x/y/pkg/m.py"), "pkg/m.py", 2),
    (plain("build/build.py.orig", "build/build.py"), "build/build.py", 0),  # diff -u FILE.orig FILE
    (plain("build/build.py", "build/build.py.new"), "build/build.py", 0),  # diff -u FILE FILE.new
])
def test_every_form_is_read_at_the_strip_level_the_upstream_says(text, path, level):
    patch = resolve_strip(parse_patch(text, "x.patch"), UPSTREAM.__contains__)
    assert ([f.path for f in patch.files], patch.strip) == ([path], level)
    (change,) = diff_fix(patch, "pytorch", "forms").changes
    assert apply_change(change, BEFORE).new_text == AFTER  # the hunk's text as written (CRs read as patch does)


@pytest.mark.parametrize("text, words", [
    (plain("build/other.py", "build/other.py"), r"build/other.py is not in the upstream at any strip level "
                                                r"\(tried build/other.py, other.py\)"),
    (plain("x/y/z.py", "x/y/z.py"), r"tried x/y/z.py, y/z.py, z.py\)"),
    ("--- /dev/null\n+++ pkg/new.py\n@@ -0,0 +1 @@\n+a = 1\n", "only adds files.*give --strip N"),
])
def test_a_path_that_is_nowhere_is_one_line_naming_the_paths_tried(text, words):
    with pytest.raises(UserError, match=words) as err:
        resolve_strip(parse_patch(text, "x.patch"), UPSTREAM.__contains__)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("text, level, paths", [
    # added files decided by the other files of the patch, or by the a/ b/ or .orig convention
    ("--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+a = 1\n", 1, ["pkg/new.py"]),
    ("--- pkg.orig/new.py\t1970-01-01 00:00:00.000000000 +0000\n+++ pkg/new.py\n@@ -0,0 +1 @@\n+a = 1\n"
     + plain("pkg.orig/m.py", "pkg/m.py"), 1, ["new.py", "m.py"]),
    ("--- /dev/null\n+++ build/new.py\n@@ -0,0 +1 @@\n+a = 1\n" + plain("build/build.py", "build/build.py"), 0,
     ["build/new.py", "build/build.py"]),
])
def test_an_added_file_goes_with_the_other_files_or_the_convention(text, level, paths):
    patch = resolve_strip(parse_patch(text, "x.patch"), UPSTREAM.__contains__)
    assert (patch.strip, [f.path for f in patch.files]) == (level, paths)


@pytest.mark.parametrize("strip, path", [(0, "x/y/pkg/m.py"), (2, "pkg/m.py"), (3, "m.py")])
def test_strip_n_forces_the_level(strip, path):
    patch = resolve_strip(parse_patch(plain("x/y/pkg/m.py", "x/y/pkg/m.py"), "x.patch"), UPSTREAM.__contains__,
                          strip)
    assert [f.path for f in patch.files] == [path]
    with pytest.raises(UserError, match="no more than 4 component"):
        resolve_strip(parse_patch(plain("x/y/pkg/m.py", "x/y/pkg/m.py"), "x.patch"), UPSTREAM.__contains__, 4)


@pytest.mark.parametrize("name", [".git/hooks/post-checkout", "pkg/.git/config", ".GIT/hooks/x", ".git /hooks/x",
                                  ".git./hooks/x", "sub/.Git/info/attributes", "GIT~1/hooks/x",
                                  ".g\u200cit/hooks/x"])
@pytest.mark.parametrize("form", ["added", "modified", "deleted", "renamed onto", "renamed from"])
def test_a_path_inside_a_git_directory_is_refused(name, form):
    text = {"added": f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+exit 0\n",
            "modified": plain(f"a/{name}", f"b/{name}", hunk="@@ -1 +1 @@\n-a\n+b\n"),
            "deleted": f"--- a/{name}\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
            "renamed onto": f"diff --git a/m.py b/{name}\nsimilarity index 100%\nrename from m.py\nrename to {name}\n",
            "renamed from": f"diff --git a/{name} b/m.py\nsimilarity index 100%\nrename from {name}\nrename to m.py\n",
            }[form]
    with pytest.raises(UserError, match="inside a .git directory") as err:
        parse_patch(text, "x.patch")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", [".gitmodules", ".gitignore", "pkg/.gitattributes", ".github/workflows/ci.yml",
                                  "pkg/my.git/m.py"])
def test_names_that_only_look_like_git_are_taken(name):
    (f,) = parse_patch(plain(f"a/{name}", f"b/{name}", hunk="@@ -1 +1 @@\n-a\n+b\n"), "x.patch").files
    assert f.path == name


@pytest.mark.parametrize("raw", ["a/m\x00od.py", "a/m\rod.py", "a/m\x1bod.py"])
def test_a_control_character_in_a_path_is_one_line(raw):
    text = f"--- {raw}\n+++ {raw.replace('a/', 'b/', 1)}\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(UserError, match="control character") as err:
        parse_patch(text, "x.patch")
    assert "\n" not in str(err.value)


def test_a_quoted_git_name_is_unquoted(tmp_path):
    text = format_patch(tmp_path, {"pkg/né.py": BEFORE}, {"pkg/né.py": AFTER}, "quoted")
    assert '"a/pkg/n\\303\\251.py"' in text
    assert [f.path for f in parse_patch(text).files] == ["pkg/né.py"]


def series_of(tmp_path: Path, form: str) -> list[str]:
    """Three patches of one change each, as a quilt folder, an mbox or a folder of NNNN-*.patch."""
    mails = [f"From {'0' * 39}{n} Mon Sep 17 00:00:00 2001\nFrom: A <a@x>\nSubject: [PATCH] step {n}\n\n---\n"
             + plain(f"a/pkg/m{n}.py", f"b/pkg/m{n}.py") for n in (1, 2, 3)]
    folder = tmp_path / form
    folder.mkdir()
    if form == "mbox":
        (folder / "all.mbox").write_text("".join(mails))
        return [str(folder / "all.mbox")]
    if form == "quilt":
        for n, mail in zip((3, 1, 2), mails):  # the series file's order, not the names'
            (folder / f"p{n}.diff").write_text(mail)
        (folder / "series").write_text("# our patches\np3.diff -p1\n\np1.diff  # the first\np2.diff\n")
        return [str(folder)]
    for n, mail in enumerate(mails, 1):
        (folder / f"{n:04d}-step-{n}.patch").write_text(mail)
    (folder / "README").write_text("not a patch\n")
    return [str(folder)]


@pytest.mark.parametrize("form", ["quilt", "mbox", "numbered"])
def test_a_series_is_read_in_order(tmp_path, form):
    patches = read_patches(series_of(tmp_path, form), None)
    assert [p.subject for p in patches] == ["step 1", "step 2", "step 3"]
    assert [p.files[0].path for p in patches] == ["pkg/m1.py", "pkg/m2.py", "pkg/m3.py"]


@pytest.mark.parametrize("series, words", [
    ("p.diff -R\n", "-pN only"),
    ("../p.diff\n", "outside the folder"),
    ("# nothing\n", "lists no patches"),
    ("missing.diff\n", "No such file"),
])
def test_a_bad_series_is_one_line(tmp_path, series, words):
    (tmp_path / "p.diff").write_text(plain("a/pkg/m.py", "b/pkg/m.py"))
    (tmp_path / "series").write_text(series)
    with pytest.raises(UserError, match=words):
        read_patches([str(tmp_path)], None)


def test_a_quilt_series_strip_option_is_kept(tmp_path):
    (tmp_path / "p0.diff").write_text(plain("pkg/m.py", "pkg/m.py"))
    (tmp_path / "series").write_text("p0.diff -p0\n")
    (patch,) = read_patches([str(tmp_path)], None)
    assert resolve_strip(patch, lambda path: path == "m.py").files[0].path == "pkg/m.py"


@pytest.mark.parametrize("target", ["\n", "\r\n"])
def test_a_diff_whose_every_line_end_became_crlf_fits_either_file(target):
    """Before: its path was read as 'm.py\\r' and the fix was not-applicable."""
    text = plain("a/pkg/m.py", "b/pkg/m.py").replace("\n", "\r\n")
    (change,) = diff_fix(parse_patch(text, "crlf.patch"), "pytorch", "crlf").changes
    assert change.path == "pkg/m.py"
    result = apply_change(change, BEFORE.replace("\n", target))
    assert result.status is Status.APPLIED and result.new_text == AFTER.replace("\n", target)


@pytest.mark.parametrize("paths, project", [
    (["torch/nn/m.py", "torch/optim/o.py"], "pytorch"),
    (["src/transformers/trainer.py"], "transformers"),
    (["src/diffusers/a.py", "src/diffusers/b/c.py"], "diffusers"),  # a package of no fix: a project of its own
    (["vllm/engine/a.py"], "vllm"),
    (["torch/nn/m.py", "src/transformers/trainer.py"], None),  # two projects
    (["src/diffusers/a.py", "vllm/b.py"], None),  # two packages
    (["vllm/a.py", "setup.py"], None),  # a file outside any package
])
def test_the_project_of_a_patch_for_installed_files(paths, project):
    from fixmono.engines.port import project_of

    patch = parse_patch("".join(plain(f"a/{p}", f"b/{p}", hunk="@@ -1 +1 @@\n-a\n+b\n") for p in paths), "x.patch")
    if project is None:
        with pytest.raises(UserError, match="not all in one known project's package .*or all in one package"):
            project_of(patch, any_package=True)
    else:
        assert project_of(patch, any_package=True) == project
