"""tools/bench_backports.py on a tiny repository made here (offline): the pairs it
selects from a release branch, and its verdicts for the port engine and `git apply`
on the release branch and on two older releases (one where the context drifted,
one where the function does not exist yet)."""
from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixmono.testing import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import bench_backports as bench  # noqa: E402

HEAD = "import math\n\n\nclass Trainer:\n"
INIT = """    def __init__(self, steps, factor=1.0):
        self.steps = steps
        self.factor = factor
"""
FIT = """
    def fit(self, data):
        total = 0
        for item in data:
            total += item
        return total
"""
WARMUP = """
    def warmup(self, epochs):
        return [self.scale(e) for e in range(epochs)]
"""
SCALE_DOC = '''
    def scale(self, value):
        """Scale one value by the trainer's factor."""
        if value is None:
            return 0
        return round(value * self.factor)
'''
VALIDATE = """
    def validate(self, data):
        return [self.scale(v) for v in data]
"""
V1_0 = HEAD + INIT + FIT + VALIDATE  # no scale(): the fix is not applicable
V1_1_1 = HEAD + INIT + WARMUP + FIT + SCALE_DOC.replace('"""Scale one value by the trainer\'s factor."""',
                                                     "# scale by the factor") + VALIDATE  # context drifted
V1_2 = HEAD + INIT + FIT + SCALE_DOC + VALIDATE
FIXED = V1_2.replace("return round(value * self.factor)", "return math.floor(value * self.factor + 0.5)")
GUARDED = FIXED.replace("        total = 0\n", "        if not data:\n            return 0\n        total = 0\n")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, text: str, message: str, extra: dict | None = None) -> str:
    (repo / "pkg" / "trainer.py").write_text(text)
    for path, content in (extra or {}).items():
        (repo / path).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> dict:
    """main: 1.0.0, 1.1.0, 1.1.1 (drifted), 1.2.0, then three fixes; release/1.2 from 1.2.0
    holds a `cherry-pick -x` of the first, a hand-made backport of the second (same subject,
    one comment more) and a cherry-pick of the third, which also changes a README (not kept)."""
    repo = tmp_path_factory.mktemp("upstream")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "T")
    (repo / "pkg").mkdir()
    sha = {}
    for version, text in (("v1.0.0", V1_0), ("v1.1.0", V1_1_1.replace(WARMUP, "")), ("v1.1.1", V1_1_1),
                          ("v1.2.0", V1_2)):
        commit(repo, text, f"Release {version}")
        git(repo, "tag", version)
    git(repo, "branch", "release/1.2")
    sha["scale"] = commit(repo, FIXED, "Fix scale rounding (#12)")
    sha["guard"] = commit(repo, GUARDED, "Guard empty data in fit (#13)")
    sha["docs"] = commit(repo, GUARDED.replace("class Trainer:\n", "class Trainer:\n    # documented\n"),
                         "Document the trainer (#14)", {"README.md": "docs\n"})
    git(repo, "checkout", "-q", "release/1.2")
    git(repo, "cherry-pick", "-x", sha["scale"])
    sha["scale pick"] = git(repo, "rev-parse", "HEAD")
    sha["guard pick"] = commit(repo, GUARDED.replace("return 0\n        total", "return 0  # backported\n        total"),
                               "Guard empty data in fit (#13)")
    git(repo, "cherry-pick", "-x", sha["docs"])
    git(repo, "checkout", "-q", "main")
    bare = tmp_path_factory.mktemp("mirror") / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    return {"gitdir": str(bare), **sha}


def test_pairs_selected(upstream):
    pairs = bench.select_pairs(upstream["gitdir"])
    assert [(p.main, p.pick, p.how, p.trivial, p.paths) for p in pairs] == [
        (upstream["scale"], upstream["scale pick"], "cherry-pick -x", True, ("pkg/trainer.py",)),
        (upstream["guard"], upstream["guard pick"], "subject", False, ("pkg/trainer.py",)),
    ]  # the third touches README.md: not kept
    assert all(p.branch == "release/1.2" for p in pairs)
    assert pairs[0].parent == bench.git(upstream["gitdir"], "rev-parse", "v1.2.0").strip()
    assert bench.older_releases(upstream["gitdir"], "release/1.2") == ["v1.0.0", "v1.1.1"]


def test_release_branch_verdicts(upstream):
    gitdir = upstream["gitdir"]
    scale, guard = bench.select_pairs(gitdir)
    rows = [bench.release_branch_rows(gitdir, pair, *bench.main_diff(gitdir, pair), verbose=False)
            for pair in (scale, guard)]
    assert rows[0][bench.ENGINE] == "identical" and rows[0]["git apply"] == "identical"
    # the hand-made backport has one comment more: both wrote the main fix, which the backport is not
    assert rows[1][bench.ENGINE] == "wrong explained" and rows[1]["git apply"] == "wrong explained"
    assert [r["differs from git apply"] for r in rows] == [False, False]
    assert [r["engine broken"] for r in rows] == [None, None]


def test_older_release_verdicts(upstream):
    gitdir = upstream["gitdir"]
    scale = bench.select_pairs(gitdir)[0]
    rows = {r["target"]: r for r in bench.older_rows(gitdir, scale, *bench.main_diff(gitdir, scale), verbose=False)}
    assert rows["v1.0.0"][bench.ENGINE] == "not-applicable" and rows["v1.0.0"]["git apply"] == "failed"
    assert rows["v1.0.0"]["removed lines present"] is False
    # the docstring above the change is a comment there: git apply refuses; the engine would have to drop
    # context, and git's header names only the class (`@@ class Trainer:`): which method it cannot tell
    assert rows["v1.1.1"][bench.ENGINE] == "failed" and rows["v1.1.1"]["git apply"] == "failed"
    assert rows["v1.1.1"]["removed lines present"] is True


def test_checks_find_broken_text(upstream):
    """A line put into another method, a def added twice, a file that does not parse: each broken."""
    gitdir = upstream["gitdir"]
    scale = bench.select_pairs(gitdir)[0]
    _, wanted = bench.main_diff(gitdir, scale)
    files = {"pkg/trainer.py": V1_2}
    fix = "        return math.floor(value * self.factor + 0.5)\n"
    elsewhere = V1_2.replace("        return total\n", fix + "        return total\n")
    twice = FIXED + SCALE_DOC.replace("class", "")
    for text, why in ((FIXED, None), (elsewhere, "misplaced"), (twice, "twice"), (FIXED + "  )\n", "parse")):
        found = bench.check(bench.Result("applied", {"pkg/trainer.py": text}), files, wanted)
        assert (found is None) if why is None else (why in found), (why, found)


CPP_PRE = """#include "ops.h"

int Scale(int value, int factor) {
  int total = value * factor;
  return total;
}

int Shift(int value, int by) {
  int moved = value + by;
  return moved;
}
"""


def test_cpp_checks_find_broken_text():
    """--lang cpp's `clean`: a line put into another function, or a text tree-sitter reads worse, is broken;
    the main commit's own text is clean."""
    line = "  total = Clamp(total);\n"
    post = CPP_PRE.replace("  int total = value * factor;\n", "  int total = value * factor;\n" + line)
    wanted = {"ops.cc": bench.added_lines(CPP_PRE, post, "ops.cc")}
    assert wanted["ops.cc"] == [("total = Clamp(total);", ("Scale",))]
    elsewhere = CPP_PRE.replace("  int moved = value + by;\n", "  int moved = value + by;\n" + line)
    for text, why in ((post, None), (elsewhere, "misplaced"), (post.replace("return total;", "return total"),
                                                                "does not parse")):
        found = bench.check(bench.Result("applied", {"ops.cc": text}), {"ops.cc": CPP_PRE}, wanted)
        assert (found is None) if why is None else (why in found), (why, found)


def test_lang_keeps_the_commits_of_that_language_only(tmp_path):
    """--lang: a main commit is kept where every file it modifies is of the language asked."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "T")
    commit(repo, V1_0, "start", {"pkg/ops.cu": CPP_PRE, "pkg/ops.h": "int Scale(int, int);\n"})
    cuda = commit(repo, V1_0, "cuda only", {"pkg/ops.cu": CPP_PRE + "// fixed\n", "pkg/ops.h": "int Scale(int v, int f);\n"})
    both = commit(repo, V1_2, "both", {"pkg/ops.cu": CPP_PRE})
    python = commit(repo, FIXED, "python only")
    assert bench.touched(str(repo / ".git"), cuda, bench.LANGUAGES["cpp"]) == ("pkg/ops.cu", "pkg/ops.h")
    for sha, lang in ((cuda, "python"), (both, "cpp"), (both, "python"), (python, "cpp")):
        assert bench.touched(str(repo / ".git"), sha, bench.LANGUAGES[lang]) is None, lang
    assert bench.touched(str(repo / ".git"), python, bench.LANGUAGES["python"]) == ("pkg/trainer.py",)


def test_main_tables_and_json(upstream, tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert bench.main([upstream["gitdir"], "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| port engine | 1/2 (50%) | 0 | 1 | 0 | 0/1 |" in text
    assert "**differs from git apply where git apply applies: 0**" in text
    assert re.search(r"Speed: the 2 release-branch diffs, CPU seconds: port engine [\d.]+ s.*, git apply [\d.]+ s .*"
                     r"peak memory: the engine's own \d+ MB .*this process's \d+ MB", text)
    rows = json.loads(out.read_text())
    assert [(r["setting"], r["target"], r[bench.ENGINE]) for r in rows if r["main"] == upstream["scale"]] == [
        ("release", rows[0]["parent"], "identical"), ("older", "v1.0.0", "not-applicable"),
        ("older", "v1.1.1", "failed")]
    # the evidence per file, and the engine given the pre-image by its class in both settings
    assert rows[0][f"{bench.ENGINE} evidence"]["pkg/trainer.py"].startswith("the file is the diff's pre-image")
    # the release branch's file is the diff's own pre-image (its blob id): that decides, with or without it
    assert rows[0][f"{bench.ENGINE_PRE} evidence"]["pkg/trainer.py"].startswith("the file is the diff's pre-image")
    assert "| the file is the pre-image | 2 | 1 | 0 | 1 | 0 |" in text
    assert "| pre-image did not place it (hunks decided) | 1 | 0 | 0 | 0 | 0 | 1 | 0 |" in text


def test_rerun_reports_each_verdict_that_changed(upstream, tmp_path, capsys):
    """--rerun: an earlier --json file's attempts through the engine columns again; the same code gives the
    same verdicts (exit 0); a row that says otherwise is printed with its verdicts (exit 1)."""
    out = tmp_path / "rows.json"
    assert bench.main([upstream["gitdir"], "--json", str(out)]) == 0
    capsys.readouterr()
    assert bench.main([upstream["gitdir"], "--rerun", str(out)]) == 0
    assert capsys.readouterr().out.endswith("0 verdict(s) changed\n")
    rows = json.loads(out.read_text())
    first = next(r for r in rows if r["setting"] == "release" and r[bench.ENGINE_PRE] == "identical")
    first[bench.ENGINE_PRE] = "no"
    out.write_text(json.dumps(rows))
    assert bench.main([upstream["gitdir"], "--rerun", str(out), "--tool", bench.ENGINE_PRE]) == 1
    text = capsys.readouterr().out
    assert f"{bench.ENGINE_PRE} | release | {first['repo']} {first['main'][:10]}" in text and "| no -> identical |" in text
    assert text.endswith("1 verdict(s) changed\n")


def test_cli_sample_agrees_with_the_in_process_engine(upstream, capsys):
    """--cli N: the pairs (a repository of no catalogue project) through the real command."""
    assert bench.sample(list(range(10)), 3) == [0, 4, 9] and bench.sample([1, 2], 5) == [1, 2]
    assert bench.main([upstream["gitdir"], "--no-older", "--cli", "2"]) == 0
    assert "CLI: 2 release-branch pair(s) through `python -m fixmono make-patch --diff`: 2 agree" \
        in capsys.readouterr().out


def test_usable_column_and_the_engine_checks_uses():
    """A clean text that reads `self.momentum`, which this release's Trainer never sets: clean, not
    usable; the engine given the tree refuses it as make_patch does."""
    tree = {"pkg/__init__.py": "", "pkg/trainer.py": V1_2}
    read = lambda path: tree[path].encode() if path in tree else None  # noqa: E731
    uses_momentum = V1_2.replace("return round(value * self.factor)", "return round(value * self.momentum)")
    files = {"pkg/trainer.py": V1_2}
    assert bench.unusable(read, files, {"pkg/trainer.py": FIXED}) is None
    assert bench.unusable(read, files, {"pkg/trainer.py": uses_momentum}) == (
        "pkg/trainer.py: the change reads `self.momentum` (line 19), which `Trainer` never sets in this release")
    patch = "".join(difflib.unified_diff(V1_2.splitlines(True), uses_momentum.splitlines(True),
                                         "a/pkg/trainer.py", "b/pkg/trainer.py"))
    assert bench.engine(patch, files).status == "applied"
    assert bench.engine(patch, files, read).status == "failed"
    rows = [{"repo": "r", "removed lines present": True, **{t: "clean" for t in bench.ALL},
             **{f"{t} unusable": None for t in bench.ALL}}, {"repo": "r", "removed lines present": True,
             **{t: "clean" for t in bench.ALL}, **{f"{t} unusable": "reads self.momentum" for t in bench.ALL}}]
    assert "| git apply | 2/2 (100%) | 1/2 | 0 |" in bench.older_table(rows, "r")


def test_evidence_classes():
    """The engine's evidence, from a Rewrite or the parentheses of a refusal, classed by the start of
    its phrase; an attempt of several files under its weakest; a phrase not known yet, its own class."""
    refusal = "hunk @@ -3 @@: refusing to guess (by its hunks: the lines differ here from its pre-image (blob 1a2b))"
    assert bench.refusal_evidence(refusal) == "by its hunks: the lines differ here from its pre-image (blob 1a2b)"
    assert bench.refusal_evidence("its scope is not in this file, but lines it removes are") == ""
    placed = "placed through the diff's pre-image (blob 1a2b)"
    syntax = "placed by the syntax of its pre-image (blob 1a2b)"
    assert bench.evidence_class({"a.py": syntax}) == "pre-image placed by syntax"
    assert bench.evidence_class({"a.py": syntax, "b.py": placed}) == "pre-image placed"
    assert bench.evidence_class({"a.py": placed, "b.py": bench.refusal_evidence(refusal)}) == \
        "pre-image did not place it (hunks decided)"
    assert bench.evidence_class({"a.py": ""}) == bench.evidence_class({}) == bench.NO_EVIDENCE
    assert bench.evidence_class({"a.py": "found by a new rule"}) == "other: found by a new rule"


def test_git_apply_3way_finds_the_pre_image_and_leaves_the_mirror_alone(upstream):
    """`git apply --3way` merges where the context drifted (it has the diff's pre-image blob, as a clone
    has), a conflict is failed, a merge that changes nothing already-applied, and the mirror's files
    (objects, packs, their times) stay as they were."""
    gitdir = upstream["gitdir"]
    patch, _ = bench.main_diff(gitdir, bench.select_pairs(gitdir)[0])
    before = sorted((str(p), p.stat().st_mtime_ns) for p in Path(gitdir).rglob("*") if p.is_file())
    fix = ("return round(value * self.factor)", "return math.floor(value * self.factor + 0.5)")
    drifted = {"pkg/trainer.py": V1_1_1}
    assert bench.text_tool(bench.TOOLS["git apply"], patch, drifted).status == "failed"
    assert bench.three_way(gitdir, patch, drifted) == bench.Result("applied", {"pkg/trainer.py": V1_1_1.replace(*fix)})
    changed_too = {"pkg/trainer.py": V1_2.replace(fix[0], "return round(value * self.factor, 2)")}
    assert bench.three_way(gitdir, patch, changed_too).status == "failed"
    assert bench.three_way(gitdir, patch, {"pkg/trainer.py": FIXED}).status == "already-applied"
    assert sorted((str(p), p.stat().st_mtime_ns) for p in Path(gitdir).rglob("*") if p.is_file()) == before


def gap_row(engine: str, three_way: str, why: str = "", **others) -> dict:
    row = {"repo": "r", "main": "0123456789ab", "target": "v1", "paths": ["m.py"], **{t: "failed" for t in bench.ALL}}
    row.update({bench.ENGINE_PRE: engine, bench.THREE_WAY: three_way, f"{bench.THREE_WAY} why": why, **others})
    return row


def test_the_gap_table_classes_each_attempt_without_a_usable_engine_result_by_gits_merge():
    """Each older attempt the engine given the pre-image left without a usable text, in the first class
    that holds it (the fix there, git's merge conflicting, failing otherwise, broken, clean but using what the
    release lacks, clean and usable); those another tool made usable listed one by one."""
    conflict = f"{bench.CONFLICTS} m.py"
    rows = [gap_row("clean", "clean"),  # usable: not in the gap
            gap_row("already-applied", "already-applied"),
            gap_row("failed", "failed", conflict), gap_row("not-applicable", "failed", conflict),
            gap_row("failed", "failed", conflict, **{"patch --fuzz=3": "clean"}),
            gap_row("failed", "failed", "error: corrupt patch"), gap_row("failed", "broken"),
            gap_row("failed", "clean", **{f"{bench.THREE_WAY} unusable": "reads self.x"}),
            gap_row("not-applicable", "clean"), {"missing file": True}]
    text = bench.gap_table(rows)
    assert "the 8 of 9 attempts without a usable result" in text
    for line in ("| the fix is there already (the engine: already-applied) | 1 | 0 / 0 / 0 | 0 |",
                 "| git's merge conflicts: the release changed the lines the diff edits, or lacks them | 3 | 2 / 1 / 0 | 1 |",
                 "| git's merge fails otherwise | 1 | 1 / 0 / 0 | 0 |",
                 "| git's merge is broken (parse, scope or an undefined name) | 1 | 1 / 0 / 0 | 0 |",
                 "| git's merge is clean, but uses what the release lacks | 1 | 1 / 0 / 0 | 0 |",
                 "| git's merge is clean and usable | 1 | 0 / 1 / 0 | 1 |"):
        assert line in text
    assert "The 2 where another tool's result is usable" in text
    assert "- r 0123456789 @ v1: patch --fuzz=3; the engine failed" in text
    assert "- r 0123456789 @ v1: git apply --3way; the engine not-applicable" in text


def test_a_conflict_of_formatting_only_merges_once_normalised(tmp_path):
    """git's merge of the release, the pre-image and the post-image, each normalised by ast.unparse: a
    release that reflowed the call the diff edits merges (formatting only); one that changed its argument
    does not."""
    call = "def f(x):\n    return g(x, 1)\n"
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "T")
    for text, tag in ((call.replace("g(x, 1)", "g(\n        x,\n        1,\n    )"), "reflowed"),
                      (call.replace("g(x, 1)", "g(x, 2)"), "changed"), (call, None),
                      (call.replace("g(x, 1)", "g(x, 1, strict=True)"), None)):
        (repo / "m.py").write_text(text)
        git(repo, "add", "m.py")
        git(repo, "commit", "-qm", tag or "main")
        if tag:
            git(repo, "tag", tag)
    main = git(repo, "rev-parse", "HEAD")
    assert bench.merges_once_normalised(str(repo / ".git"), {"paths": ["m.py"], "target": "reflowed", "main": main})
    assert not bench.merges_once_normalised(str(repo / ".git"), {"paths": ["m.py"], "target": "changed", "main": main})


def test_tables_prints_an_earlier_runs_tables_without_running(upstream, tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert bench.main([upstream["gitdir"], "--json", str(out)]) == 0
    first = capsys.readouterr().out
    assert bench.main([upstream["gitdir"], "--tables", str(out)]) == 0
    again = capsys.readouterr().out
    assert "Older releases: the" in again and again.strip() == first[:first.index("Speed: ")].strip()
