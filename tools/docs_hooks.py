"""MkDocs hook (mkdocs.yml `hooks:`): each fix folder's README.md becomes a page
of the site, fixes/<project>/<name>.md, and fixes/index.md lists them all, so
the fix pages are the READMEs themselves, never copies kept by hand."""
from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
FIX_ID = re.compile(r"Fix id: `([a-z0-9-]+)`")


def fix_readmes() -> list[tuple[str, str, str, str]]:
    """(project, folder name, fix id, title) of every fix folder with a README, sorted."""
    found = []
    for readme in sorted(ROOT.glob("fixes/*/*/README.md")):
        text = readme.read_text()
        title = text.splitlines()[0].lstrip("# ").strip()
        match = FIX_ID.search(text)
        found.append((readme.parent.parent.name, readme.parent.name, match[1] if match else readme.parent.name, title))
    return found


def on_files(files, config):
    rows = []
    for project, name, fix_id, title in fix_readmes():
        text = (ROOT / "fixes" / project / name / "README.md").read_text()
        files.append(File.generated(config, f"fixes/{project}/{name}.md", content=text))
        rows.append(f"| [`{fix_id}`]({project}/{name}.md) | {project} | {title} |")
    index = ("# The fixes\n\nEach page is the fix folder's own README.md (`fixes/<project>/<name>/`).\n\n"
             "| fix | project | what |\n|---|---|---|\n" + "\n".join(rows) + "\n")
    files.append(File.generated(config, "fixes/index.md", content=index))
    return files
