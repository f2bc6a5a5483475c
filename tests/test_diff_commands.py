"""`--diff` in the commands that act on an installed environment: `status --diff`
and `patch-env --diff` take a user's patch file as a fix (the port engine),
with the journal, RECORD and `--undo` of any fix. The venv is test_patch_env's:
our own `transformers` wheel installed by pip; the patch is the sentinel fix's
change written as a diff by difflib (our own text)."""
import difflib
import json
import subprocess
import sys

from fixmono.testing import REPO_ROOT
from tests.test_patch_env import AFFECTED, MOE, fixed, fixmono, make_env, record_row, refused, sha256_field, tree

REPO_PATH = "src/transformers/integrations/moe.py"


def write_patch(path, before: str, after: str, repo_path: str = REPO_PATH) -> str:
    text = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{repo_path}",
                                        f"b/{repo_path}"))
    path.write_text(text)
    return str(path)


def status(python, *args) -> dict:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "fixes"), "status", "--python", str(python),
                           "--json", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["fixes"]
    return row


def test_a_patch_file_through_status_patch_env_and_undo(tmp_path):
    python, site = make_env(tmp_path, AFFECTED.before)
    pristine = tree(site)
    patch = write_patch(tmp_path / "mine.patch", AFFECTED.before, fixed(AFFECTED.before))
    assert status(python, "--diff", patch)["installed_files"] == "not fixed"
    proc = fixmono("patch-env", "--python", str(python), "--diff", patch)
    assert proc.returncode == 0 and "patched" in proc.stdout, proc.stdout + proc.stderr
    data = (site / MOE).read_bytes()
    assert data.decode() == fixed(AFFECTED.before)
    assert record_row(site, MOE) == [MOE, sha256_field(data), str(len(data))]
    row = status(python, "--diff", patch)
    assert row["installed_files"] == "patched by fixmono" and f"--python {python}" in row["detail"], row
    again = fixmono("patch-env", "--python", str(python), "--diff", patch)
    assert again.returncode == 0 and "already patched by fixmono" in again.stdout, again.stdout
    assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    assert tree(site) == pristine


def test_a_patch_that_does_not_fit_writes_nothing(tmp_path):
    python, site = make_env(tmp_path, AFFECTED.before)
    before = tree(site, bytecode=True)
    other = write_patch(tmp_path / "other.patch", "def f():\n    return 1\n", "def f():\n    return 2\n")
    proc = fixmono("patch-env", "--python", str(python), "--diff", other)
    assert proc.returncode == 1 and "not-applicable" in proc.stdout, proc.stdout + proc.stderr
    elsewhere = write_patch(tmp_path / "elsewhere.patch", "a = 1\n", "a = 2\n", "lib/other.py")
    refused(fixmono("patch-env", "--python", str(python), "--diff", elsewhere), "lib is not installed")  # a project of its own
    refused(fixmono("patch-env", "--python", str(python), "--diff", str(tmp_path / "missing.patch")),
            "No such file")
    refused(fixmono("patch-env", "--python", str(python), "--diff", other, "--all"), "not both")
    adds = tmp_path / "adds.patch"  # a new file next to a fitting change: refused whole, before any write
    adds.write_text(open(write_patch(tmp_path / "fits.patch", AFFECTED.before, fixed(AFFECTED.before))).read()
                    + "--- /dev/null\n+++ b/src/transformers/integrations/extra.py\n@@ -0,0 +1 @@\n+a = 1\n")
    refused(fixmono("patch-env", "--python", str(python), "--diff", str(adds)), "adds or deletes files")
    assert tree(site, bytecode=True) == before


def test_two_diffs_of_one_id_are_never_stacked_on_one_file(tmp_path):
    """Two different diffs of one id (the same subject, or here the same file name) on one file in two runs: the
    second is refused, the file left as the first made it (undo could not tell them apart: keeping one rebuilt
    the file from it alone and dropped the other's edit); given in one run, the second is named diff-typo-2."""
    python, site = make_env(tmp_path, AFFECTED.before)
    pristine = tree(site)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_patch(tmp_path / "a" / "typo.patch", AFFECTED.before, fixed(AFFECTED.before))
    done = fixed(AFFECTED.before)
    last = done.splitlines(True)[-1]
    second = write_patch(tmp_path / "b" / "typo.patch", done, done[:-len(last)] + last.rstrip("\n") + "  # checked\n")
    assert fixmono("patch-env", "--python", str(python), "--diff", first).returncode == 0
    patched = (site / MOE).read_bytes()
    refused(fixmono("patch-env", "--python", str(python), "--diff", second), "holds a fix of this id already")
    assert (site / MOE).read_bytes() == patched
    both = fixmono("patch-env", "--python", str(python), "--diff", first, "--diff", second)  # one run: told apart
    assert both.returncode == 0 and "diff-typo-2" in both.stdout, both.stdout + both.stderr
    assert fixmono("patch-env", "--python", str(python), "--undo").returncode == 0
    assert tree(site) == pristine
