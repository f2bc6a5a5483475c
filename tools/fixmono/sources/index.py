"""Where a published wheel is, asked of the indexes pip is configured with
(its configuration files and PIP_* variables, as `pip config list` reports
them; pypi.org only where pip itself would use it, as its default), through
the simple API (PEP 691 JSON or PEP 503 HTML) and find-links. Gives the
wheel's URL and the sha256 the index publishes, downloading nothing (pip's own
`install --dry-run --report` downloads the wheel it resolves).

Any wheel of the release will do: the Python files are the same in all of
them. The order is download_wheel's: a macOS arm64 wheel (the smallest for
packages with native code), then one for this interpreter, then any; a local
file before a remote one."""
from __future__ import annotations

import base64
import functools
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.specifiers import InvalidSpecifier, SpecifierSet

PYPI = "https://pypi.org/simple"
TIMEOUT = 30.0
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass
class Found:
    url: str
    sha256: str | None
    filename: str
    note: str = ""


@functools.lru_cache(maxsize=1)
def pip_settings() -> dict[str, list[str]]:
    """index-url, extra-index-url, find-links and no-index as pip would use them
    for `pip download` (a PIP_* variable over the files)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          env={**os.environ, "PIP_CONSTRAINT": ""}, timeout=60)
    files: dict[str, str] = {}
    variables: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        match = re.match(r"^(:env:|global|download|install)\.([a-z-]+)='(.*)'$", line)
        if match:
            (variables if match[1] == ":env:" else files)[match[2]] = match[3]
    chosen = {**files, **variables}
    return {key: chosen.get(key, "").split() for key in ("index-url", "extra-index-url", "find-links", "no-index")}


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links.append(href)


def read_page(url: str) -> tuple[str, bytes, str]:
    """(final URL, body, content type) of an index page or a find-links folder (as links)."""
    if url.startswith("file:") or "://" not in url:
        path = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path) if url.startswith("file:") else url)
        if path.is_dir() and not (path / "index.html").is_file():
            body = "".join(f'<a href="{urllib.parse.quote(p.name)}">x</a>' for p in sorted(path.iterdir()))
            return path.as_uri() + "/", body.encode(), "text/html"
        page = path / "index.html" if path.is_dir() else path
        return page.as_uri(), page.read_bytes(), "text/html"
    request = urllib.request.Request(url, headers={"Accept": ACCEPT, **basic_auth(url)})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
        return answer.geturl(), answer.read(), answer.headers.get("Content-Type", "")


def basic_auth(url: str) -> dict[str, str]:
    """user:password@ in an index URL, as pip takes it."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return {}
    token = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    return {"Authorization": "Basic " + base64.b64encode(token.encode()).decode()}


def without_auth(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))) \
        if parts.username is not None else url


@functools.lru_cache(maxsize=64)
def page_files(url: str) -> list[tuple[str, str | None]]:
    """(absolute URL, published sha256 or None) of every file a page links to
    (once per process: a drift run asks torch's page for every release)."""
    final, body, kind = read_page(url)
    if "json" in kind:
        files = json.loads(body).get("files", [])
        return [(urllib.parse.urljoin(final, f["url"]), (f.get("hashes") or {}).get("sha256")) for f in files]
    parser = Links()
    parser.feed(body.decode("utf-8", "replace"))
    out = []
    for href in parser.links:
        link, _, fragment = urllib.parse.urljoin(final, href).partition("#")
        sha = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        out.append((link, sha))
    return out


def rank(filename: str, here: list) -> tuple:
    tags = parse_wheel_filename(filename)[3]
    this_python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    mac_arm = any("macosx" in t.platform and "arm64" in t.platform for t in tags)
    ours = any(t.interpreter in (this_python, "py3", f"py{sys.version_info.major}") for t in tags)
    compatible = min((here.index(t) for t in tags if t in here), default=len(here))
    return (0 if mac_arm and ours else 1 if compatible < len(here) else 2 if mac_arm else 3, compatible, filename)


def listed(dist: str, version: str) -> tuple[list[Found], list[str]]:
    """Every wheel of dist==version (`==` as pip reads it: 2.13.0 takes
    2.13.0+cpu) the configured indexes list, best first; and the indexes that
    could not be read."""
    settings = pip_settings()
    off = settings["no-index"] and settings["no-index"][0].lower() in ("1", "true", "yes", "on")
    indexes = [] if off else (settings["index-url"] or [PYPI]) + settings["extra-index-url"]
    pages = [f"{i.rstrip('/')}/{canonicalize_name(dist)}/" for i in indexes] + settings["find-links"]
    try:
        wanted = SpecifierSet(f"=={version}")
    except InvalidSpecifier:
        return [], []
    here, candidates, problems = list(sys_tags()), [], []
    for page in pages:
        try:
            links = page_files(page)
        except (OSError, ValueError) as err:  # an index down or unreadable: the others may have it
            problems.append(f"{without_auth(page)}: {err}")
            continue
        for link, sha in links:
            filename = urllib.parse.unquote(link.rsplit("/", 1)[-1])
            try:
                name, found_version, _, _ = parse_wheel_filename(filename)
            except ValueError:
                continue
            if name == canonicalize_name(dist) and wanted.contains(found_version, prereleases=True):
                candidates.append((not link.startswith("file:"), rank(filename, here), link, sha, filename))
    return [Found(link, sha.lower() if sha else None, filename) for *_, link, sha, filename in sorted(candidates)], \
        problems


def find_wheel(dist: str, version: str) -> Found | None:
    """The wheel of dist==version to read, or None when no index lists one."""
    found, problems = listed(dist, version)
    if not found:
        return None
    found[0].note = "; ".join(problems)
    return found[0]


def published_sha256(dist: str, version: str, filename: str) -> str | None:
    """The sha256 the indexes publish for the wheel file `filename` (None: none published)."""
    return next((f.sha256 for f in listed(dist, version)[0] if f.filename == filename and f.sha256), None)
