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
