"""The drift and behaviour matrix as a static site (`drift --html DIR`,
`fixmono report --html DIR REPORT.json`): one grid per project, fixes x
releases, each cell coloured by make_patch's status and marked with the
reproducer's verdict, disagreements flagged; the detail on hover, and on a
click the fix's page with its rows and README. Plain HTML and CSS written
here: it opens from file:// with no server and no network.
"""
from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from fixmono.output.out_dir import SeriesWrite, check_ours

STATUSES = ("applied", "already-applied", "not-applicable", "failed")
VERDICT_MARK = {"reproduced": "●", "not-reproduced": "○", "cannot-run-here": "?"}
LEGEND = {"applied": "applied: the bug's code is there, the fix applies",
          "already-applied": "already-applied: the release has the fix",
          "not-applicable": "not-applicable: the code is not there",
          "failed": "failed: the engine refused, with the reason"}
CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1, h2 { font-weight: 600; }
table.grid { border-collapse: collapse; margin-bottom: 2em; }
table.grid th { font-weight: 500; padding: 2px 4px; white-space: nowrap; }
table.grid th.version { writing-mode: vertical-rl; transform: rotate(180deg); font-size: 12px; }
table.grid td.cell { width: 22px; height: 22px; text-align: center; border: 1px solid #fff; padding: 0; }
td.cell a { display: block; color: #111; text-decoration: none; line-height: 22px; }
.applied { background: #f4a582; }
.already-applied { background: #92c5de; }
.not-applicable { background: #e0e0e0; }
.failed { background: #7b3294; color: #fff; }
.failed a { color: #fff; }
.none { background: #fafafa; }
td.disagree { outline: 3px solid #d7191c; outline-offset: -3px; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 6px; }
table.rows { border-collapse: collapse; }
table.rows td, table.rows th { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
pre.readme { white-space: pre-wrap; background: #f7f7f7; padding: 1em; }
"""


SITE = "fixmono-site"  # out_dir's name for the site's manifest and holders


def write_site(payload: dict, folder: Path, readmes: dict[str, tuple[str, str]], flag: str = "--html") -> list[Path]:
    """Write index.html and one page per fix into `folder` from a drift --json
    payload (`matrix`, and `runs` when the reproducers ran); `readmes` maps a
    fix id to (its project, its README text). Returns the files written.
    As make_patch's --out: `folder` is new, empty or holds a site written
    here (its manifest); the site is written beside it and swapped in whole."""
    folder = folder.resolve()
    if folder.is_dir():
        check_ours(folder, f"{flag} {folder}", SITE)
    files = site_files(payload, readmes)
    site = SeriesWrite(folder, SITE, flag)
    site.stage(files)
    try:
        site.commit()
    except BaseException:
        site.discard()
        raise
    site.finish()
    return [folder / name for name in files]


def site_files(payload: dict, readmes: dict[str, tuple[str, str]]) -> dict[str, bytes]:
    """{file name: bytes} of the site: index.html and a page per fix."""
    matrix, runs = payload.get("matrix") or {}, payload.get("runs") or {}
    verdicts = {fix_id: {r["version"]: r for r in rows} for fix_id, rows in runs.items()}
    pages = {"index.html": index_page(matrix, verdicts, readmes, payload)}
    for fix_id in sorted(set(matrix) | set(runs)):
        pages[page_name(fix_id)] = fix_page(fix_id, matrix.get(fix_id, []), verdicts.get(fix_id, {}),
                                            readmes.get(fix_id))
    return {name: text.encode("utf-8") for name, text in pages.items()}


def page_name(fix_id: str) -> str:
    """A file name per fix id; an id with other characters than a-z, 0-9 and - gets
    a hash of itself, so two ids never share a page (`a.b` and `a-b`)."""
    name = re.sub(r"[^a-z0-9-]", "-", fix_id.lower())
    return f"fix-{name}.html" if name == fix_id else f"fix-{name}-{hashlib.sha256(fix_id.encode()).hexdigest()[:8]}.html"


def version_key(text: str):
    try:
        return (0, Version(text), text)
    except InvalidVersion:
        return (1, Version("0"), text)


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n")


def index_page(matrix: dict, verdicts: dict, readmes: dict, payload: dict) -> str:
    by_project: dict[str, list[str]] = {}
    for fix_id in sorted(set(matrix) | set(verdicts)):
        by_project.setdefault(readmes.get(fix_id, ("other", ""))[0], []).append(fix_id)
    legend = "".join(f'<span class="{s}">{html.escape(LEGEND[s])}</span>' for s in STATUSES)
    marks = " · ".join(f"{mark} {verdict}" for verdict, mark in VERDICT_MARK.items())
    disagreements = sum(1 for rows in verdicts.values() for r in rows.values() if r.get("finding"))
    body = [f"<h1>Drift and behaviour matrix</h1><p class=\"legend\">{legend}</p>",
            f"<p>Reproducer verdicts: {marks}. A red frame: the verdict disagrees with make_patch's status "
            f"({disagreements} here). Hover a cell for its detail, click it for the fix's page.</p>"]
    for project, fix_ids in sorted(by_project.items()):
        versions = sorted({c["version"] for f in fix_ids for c in matrix.get(f, [])} |
                          {v for f in fix_ids for v in verdicts.get(f, {})}, key=version_key)
        head = "".join(f'<th class="version">{html.escape(v)}</th>' for v in versions)
        rows = []
        for fix_id in fix_ids:
            cells = {c["version"]: c for c in matrix.get(fix_id, [])}
            tds = "".join(cell(fix_id, v, cells.get(v), verdicts.get(fix_id, {}).get(v)) for v in versions)
            rows.append(f'<tr><th><a href="{page_name(fix_id)}">{html.escape(fix_id)}</a></th>{tds}</tr>')
        body.append(f"<h2>{html.escape(project)}</h2><table class=\"grid\" data-project=\"{html.escape(project)}\">"
                    f"<tr><th></th>{head}</tr>{''.join(rows)}</table>")
    if payload.get("not_run"):
        body.append("<h2>Not run here</h2><ul>" + "".join(
            f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in sorted(payload["not_run"].items())) + "</ul>")
    return page("Drift and behaviour matrix", "\n".join(body))


def cell(fix_id: str, version: str, row: dict | None, run: dict | None) -> str:
    if row is None and run is None:
        return '<td class="cell none"></td>'
    status = (row or {}).get("status") or (run or {}).get("static", "")
    kind = status if status in STATUSES else "none"
    tip = [f"{fix_id} {version}: {status}"]
    if row and row.get("detail"):
        tip.append(row["detail"])
    mark = ""
    if run:
        mark = VERDICT_MARK.get(run["verdict"], "")
        tip.append(f"reproducer: {run['verdict']}: {run.get('detail', '')}")
        if run.get("finding"):
            tip.append(f"DISAGREES: {run['finding']}")
    flag = " disagree" if run and run.get("finding") else ""
    anchor = f"{page_name(fix_id)}#v-{html.escape(version)}"
    return (f'<td class="cell {kind}{flag}" data-status="{html.escape(status)}" '
            f'data-verdict="{html.escape(run["verdict"] if run else "")}" title="{html.escape(" | ".join(tip))}">'
            f'<a href="{anchor}">{mark}</a></td>')


def fix_page(fix_id: str, cells: list, verdicts: dict, readme: tuple[str, str] | None) -> str:
    rows = []
    for version in sorted({c["version"] for c in cells} | set(verdicts), key=version_key):
        row = next((c for c in cells if c["version"] == version), {})
        run = verdicts.get(version, {})
        status = row.get("status") or run.get("static", "")
        rows.append(f'<tr id="v-{html.escape(version)}"><td>{html.escape(version)}</td>'
                    f'<td class="{status if status in STATUSES else "none"}">{html.escape(status)}</td>'
                    f"<td>{html.escape(row.get('static', ''))}</td><td>{html.escape(run.get('verdict', ''))}</td>"
                    f"<td>{html.escape(run.get('finding', ''))}</td>"
                    f"<td>{html.escape(row.get('detail', '') or run.get('detail', ''))}</td></tr>")
    table = ("<table class=\"rows\"><tr><th>release</th><th>make_patch</th><th>static patch</th>"
             "<th>reproducer</th><th>disagreement</th><th>detail</th></tr>" + "".join(rows) + "</table>")
    text = f'<pre class="readme">{html.escape(readme[1])}</pre>' if readme else ""
    return page(fix_id, f'<p><a href="index.html">all fixes</a></p><h1>{html.escape(fix_id)}</h1>{table}{text}')
