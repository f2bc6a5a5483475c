"""Where a published wheel is, asked of the indexes pip is configured with
(its configuration files and PIP_* variables, as `pip config list` reports
them; pypi.org only where pip itself would use it, as its default), through
the simple API (PEP 691 JSON or PEP 503 HTML) and find-links. Gives the
wheel's URL and the sha256 the index publishes, downloading nothing (pip's own
`install --dry-run --report` downloads the wheel it resolves).

Any wheel of the release will do: the Python files are the same in all of
them. The order is download_wheel's: a macOS arm64 wheel (the smallest for
packages with native code), then one for this interpreter, then any; a local
file before a remote one.

One overall deadline (FIXMONO_INDEX_DEADLINE seconds, default 120) bounds a
wheel's whole talk with the indexes: page reads, range reads and pip's
download take their timeouts from what is left of it, so a stalled index
fails in about that long, naming the index. A page is read to at most
PAGE_LIMIT bytes; its PEP 691 JSON is checked (model/shapes.py) before use."""
from __future__ import annotations

import base64
import functools
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from fixmono.model.errors import UserError, one_line
from fixmono.model.shapes import SHA256, Maybe, checked, parsed
from fixmono.sources.processes import bounded, env_seconds

PYPI = "https://pypi.org/simple"
TIMEOUT = 30.0  # one wait for an index's answer (never past the deadline)
DEADLINE = 120.0  # default of FIXMONO_INDEX_DEADLINE
PAGE_LIMIT = 64 << 20  # an index page (PyPI's JSON page of torch, thousands of files, is a few MB)
PAGE = {"files": [{"url": str, "hashes?": Maybe({"sha256?": SHA256})}]}  # PEP 691, what is used of it
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass
class Found:
    url: str
    sha256: str | None
    filename: str
    note: str = ""


class Deadline:
    """One overall time limit for a wheel's talk with the indexes."""

    def __init__(self, seconds: float | None = None):
        self.seconds = env_seconds("FIXMONO_INDEX_DEADLINE", DEADLINE) if seconds is None else seconds
        self.end = time.monotonic() + self.seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def timeout(self, cap: float = TIMEOUT) -> float:
        """How long the next wait may take: at most `cap`, never past the
        deadline (TimeoutError, an OSError, once it has passed)."""
        left = self.left()
        if left <= 0:
            raise TimeoutError(f"no answer within FIXMONO_INDEX_DEADLINE={self.seconds:g} s")
        return min(cap, left)


def read_capped(answer, limit: int, deadline: Deadline | None = None) -> bytes:
    """At most `limit` bytes of an HTTP answer, read in blocks: ValueError as
    soon as it is longer (by its Content-Length, or the limit + 1st byte: the
    rest is never read), TimeoutError once the deadline has passed."""
    declared = (answer.headers.get("Content-Length") or "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise ValueError(f"an answer of {declared} bytes, above the {limit} expected")
    blocks, size = [], 0
    while block := answer.read(min(1 << 16, limit + 1 - size)):
        blocks.append(block)
        size += len(block)
        if size > limit:
            raise ValueError(f"an answer longer than the {limit} bytes expected")
        if deadline is not None:
            deadline.timeout()
    return b"".join(blocks)


def pip_within(args: list[str], deadline: Deadline, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m pip ARGS` within what is left of `deadline`: pip's own
    timeout and retries fit in it, and its process group is killed when it
    runs out (subprocess.TimeoutExpired, with what pip said before)."""
    left = deadline.timeout(float("inf"))
    wait = max(1.0, min(15.0, left / 4))  # one stalled request: at most a quarter of what is left, twice
    return bounded([sys.executable, "-m", "pip", *args, "--timeout", f"{wait:.0f}", "--retries", "1"],
                   timeout=left, env=env)


def stalled(what: str, deadline: Deadline, said: str = "") -> UserError:
    """`what` did not come from the indexes pip is configured with within the deadline."""
    settings = pip_settings()
    indexes = [without_auth(i) for i in (settings["index-url"] or [PYPI]) + settings["extra-index-url"]
               + settings["find-links"]]
    return UserError(f"{what}: no answer in time from {', '.join(indexes)} (stalled; all waits on the indexes "
                     f"together are bounded by FIXMONO_INDEX_DEADLINE={deadline.seconds:g} s)"
                     + (f"; pip said: {said}" if said else ""))


def pip_stalled(stderr: str) -> str:
    """pip's line saying an index did not answer in time ("" when none says so):
    pip then reports the release as not found, which it was not."""
    return next((line.strip() for line in reversed((stderr or "").splitlines()) if "timed out" in line.lower()), "")


def last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


@functools.lru_cache(maxsize=1)
def pip_settings() -> dict[str, list[str]]:
    """index-url, extra-index-url, find-links and no-index as pip would use them
    for `pip download` (a PIP_* variable over the files)."""
    try:
        proc = bounded([sys.executable, "-m", "pip", "config", "list"], timeout=60,
                       env={**os.environ, "PIP_CONSTRAINT": ""})
    except subprocess.TimeoutExpired:
        raise UserError("`pip config list` did not answer within 60 s") from None
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


def read_page(url: str, deadline: Deadline | None = None) -> tuple[str, bytes, str]:
    """(final URL, body, content type) of an index page or a find-links folder
    (as links); at most PAGE_LIMIT bytes (ValueError), within the deadline (TimeoutError)."""
    if url.startswith("file:") or "://" not in url:
        path = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path) if url.startswith("file:") else url)
        if path.is_dir() and not (path / "index.html").is_file():
            body = "".join(f'<a href="{urllib.parse.quote(p.name)}">x</a>' for p in sorted(path.iterdir()))
            return path.as_uri() + "/", body.encode(), "text/html"
        page = path / "index.html" if path.is_dir() else path
        with open(page, "rb") as f:
            body = f.read(PAGE_LIMIT + 1)
        if len(body) > PAGE_LIMIT:
            raise ValueError(f"larger than {PAGE_LIMIT >> 20} MiB: not an index page")
        return page.as_uri(), body, "text/html"
    deadline = deadline or Deadline()
    request = urllib.request.Request(url, headers={"Accept": ACCEPT, **basic_auth(url)})
    with urllib.request.urlopen(request, timeout=deadline.timeout()) as answer:
        return answer.geturl(), read_capped(answer, PAGE_LIMIT, deadline), answer.headers.get("Content-Type", "")


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


_pages: dict[str, list[tuple[str, str | None]]] = {}


def page_files(url: str, deadline: Deadline | None = None) -> list[tuple[str, str | None]]:
    """(absolute URL, published sha256 or None) of every file a page links to
    (once per process: a drift run asks torch's page for every release). A
    page of the wrong shape, or a published hash that is not a sha256, is a
    UserError naming the page and the field."""
    if url in _pages:
        return _pages[url]
    final, body, kind = read_page(url, deadline)
    where = f"the index page {without_auth(url)}"
    if "json" in kind:
        files = parsed(body, PAGE, where)["files"]
        out = [(urllib.parse.urljoin(final, f["url"]), (f.get("hashes") or {}).get("sha256")) for f in files]
    else:
        parser = Links()
        parser.feed(body.decode("utf-8", "replace"))
        out = []
        for href in parser.links:
            link, _, fragment = urllib.parse.urljoin(final, href).partition("#")
            sha = checked(fragment.removeprefix("sha256="), SHA256, f"{where}: {href}: #sha256=") \
                if fragment.startswith("sha256=") else None
            out.append((link, sha))
    _pages[url] = out
    return out


def rank(filename: str, here: list) -> tuple:
    tags = parse_wheel_filename(filename)[3]
    this_python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    mac_arm = any("macosx" in t.platform and "arm64" in t.platform for t in tags)
    ours = any(t.interpreter in (this_python, "py3", f"py{sys.version_info.major}") for t in tags)
    compatible = min((here.index(t) for t in tags if t in here), default=len(here))
    return (0 if mac_arm and ours else 1 if compatible < len(here) else 2 if mac_arm else 3, compatible, filename)


def listed(dist: str, version: str, deadline: Deadline | None = None) -> tuple[list[Found], list[str]]:
    """Every wheel of dist==version (`==` as pip reads it: 2.13.0 takes
    2.13.0+cpu) the configured indexes list, best first; and the indexes that
    could not be read (down, stalled past the deadline, too large, or of the
    wrong shape: skipped with the reason, the others may have it)."""
    settings = pip_settings()
    off = settings["no-index"] and settings["no-index"][0].lower() in ("1", "true", "yes", "on")
    indexes = [] if off else (settings["index-url"] or [PYPI]) + settings["extra-index-url"]
    pages = [f"{i.rstrip('/')}/{canonicalize_name(dist)}/" for i in indexes] + settings["find-links"]
    try:
        wanted = SpecifierSet(f"=={version}")
    except InvalidSpecifier:
        return [], []
    here, candidates, problems = list(sys_tags()), [], []
    deadline = deadline or Deadline()
    for page in pages:
        try:
            links = page_files(page, deadline)
        except UserError as err:  # names the page already
            problems.append(str(err))
            continue
        except (OSError, ValueError) as err:  # an index down, stalled or unreadable: the others may have it
            problems.append(f"{without_auth(page)}: {one_line(err) or type(err).__name__}")
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


def find_wheel(dist: str, version: str, deadline: Deadline | None = None) -> tuple[Found | None, list[str]]:
    """The wheel of dist==version to read (None when no index lists one), and
    the indexes that could not be read."""
    found, problems = listed(dist, version, deadline)
    if found:
        found[0].note = "; ".join(problems)
    return (found[0] if found else None), problems


def published_sha256(dist: str, version: str, filename: str, deadline: Deadline | None = None) -> str | None:
    """The sha256 the indexes publish for the wheel file `filename` (None: none published)."""
    return next((f.sha256 for f in listed(dist, version, deadline)[0] if f.filename == filename and f.sha256), None)
