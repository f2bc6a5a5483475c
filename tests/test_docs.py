"""The documentation: the MkDocs site builds with --strict (every page, each
fix's README as its page; a link to a page or anchor that is not there fails
it), the README stays short, and its fix table names every fix folder."""
import re
import shutil
import subprocess
import sys

import pytest

from fixmono.model.registry import discover
from fixmono.testing import REPO_ROOT, for_fix

README = REPO_ROOT / "README.md"


def build(root, site) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(site)], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(site.parent)})


def copy_of_the_docs(tmp_path):
    """mkdocs.yml, docs/, the hook and the fix READMEs, as the repository lays them out."""
    root = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("BUILD.bazel"))
    (root / "tools").mkdir()
    shutil.copy(REPO_ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copy(REPO_ROOT / "tools" / "docs_hooks.py", root / "tools" / "docs_hooks.py")
    for readme in REPO_ROOT.glob("fixes/*/*/README.md"):
        target = root / readme.relative_to(REPO_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(readme, target)
    return root


@pytest.mark.catalogue
def test_the_site_builds_strictly_with_a_page_per_fix(tmp_path):
    root = copy_of_the_docs(tmp_path)
    run = build(root, tmp_path / "site")
    assert run.returncode == 0, run.stderr[-3000:]
    fixes = discover()
    pages = list((tmp_path / "site" / "fixes").glob("*/*/index.html"))
    assert len(pages) == len(fixes) >= 22
    index = (tmp_path / "site" / "fixes" / "index.html").read_text()
    assert all(f"<code>{fix.id}</code>" in index for fix in fixes)


@pytest.mark.parametrize("link", ["no-such-page.md", "status.md#no-such-anchor", "/status.md"])
def test_a_broken_link_fails_the_build(tmp_path, link):
    root = copy_of_the_docs(tmp_path)
    page = root / "docs" / "use-it.md"
    page.write_text(page.read_text() + f"\nSee [the missing page]({link}).\n")
    run = build(root, tmp_path / "site")
    assert run.returncode != 0 and link.lstrip("/").split("#")[-1] in run.stderr, run.stderr[-2000:]


def test_the_readme_is_short_and_its_links_lead_somewhere():
    text = README.read_text()
    assert len(text.encode()) < 15 * 1024
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (REPO_ROOT / target).is_file(), target


@pytest.mark.catalogue
def test_the_readme_fix_table_names_every_fix_folder():
    rows = re.findall(r"^\| ([a-z0-9-]+) \|.*\]\((fixes/[a-z_]+/[a-z_0-9]+)/README\.md\) \|$", README.read_text(), re.M)
    folders = {fix.id: "fixes/" + fix.package.removeprefix("fixmono.fixes.").replace(".", "/") for fix in discover()}
    assert dict(rows) == folders


PLACEHOLDER = "(fill in"


@pytest.mark.parametrize("fix", [for_fix(fix.id, fix, id=fix.id) for fix in discover()])
def test_no_placeholder_is_left_in_a_fix(fix):
    """`fixmono import` and `tools/new_fix` write "(fill in ...)" where only the author knows the answer:
    a fix is not done (nor green under tools/check_fix) while one is left in its folder or its catalogue row."""
    left = [f"{path.relative_to(REPO_ROOT)}:{n}" for path in sorted(fix.folder.rglob("*"))
            if path.suffix in (".md", ".py") and "__pycache__" not in path.parts
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if PLACEHOLDER in line]
    left += [f"README.md:{n} (its row)" for n, line in enumerate(README.read_text().splitlines(), 1)
             if line.startswith(f"| {fix.id} |") and PLACEHOLDER in line]
    assert not left, f"{fix.id}: {PLACEHOLDER} ...) left at " + ", ".join(left)
