"""`fixmono import`: a patch file becomes a fix folder that discovery, the
inline cases, the catalogue, validate and make_patch take with no other edit;
every way in (files, an mbox, a quilt series, a commit range, a URL served by
a real nginx on 127.0.0.1) and every bad input (one line, exit 2, nothing
written). The upstream-shaped module is our own text."""
import hashlib
import json
import keyword
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from fixmono.model.projects import PROJECTS
from fixmono.testing import git, make_repo, nginx
from tests.helpers import copy_tree

PATH = "src/transformers/fixmono_example.py"
MARKER = PROJECTS["transformers"].markers[0]  # what make_patch knows a transformers checkout by
BEFORE = '''"""Our own module, shaped like a transformers one."""
import math


class Scheduler:
    def __init__(self, warmup, total):
        self.warmup = warmup
        self.total = total

    def factor(self, step):
        if step < self.warmup:
            return step / self.warmup
        progress = (step - self.warmup) / (self.total - self.warmup)
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def clip(value, low, high):
    return max(low, min(value, high))
'''
FIXED = BEFORE.replace("            return step / self.warmup\n",
                       "            return step / max(1, self.warmup)\n").replace(
    "        progress = (step - self.warmup) / (self.total - self.warmup)\n",
    "        progress = (step - self.warmup) / max(1, self.total - self.warmup)\n")
CLIPPED = FIXED.replace("    return max(low, min(value, high))\n",
                        "    if low > high:\n        raise ValueError(f\"low {low} > high {high}\")\n"
                        "    return max(low, min(value, high))\n")


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def run(root: Path, *argv: str, stdin: bytes | None = None, **extra_env) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{root / 'tools'}{os.pathsep}{root}", "PYTHONDONTWRITEBYTECODE": "1",
           **extra_env}
    env.pop("XML_OUTPUT_FILE", None)  # an inner pytest must not overwrite Bazel's report
    return subprocess.run([sys.executable, *argv], cwd=root, env=env, capture_output=True, input=stdin,
                          timeout=600)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Path:
    """A git repository: the module, then two fix commits."""
    repo = make_repo(tmp_path_factory.mktemp("up") / "repo", {PATH: BEFORE, MARKER: ""})
    for text, subject in ((FIXED, "Scheduler: no division by zero without warmup"),
                          (CLIPPED, "clip: refuse low > high")):
        (repo / PATH).write_text(text)
        git(repo, "commit", "-q", "-am", f"{subject}\n\n(cherry picked from commit {'ab' * 20})")
    return repo


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return copy_tree(tmp_path_factory.mktemp("tree") / "repo")


def patch_of(repo: Path, rev: str) -> bytes:
    return git(repo, "format-patch", "-1", "--stdout", rev).encode()


def test_an_imported_fix_is_tested_by_the_catalogue_with_no_other_edit(upstream, tree):
    before, before_readme = digests(tree), (tree / "README.md").read_text().splitlines()
    (tree.parent / "scheduler.patch").write_bytes(patch_of(upstream, "HEAD~1"))
    made = run(tree, "-m", "fixmono", "import", str(tree.parent / "scheduler.patch"), "--json")
    assert made.returncode == 0, made.stderr
    (record,) = json.loads(made.stdout)["imported"]
    folder = Path(record["folder"])
    assert record == {"folder": "fixes/transformers/scheduler_no_division_by_zero_without",
                      "fix": "transformers-scheduler-no-division-by-zero-without", "files": 1, "hunks": 1}
    after = digests(tree)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {str(folder / n) for n in ("fix.patch", "fix.py", "README.md", "BUILD.bazel", "__init__.py",
                                                 "repro.py", "test_fix.py", "test_real_wheels.py")} \
        | {"README.md"}  # the top README: the fix's row in its table, nothing else
    added = set((tree / "README.md").read_text().splitlines()) - set(before_readme)
    assert added == {f"| {record['fix']} | (fill in: upstream file, releases hit, issue) | Python, imported | "
                     f"[README]({folder}/README.md) |"}
    assert (tree / folder / "fix.patch").read_bytes() == (tree.parent / "scheduler.patch").read_bytes()
    assert len((tree / folder / "fix.py").read_text().splitlines()) < 16
    # what CI runs on every fix: its cases, the catalogue tree, validate, the registry, for the two imported here and
    # the checks of the catalogue as a whole (the other fixes' own cases run in their targets, on the same files: they
    # took 30 s of this case at idle, 85 s at load 4)
    # a second one on a file a hand-written fix of the catalogue changes too (our own lines in it)
    trainer = ("--- a/src/transformers/trainer.py\n+++ b/src/transformers/trainer.py\n"
               "@@ -10,4 +10,4 @@ def fixmono_example_helper(steps):\n"
               "     total = 0\n     for step in range(steps):\n-        total += step\n+        total += max(step, 0)\n"
               "     return total\n")
    (tree.parent / "trainer.patch").write_text(trainer)
    assert run(tree, "-m", "fixmono", "import", str(tree.parent / "trainer.patch"), "--name", "helper").returncode == 0
    tests = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tools/fix_cases_test.py",
                "tests/test_catalogue.py", "tests/test_validate.py", "tests/test_registry.py",
                "-k", "scheduler or helper or (every_fix and not declares_a_check)", FIX_PACKAGE="")
    assert tests.returncode == 0, tests.stdout.decode()[-3000:]
    assert int(re.search(rb"(\d+) passed", tests.stdout)[1]) >= 10, tests.stdout.decode()[-3000:]  # -k kept them
    trigger = run(tree, "-c", "from fixmono.model.registry import discover; "
                              f"print(next(f.hotfix.trigger for f in discover() if f.id == {record['fix']!r}))")
    assert trigger.stdout.decode().strip() == "transformers.fixmono_example"  # its hot-fix: FIXMONO_HOTFIXES=<id>
    listed = run(tree, "-m", "pytest", "-q", "--co", "tools/fix_cases_test.py").stdout
    assert b"scheduler" in listed and b"transformers-helper" in listed
    # make_patch takes it by id, on a checkout of the upstream before the fix: what git apply gives
    unfixed = make_repo(tree.parent / "unfixed", {PATH: BEFORE, MARKER: ""})
    out = run(tree, "-m", "fixmono.cli.make_patch", record["fix"], "--upstream", str(unfixed),
              "--check", "--json")
    assert json.loads(out.stdout)["runs"][0]["results"][0]["status"] == "applied", out.stdout
    on_fixed = run(tree, "-m", "fixmono.cli.make_patch", record["fix"], "--upstream", str(upstream),
                   "--check", "--json")
    assert json.loads(on_fixed.stdout)["runs"][0]["results"][0]["status"] == "already-applied"


def test_every_way_in_gives_one_folder_per_patch(upstream, tree, tmp_path):
    both = git(upstream, "format-patch", "--stdout", "HEAD~2..HEAD").encode()
    (tmp_path / "both.mbox").write_bytes(both)
    quilt = tmp_path / "quilt"
    quilt.mkdir()
    (quilt / "a.patch").write_bytes(patch_of(upstream, "HEAD~1"))
    (quilt / "b.patch").write_bytes(patch_of(upstream, "HEAD"))
    (quilt / "series").write_text("# ours\na.patch -p1\n\nb.patch\n")
    with nginx(tmp_path) as (base, _log):
        ways = {"mbox": [str(tmp_path / "both.mbox")], "series": ["--series", str(quilt)],
                "commits": ["--from-commit", f"{upstream}@HEAD~2..HEAD"],
                "url": ["--from", f"{base}/quilt/b.patch"], "stdin": ["-"]}
        for way, args in ways.items():
            into = tmp_path / way
            (into / "fixes").mkdir(parents=True)
            (into / "fixes" / "__init__.py").write_text("")
            made = run(tree, "-m", "fixmono", "import", *args, "--into", str(into), "--json",
                       stdin=patch_of(upstream, "HEAD") if way == "stdin" else None)
            assert made.returncode == 0, (way, made.stderr)
            folders = sorted(r["folder"] for r in json.loads(made.stdout)["imported"])
            assert folders == sorted(f"fixes/transformers/{n}" for n in {
                "mbox": ("scheduler_no_division_by_zero_without", "clip_refuse_low_high"),
                "series": ("scheduler_no_division_by_zero_without", "clip_refuse_low_high"),
                "commits": ("scheduler_no_division_by_zero_without", "clip_refuse_low_high"),
                "url": ("clip_refuse_low_high",), "stdin": ("clip_refuse_low_high",)}[way]), way
            for folder in folders:
                assert "(cherry picked from commit" in (into / folder / "fix.patch").read_text()
                assert f"{'ab' * 20}" in (into / folder / "README.md").read_text().split("origin: ")[1]


BAD = {
    "not a diff": (b"hello\n", "not a unified diff"),
    "binary": (b"diff --git a/src/transformers/x.bin b/src/transformers/x.bin\nindex 1..2 100644\n"
               b"GIT binary patch\nliteral 1\nIcmZo*00001\n\n", "binary"),
    "climbs out": (b"--- a/../x.py\n+++ b/../x.py\n@@ -1 +1 @@\n-a\n+b\n", "climbs out"),
    "no project": (b"--- a/lib/x.py\n+++ b/lib/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n", "not all in one known"),
    "adds a file": (b"--- /dev/null\n+++ b/src/transformers/new.py\n@@ -0,0 +1 @@\n+a = 1\n", "new.py (added)"),
    "not UTF-8": (b"--- a/src/transformers/x.py\n+++ b/src/transformers/x.py\n@@ -1 +1 @@\n-a = '\xff'\n+a = 2\n",
                  "not UTF-8"),
}


@pytest.mark.parametrize("name", BAD)
def test_bad_patches_are_one_line_and_nothing_is_written(tree, tmp_path, name):
    data, message = BAD[name]
    (tmp_path / "bad.patch").write_bytes(data)
    before = digests(tree)
    made = run(tree, "-m", "fixmono", "import", str(tmp_path / "bad.patch"))
    err = made.stderr.decode()
    assert made.returncode == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert digests(tree) == before


def test_bad_arguments_are_one_line_and_nothing_is_written(upstream, tree, tmp_path):
    good = tmp_path / "good.patch"
    good.write_bytes(patch_of(upstream, "HEAD"))
    both = tmp_path / "both.mbox"
    both.write_bytes(git(upstream, "format-patch", "--stdout", "HEAD~2..HEAD").encode())
    existing = sorted(p.name for p in (tree / "fixes" / "transformers").iterdir() if p.is_dir())[0]
    cases = {
        "nothing given": ([], "give PATCH files"),
        "a folder that is there": ([str(good), "--name", existing], "already there"),
        "--name for two patches": ([str(both), "--name", "x"], "names one folder"),
        "--name not snake_case": ([str(good), "--name", "Bad-Name"], "snake_case"),
        "--name a keyword": ([str(good), "--name", "class"], "keyword"),
        "not a checkout": ([str(good), "--into", str(tmp_path)], "not a fixmono checkout"),
        "a file URL": (["--from", f"file://{good}"], "http:// or https://"),
        "an unreachable URL": (["--from", "http://127.0.0.1:9/x.patch"], "--from http://127.0.0.1:9/x.patch"),
        "a revision that is not there": (["--from-commit", f"{upstream}@nosuchrev"], "--from-commit"),
        "no @": (["--from-commit", str(upstream)], "CHECKOUT@REV"),
        "a series outside its folder": (["--series", str(tmp_path / "q")], "series"),
    }
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "series").write_text("../good.patch\n")
    before = digests(tree)
    for case, (args, message) in cases.items():
        made = run(tree, "-m", "fixmono", "import", *args)
        err = made.stderr.decode()
        assert made.returncode == 2 and message in err and len(err.strip().splitlines()) == 1, (case, err)
    assert digests(tree) == before


def test_a_diff_whose_result_does_not_parse_writes_nothing(tree, tmp_path):
    """Its own post-image cannot be Python: refused before any file is written."""
    hunk = "@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = (3\n c = 4\n"
    (tmp_path / "broken.patch").write_text(f"--- a/{PATH}\n+++ b/{PATH}\n{hunk}")
    before = digests(tree)
    made = run(tree, "-m", "fixmono", "import", str(tmp_path / "broken.patch"))
    assert made.returncode == 2 and b"nothing was written" in made.stderr, made.stderr
    assert digests(tree) == before


def test_a_declared_form_of_the_fix_is_already_applied_where_the_diff_does_not_fit(tmp_path):
    """jax-standardize-nan on jax 0.10.1+: the function was rewritten with the fix
    inside a new branch. fixed_when (hand-written in fix.py) names the def and the
    lines of that form: already-applied there; failed where the def lacks them;
    applied where the diff fits; a path the diff does not change is refused."""
    from fixmono.apply.contract import apply_change
    from fixmono.engines.imported import diff_fix_of
    from fixmono.model.errors import UserError
    from fixmono.model.patchfile import parse_patch

    path = "pkg/norm.py"
    names = "from ops import asarray, clip, eps, m, rsqrt, sub\n\n\n"
    before = names + "def scale(x, v):\n    v = v - 1\n    return sub(x, asarray(m)) * rsqrt(asarray(v) + eps)\n"
    after = names + "def scale(x, v):\n    v = v - 1\n    v = clip(v, 0)\n    return sub(x, m) * rsqrt(v + eps)\n"
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    (tmp_path / "a" / "norm.py").write_text(before), (tmp_path / "b" / "norm.py").write_text(after)
    diff = subprocess.run(["git", "diff", "--no-index", "--no-prefix", "a/norm.py", "b/norm.py"], cwd=tmp_path,
                          capture_output=True, text=True).stdout.replace("a/norm.py", f"a/{path}").replace(
        "b/norm.py", f"b/{path}")
    patch = parse_patch(diff, "norm.patch")
    fix = diff_fix_of(patch, "pytorch-norm-nan", "pytorch", {path: ("scale", ("v = clip(v, 0)",))})
    rewritten = (names + "def scale(x, v, mode='fast'):\n    if mode == 'fast':\n        v = v - 1\n        v = clip(v, 0)\n"
                 "    else:\n        raise ValueError(mode)\n    return sub(x, m) * rsqrt(v + eps)\n")
    (change,) = fix.changes
    assert apply_change(change, before).status.value == "applied"
    assert apply_change(change, rewritten).status.value == "already-applied"
    elsewhere = rewritten.replace("        v = clip(v, 0)\n", "") + "\n\ndef other(v):\n    v = clip(v, 0)\n"
    assert apply_change(change, elsewhere).status.value == "failed"  # the lines must be in the def it names
    with pytest.raises(UserError, match=r"fixed_when names pkg/other.py, which the diff does not change"):
        diff_fix_of(patch, "pytorch-norm-nan", "pytorch", {"pkg/other.py": ("scale", ("v = clip(v, 0)",))})
    with pytest.raises(UserError, match=r"give \(def name, \(line, ...\)\) with at least one line"):
        diff_fix_of(patch, "pytorch-norm-nan", "pytorch", {path: ("scale", ())})
    # found by review: a form of one def must not stand for hunks in another def, which may still need them
    two = names + "def shift(x):\n    y = x + 1\n    return y\n\n\n"
    (tmp_path / "a" / "norm.py").write_text(two + before[len(names):])
    (tmp_path / "b" / "norm.py").write_text(two.replace("    y = x + 1\n", "    y = x + 1\n    y = clip(y, 0)\n")
                                            + after[len(names):])
    wide = subprocess.run(["git", "diff", "--no-index", "--no-prefix", "a/norm.py", "b/norm.py"], cwd=tmp_path,
                          capture_output=True, text=True).stdout.replace("a/norm.py", f"a/{path}").replace(
        "b/norm.py", f"b/{path}")
    with pytest.raises(UserError, match=r"hunks outside def scale .*: a form of one def cannot stand for them"):
        diff_fix_of(parse_patch(wide, "wide.patch"), "pytorch-norm-nan", "pytorch",
                    {path: ("scale", ("v = clip(v, 0)",))})


def discovered(tree: Path) -> dict[str, str]:
    """{fix id: title} of the catalogue of `tree`, as every command loads it (asserts that it loads)."""
    proc = run(tree, "-c", "import json; from fixmono.model.registry import discover; "
                           "print(json.dumps({f.id: f.title for f in discover()}))")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return json.loads(proc.stdout)


def with_subject(upstream: Path, subject: str) -> bytes:
    """A `git format-patch` mail of ours, its Subject line replaced by `subject`."""
    mail = patch_of(upstream, "HEAD").decode()
    old = next(line for line in mail.splitlines() if line.startswith("Subject: "))
    return mail.replace(old, f"Subject: [PATCH] {subject}", 1).encode()


NASTY_SUBJECTS = {
    "windows path": r"Path C:\Users\bob fails",
    "named escape": r"keep \N in the message",
    "hex escape": r"a lone \x in it",
    "unicode escape": r"a lone \u12 in it",
    "triple quote": 'a """ in the subject',
    "triple single quote": "a ''' in the subject",
    "quote last": 'ends with a quote"',
    "trailing backslash": "ends with a backslash \\",
    "octal and newline escapes": r"\0 \n \t \\ mixed",
}


@pytest.mark.parametrize("case", NASTY_SUBJECTS)
def test_a_subject_with_backslashes_or_quotes_gives_a_fix_the_catalogue_loads(upstream, tree, tmp_path, case):
    """The subject lands in fix.py's docstring: whatever it holds, fix.py is
    Python, the catalogue loads, and the fix's title is the subject."""
    subject = NASTY_SUBJECTS[case]
    (tmp_path / "nasty.patch").write_bytes(with_subject(upstream, subject))
    name = "nasty_" + case.replace(" ", "_")
    made = run(tree, "-m", "fixmono", "import", str(tmp_path / "nasty.patch"), "--name", name, "--json")
    try:
        assert made.returncode == 0, made.stderr
        (record,) = json.loads(made.stdout)["imported"]
        fix_py = tree / record["folder"] / "fix.py"
        compile(fix_py.read_text(), str(fix_py), "exec")
        assert discovered(tree)[record["fix"]] == subject
    finally:  # a broken one must not break the other tests' catalogue
        shutil.rmtree(tree / "fixes" / "transformers" / name, ignore_errors=True)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


STAGING_MARKER = ".fixmono-import-staging"  # in import's holder, locked while its import runs


def leftover(tree: Path, name: str, marked: bool, owner_alive: bool, claims: list[int]) -> Path:
    """A staging folder an import left in fixes/transformers/, a broken fix.py in it."""
    from fixmono.sources.scratch import claim
    holder = tree / "fixes" / "transformers" / f".{name}.new-{os.getpid() if owner_alive else dead_pid()}"
    inner = holder / "new" if marked else holder  # this import's holder, or an older import's staging folder
    inner.mkdir(parents=True)
    (inner / "__init__.py").write_text("")
    (inner / "fix.py").write_text("def oops(:\n")
    if marked:
        (holder / STAGING_MARKER).write_text("12345\n")
        if owner_alive:  # this test process holds its lock, as a running import does
            claims.append(claim(holder / STAGING_MARKER))
    return holder


@pytest.mark.parametrize("marked", [True, False], ids=["marked holder", "older unmarked staging"])
@pytest.mark.parametrize("owner_alive", [False, True], ids=["owner killed", "owner running"])
def test_a_killed_imports_staging_folder_is_ignored_and_swept(upstream, tree, tmp_path, marked, owner_alive):
    """Discovery never reads a dot-folder; the next import removes what a dead
    import left, and nothing of a running one's."""
    claims: list[int] = []
    name = f"left_{int(marked)}{int(owner_alive)}"
    holder = leftover(tree, name, marked, owner_alive, claims)
    temporary = tree / f".README.md.new-{os.getpid() if owner_alive else dead_pid()}"  # swap_in's, killed
    temporary.write_text("a README half way\n")
    try:
        assert not any(i.endswith(name.replace("_", "-")) for i in discovered(tree))
        (tmp_path / "next.patch").write_bytes(patch_of(upstream, "HEAD"))
        made = run(tree, "-m", "fixmono", "import", str(tmp_path / "next.patch"), "--name", f"after_{name}")
        assert made.returncode == 0, made.stderr
        assert holder.exists() == owner_alive and temporary.exists() == owner_alive
    finally:
        for fd in claims:
            os.close(fd)
        shutil.rmtree(holder, ignore_errors=True)
        temporary.unlink(missing_ok=True)


def catalogue_state(tree: Path) -> tuple[dict[str, str], str]:
    """The fix folders (no dot-folders: staging) and the top README."""
    fixes = {k: v for k, v in digests(tree / "fixes").items() if not any(p.startswith(".") for p in Path(k).parts)}
    return fixes, (tree / "README.md").read_text()


_SECONDS: list[float] = []


def import_seconds(tree: Path, patch: Path) -> float:
    """How long one import takes here (measured once)."""
    if not _SECONDS:
        start = time.monotonic()
        assert run(tree, "-m", "fixmono", "import", str(patch), "--name", "killed_timing").returncode == 0
        _SECONDS.append(time.monotonic() - start)
    return _SECONDS[0]


KILL_AT = {"staged": ("import-staged", None), "placed": ("import-placed", None),
           **{f"random {n}": (None, f) for n, f in enumerate((0.2, 0.5, 0.7, 0.9))}}


@pytest.mark.parametrize("moment", KILL_AT)
def test_an_import_killed_at_any_moment_leaves_a_catalogue_that_loads(upstream, tree, tmp_path, moment):
    """SIGKILL at a moment of an import (its folder staged; renamed in, the
    README not yet changed; at random): the catalogue loads, the fix folders
    are as before or as after, the README too; the next import sweeps what
    the killed one left."""
    point, fraction = KILL_AT[moment]
    name = "killed_" + moment.replace(" ", "_")
    (tmp_path / "p.patch").write_bytes(patch_of(upstream, "HEAD"))
    env = {**os.environ, "PYTHONPATH": f"{tree / 'tools'}{os.pathsep}{tree}", "PYTHONDONTWRITEBYTECODE": "1",
           "FIXMONO_PAUSE_AT": point or "", "FIXMONO_PAUSE_FILE": str(tmp_path / "reached")}
    delay = fraction * import_seconds(tree, tmp_path / "p.patch") if fraction else 0
    before_fixes, before_readme = catalogue_state(tree)
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "fixmono", "import", str(tmp_path / "p.patch"), "--name", name],
                            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if point:
        while not (tmp_path / "reached").exists():
            assert proc.poll() is None and time.monotonic() - start < 120, "the import did not reach " + point
            time.sleep(0.02)
    else:  # a share of a whole import's time
        time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    fixes, readme = catalogue_state(tree)
    added = fixes.keys() - before_fixes.keys()
    assert fixes.items() >= before_fixes.items() and {k.split("/")[1] for k in added} <= {name}, added
    assert len(added) in (0, 8), added  # the whole folder (fix.patch and the 7 files import writes) or none of it
    if point == "import-staged":
        assert not added and list((tree / "fixes").glob(f"*/.{name}.new-*")), "killed with its folder staged"
    if point == "import-placed":
        assert len(added) == 8  # renamed in; the README's row is not there yet (not atomic with the folder)
    assert readme == before_readme or f"transformers-{name.replace('_', '-')} " in readme
    discovered(tree)
    final = run(tree, "-m", "fixmono", "import", str(tmp_path / "p.patch"), "--name", f"after_{name}")
    assert final.returncode == 0, final.stderr
    assert list((tree / "fixes").glob("*/.*.new-*")) == []


@pytest.mark.parametrize("subject, name", [
    ("Trainer: pass num steps 1 to scheduler", "trainer_pass_num_steps_1"),
    ("Guard against zero division by the warmup steps", "guard_against_zero_division"),
    ("Scheduler: no division by zero without warmup", "scheduler_no_division_by_zero_without"),
    ("Refactor distributedtensorparallelism checkpointing layer", "refactor_distributedtensorparallelism"),
    ("123 fix for the loader", "fix_123_fix_for_the_loader"),
    ("2x faster attention", "fix_2x_faster_attention"),
    ("class", "fix_class"),
    ("Import", "fix_import"),
    ("async", "fix_async"),
    ("To the", "to"),
])
def test_a_folder_name_from_a_subject_is_whole_words_and_a_package_name(subject, name):
    from fixmono.cli.import_patch import folder_name
    made = folder_name(SimpleNamespace(subject=subject, name="x.patch"), None)
    assert made == name
    assert made.isidentifier() and not keyword.iskeyword(made) and len(made) <= 44


@pytest.mark.parametrize("where", ["the checkout", "another folder"])
def test_the_launcher_imports_into_its_own_checkout_from_anywhere(upstream, tree, tmp_path, where):
    """tools/import_patch, as tools/make_patch and tools/new_fix: the folder goes
    into the launcher's checkout; bad input is one line, exit 2."""
    cwd = tree if where == "the checkout" else tmp_path / "elsewhere"
    cwd.mkdir(exist_ok=True)
    (tmp_path / "p.patch").write_bytes(patch_of(upstream, "HEAD"))
    name = "launched_" + where.split()[-1]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    made = subprocess.run([sys.executable, str(tree / "tools" / "import_patch"), str(tmp_path / "p.patch"), "--name",
                           name], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0 and f"fixes/transformers/{name}/" in made.stdout, made.stderr
    assert (tree / "fixes" / "transformers" / name / "fix.py").is_file()
    assert where == "the checkout" or list(cwd.iterdir()) == []
    bad = subprocess.run([sys.executable, str(tree / "tools" / "import_patch"), str(tmp_path / "nosuch.patch")],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "nosuch.patch" in bad.stderr, bad.stderr


@pytest.mark.parametrize("text", ['"""a \\N b"""\n', '"""open\n', "FIX = declare(\n", "x = '\0'\n"],
                         ids=["bad escape", "unclosed docstring", "unclosed call", "a NUL byte"])
def test_a_generated_file_that_does_not_compile_is_refused_before_it_is_placed(text):
    """The last guard: whatever import generates is compiled before any folder is written."""
    from fixmono.cli.imported_files import compiled
    from fixmono.model.errors import UserError
    with pytest.raises(UserError, match=r"^fixes/x/y/fix\.py: the generated file does not compile .*nothing was "
                                        r"written$"):
        compiled(text, Path("fixes/x/y/fix.py"))
    assert compiled("x = 1\n", Path("fixes/x/y/fix.py")) == "x = 1\n"


def test_the_next_steps_name_every_file_left_to_write(upstream, tree, tmp_path):
    """What import prints after it wrote a folder: each file the author writes by hand, check_fix, and the undo."""
    (tmp_path / "s.patch").write_bytes(patch_of(upstream, "HEAD"))
    made = run(tree, "-m", "fixmono", "import", str(tmp_path / "s.patch"), "--name", "next_steps", "--into",
               str(copy_tree(tmp_path / "into")))
    assert made.returncode == 0, made.stderr
    folder, said = "fixes/transformers/next_steps", made.stdout.decode()
    for needed in (f"{folder}/repro.py", f"{folder}/fix.py: reproduce=, repro_needs=", "dep3=",
                   f"{folder}/test_fix.py", "test_real_wheels.py", "release_result", f"{folder}/README.md",
                   "the release column of its row", "tools/check_fix transformers-next-steps",
                   f"undo the import: rm -r {folder}"):
        assert needed in said, (needed, said)
    from fixmono.cli.imported_files import EXAMPLE
    from fixmono.testing import REPO_ROOT
    assert f"fix.py's fields and the tests as {EXAMPLE}/ has them" in said
    assert all((REPO_ROOT / EXAMPLE / name).is_file() for name in ("repro.py", "test_fix.py", "test_real_wheels.py"))


FILLED_IN = {
    "    raise NotImplementedError(\"(fill in: measure())\")\n":
        "    from transformers.fixmono_example import Scheduler\n"
        "    try:\n        return {\"factor\": Scheduler(5, 5).factor(5)}\n"
        "    except ZeroDivisionError as err:\n        return {\"error\": str(err)}\n",
    "    raise NotImplementedError(\"(fill in: wrong())\")\n":
        "    return f\"factor(5) with warmup == total: {side['error']}\" if \"error\" in side else \"\"\n",
    "(fill in: e.g. transformers on CPU)": "our own transformers module",
    "(fill in: the bug in one line, as a user sees it)": "no warmup divides by zero",
    "(fill in: what measure() runs and what it counts.)": "Scheduler(5, 5).factor(5).",
}


def test_the_author_fills_in_the_reproducer_and_its_generated_test_passes(upstream, tmp_path):
    """The author's loop after an import: the generated test_fix.py fails (naming what to fill in) and the
    placeholder check names each file, until measure() and wrong() are written; then the generated test runs the
    reproducer both ways (the hot-fix made from the diff, in a fresh interpreter) and passes. Nothing else is
    written by hand."""
    tree = copy_tree(tmp_path / "repo")
    (tmp_path / "s.patch").write_bytes(patch_of(upstream, "HEAD~1"))
    made = run(tree, "-m", "fixmono", "import", str(tmp_path / "s.patch"), "--name", "warmup", "--json")
    assert made.returncode == 0, made.stderr
    folder = tree / "fixes/transformers/warmup"
    assert 'test_tags = {"test_real_wheels": ["network", "requires-network"]}' in (folder / "BUILD.bazel").read_text()
    library = tmp_path / "installed"  # our own module where the installed transformers would be
    (library / "transformers").mkdir(parents=True)
    (library / "transformers/__init__.py").write_text("__version__ = '9.9.9'\n")
    (library / "transformers/fixmono_example.py").write_text(BEFORE)
    path = {"PYTHONPATH": os.pathsep.join([str(tree / "tools"), str(tree), str(library)])}
    test = ("-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "test_fix.py"))
    unfilled = run(tree, *test, **path)
    assert unfilled.returncode == 1 and b"(fill in: measure())" in unfilled.stdout, unfilled.stdout[-2000:]
    left = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_docs.py", "-k",
               "placeholder and transformers-warmup", **path)
    assert left.returncode == 1, left.stdout[-2000:]
    for name in ("README.md:", "repro.py:", "test_real_wheels.py:"):
        assert f"fixes/transformers/warmup/{name}".encode() in left.stdout, (name, left.stdout[-2000:])
    repro = (folder / "repro.py").read_text()
    for placeholder, text in FILLED_IN.items():
        assert placeholder in repro, placeholder
        repro = repro.replace(placeholder, text)
    (folder / "repro.py").write_text(repro)
    filled = run(tree, *test, **path)
    assert filled.returncode == 0, filled.stdout[-3000:]
    said = run(tree, "-m", "fixmono.fixes.transformers.warmup.repro", **path)
    assert said.returncode == 1 and said.stdout.decode().startswith(
        "reproduced: factor(5) with warmup == total: division by zero; nothing wrong with the hot-fix"), said.stdout
