"""`fixmono report --html`: a drift run as a static site, rendered in a real
browser. The payload is the shape `fixmono drift --json` prints (our own rows:
two projects, every status, the reproducer's verdicts, one disagreement); the
site is opened from file:// in headless Chromium (Debian's package, installed
by tools/setup) and its screenshot must show each status's colour and the
disagreement's frame; bad input is one line and nothing written."""
import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from fixmono.runtime.child import child_env

COLOURS = {"applied": (0xF4, 0xA5, 0x82), "already-applied": (0x92, 0xC5, 0xDE), "failed": (0x7B, 0x32, 0x94),
           "not-applicable": (0xE0, 0xE0, 0xE0), "disagreement": (0xD7, 0x19, 0x1C)}


def rows(*statuses):
    return [{"version": f"1.{n}.0", "status": s, "detail": f"x.py: {s} here", "static": "n/a", "read": "range"}
            for n, s in enumerate(statuses)]


def run_of(version, static, verdict, finding=""):
    return {"version": version, "static": static, "verdict": verdict, "detail": f"{verdict} on {version}",
            "finding": finding, "seconds": 1.0}


PAYLOAD = {
    "matrix": {"transformers-moe-aux-loss-world-size": rows("not-applicable", "applied", "applied", "already-applied"),
               "jax-standardize-nan": rows("applied", "failed", "already-applied")},
    "runs": {"transformers-moe-aux-loss-world-size": [
        run_of("1.1.0", "applied", "reproduced"),
        run_of("1.3.0", "already-applied", "reproduced", finding="make_patch says already-applied, the bug is there")],
        "jax-standardize-nan": [run_of("1.0.0", "applied", "cannot-run-here")]},
}


def report(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "fixmono", "report", *map(str, args)], capture_output=True,
                          text=True, input=stdin, env=child_env(), timeout=120)


def test_the_site_holds_a_grid_per_project_and_a_page_per_fix(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps(PAYLOAD))
    done = report("--html", tmp_path / "site", tmp_path / "run.json")
    assert done.returncode == 0 and done.stdout.startswith("wrote 3 page(s)"), done.stderr
    index = (tmp_path / "site" / "index.html").read_text()
    assert index.count('<table class="grid"') == 2 and 'data-project="jax"' in index
    assert index.count('class="cell applied') == 3 and index.count('class="cell failed') == 1
    assert index.count(' disagree"') == 1 and "DISAGREES: make_patch says already-applied" in index
    assert index.count('data-verdict="reproduced"') == 2 and "http" not in index.replace("http-equiv", "")
    page = (tmp_path / "site" / "fix-jax-standardize-nan.html").read_text()
    assert 'id="v-1.1.0"' in page and "cannot-run-here" in page and "## Mechanism" in page  # its README too


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (tools/setup installs it)")
def test_a_real_browser_shows_the_colours_and_the_disagreement(tmp_path):
    done = report("--html", tmp_path / "site", "-", stdin=json.dumps(PAYLOAD))
    assert done.returncode == 0, done.stderr
    shot = tmp_path / "shot.png"
    browser = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,700", f"--screenshot={shot}",
         (tmp_path / "site" / "index.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.is_file(), browser.stderr[-2000:]
    pixels = png_pixels(shot.read_bytes())
    for name, colour in COLOURS.items():
        assert pixels.get(colour, 0) > 20, (name, sorted(pixels.items(), key=lambda kv: -kv[1])[:8])


def png_pixels(data: bytes) -> dict[tuple[int, int, int], int]:
    """How many pixels of each RGB colour an 8-bit RGB/RGBA PNG holds (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour_type = header[:4]
    assert depth == 8 and colour_type in (2, 6), header
    size = 3 if colour_type == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks)), width * size
    counts, previous = {}, bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - size] if x >= size else 0
            up, corner = previous[x], previous[x - size] if x >= size else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        for x in range(0, stride, size):
            rgb = (line[x], line[x + 1], line[x + 2])
            counts[rgb] = counts.get(rgb, 0) + 1
        previous = line
    return counts


@pytest.mark.parametrize("content, why", [
    ("not json", "not a drift report: Expecting value"),
    ('{"markdown": "x"}', "no `matrix` or `runs`"),
    ('{"matrix": {"f": [1, 2]}}', "the rows of 'f' are not a list"),
    ('{"runs": {"f": [{"version": "1.0"}]}}', "the rows of 'f' are not a list of {version, static, verdict"),
    ('{"runs": [1]}', "map fix ids to rows"),
    ('{"matrix": {"f": [{"version": "1.0", "status": 5}]}}', "with text values"),
    ('{"matrix": {}, "not_run": {"f": 1}}', "`not_run` maps fix ids to reasons"),
])
def test_bad_input_is_one_line_and_nothing_is_written(tmp_path, content, why):
    (tmp_path / "run.json").write_text(content)
    done = report("--html", tmp_path / "site", tmp_path / "run.json")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and why in done.stderr, done.stderr
    assert not (tmp_path / "site").exists()
    (tmp_path / "afile").write_text("")
    done = report("--html", tmp_path / "afile", "-", stdin=json.dumps(PAYLOAD))
    assert done.returncode == 2 and "is not a folder" in done.stderr, done.stderr


def test_two_ids_that_read_alike_get_two_pages(tmp_path):
    """Found by review: `a.b` and `a-b` made one file name, so one row opened the other's page."""
    payload = {"matrix": {"a.b": rows("applied"), "a-b": rows("failed")}}
    done = report("--html", tmp_path / "site", "-", stdin=json.dumps(payload))
    assert done.returncode == 0 and done.stdout.startswith("wrote 3 page(s)"), done.stderr
    pages = sorted(p.name for p in (tmp_path / "site").glob("fix-*.html"))
    assert len(pages) == 2 and "fix-a-b.html" in pages, pages
    assert all(f'href="{page}"' in (tmp_path / "site" / "index.html").read_text() for page in pages)


def tree_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("theirs", [
    {"index.html": "<p>my own page</p>"},
    {"fix-jax-standardize-nan.html": "<p>my notes on it</p>"},
    {"notes.txt": "mine"},
    {"sub/index.html": "mine"},
    {".fixmono-site-manifest": "# not a manifest of ours\n"},
], ids=["index.html", "a fix page", "another file", "a subfolder", "a bare manifest"])
def test_a_folder_holding_the_users_files_is_refused_and_left_alone(tmp_path, theirs):
    site = tmp_path / "site"
    for name, text in theirs.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    before = tree_of(site)
    done = report("--html", site, "-", stdin=json.dumps(PAYLOAD))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "give an empty or new directory" in done.stderr, \
        done.stderr
    assert tree_of(site) == before and sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_a_site_written_here_is_replaced_whole_but_not_once_edited(tmp_path):
    site = tmp_path / "site"
    assert report("--html", site, "-", stdin=json.dumps(PAYLOAD)).returncode == 0
    assert (site / "fix-jax-standardize-nan.html").is_file()
    one = {"matrix": {"transformers-moe-aux-loss-world-size": rows("applied")}}
    done = report("--html", site, "-", stdin=json.dumps(one))
    assert done.returncode == 0 and done.stdout.startswith("wrote 2 page(s)"), done.stderr
    assert sorted(p.name for p in site.iterdir()) == [".fixmono-site-manifest", "fix-transformers-moe-aux-loss-"
                                                      "world-size.html", "index.html"]  # no page of the last site
    (site / "index.html").write_text((site / "index.html").read_text() + "<!-- my edit -->")
    before = tree_of(site)
    done = report("--html", site, "-", stdin=json.dumps(PAYLOAD))
    assert done.returncode == 2 and "index.html was changed" in done.stderr and done.stderr.count("\n") == 1
    assert tree_of(site) == before and sorted(p.name for p in tmp_path.iterdir()) == ["site"]


BAD_ROWS = {
    "detail an object": {"matrix": {"f": [{"version": "1.0", "status": "applied", "detail": {"a": 1}}]}},
    "static a number": {"matrix": {"f": [{"version": "1.0", "status": "applied", "static": 1}]}},
    "finding a list": {"runs": {"f": [{"version": "1.0", "static": "applied", "verdict": "reproduced",
                                       "finding": ["x"]}]}},
    "run detail null": {"runs": {"f": [{"version": "1.0", "static": "applied", "verdict": "reproduced",
                                        "detail": None}]}},
}


@pytest.mark.parametrize("case", BAD_ROWS)
@pytest.mark.parametrize("into", ["a new folder", "a site written here"])
def test_a_row_of_the_wrong_shape_is_one_line_and_nothing_is_written(tmp_path, case, into):
    site = tmp_path / "site"
    if into == "a site written here":
        assert report("--html", site, "-", stdin=json.dumps(PAYLOAD)).returncode == 0
    before = tree_of(site) if site.exists() else None
    done = report("--html", site, "-", stdin=json.dumps(BAD_ROWS[case]))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not a drift report: " in done.stderr, \
        done.stderr
    assert (tree_of(site) if site.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == (["site"] if before else [])


def test_a_failure_while_the_site_is_made_leaves_the_last_site_whole(tmp_path, monkeypatch):
    """The pages are made, written beside the folder, then swapped in: a page
    that fails leaves the site that was there, and nothing beside it."""
    from fixmono.output import html_report
    site = tmp_path / "site"
    html_report.write_site(PAYLOAD, site, {})
    before = tree_of(site)

    def broken(fix_id, *args):
        raise TypeError("a page that cannot be made")
    monkeypatch.setattr(html_report, "fix_page", broken)
    with pytest.raises(TypeError):
        html_report.write_site({"matrix": {"other": rows("failed")}}, site, {})
    assert tree_of(site) == before and sorted(p.name for p in tmp_path.iterdir()) == ["site"]
