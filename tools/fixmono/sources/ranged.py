"""Members of a published wheel read without downloading it: HTTP range
requests for the zip's end records, its central directory, then each member
asked for, inflated and checked against the central directory's CRC-32 and
size. A partial read cannot check the whole wheel's sha256: what is verified
is each member ("member-crc"); the full download (wheel.py) checks the
sha256. A server that answers a range request with anything but 206 and the
range asked for (or more bytes than asked: never read past them) raises
RangeNotHonoured: the caller downloads the wheel whole.

The central directory is read from the server on every run. Members are
cached under what was verified, never under the sha256 the index publishes
(a lying mirror may publish the genuine one): the hash of (URL, published
sha256, file length, the central directory's bytes) this run's server
answered, in cache/wheel-members/member-crc/. So a member an altered wheel
gave is never read back for another server's, or a corrected server's,
wheel; each is checked against its CRC-32 and size again when read back."""
from __future__ import annotations

import hashlib
import struct
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fixmono.model.errors import UserError, one_line
from fixmono.sources.index import Deadline, read_capped
from fixmono.sources.verify import MAX_MEMBER, MAX_RATIO, RATIO_FLOOR, check_name

TIMEOUT = 60.0
EOCD, ZIP64_LOCATOR, ZIP64_EOCD, CENTRAL, LOCAL = (b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06", b"PK\x01\x02",
                                                   b"PK\x03\x04")
TAIL = 22 + 0xFFFF + 20  # the end record, the longest comment, the zip64 locator before it
SLACK = 1024  # a local header's extra field may be longer than the central directory's
MAX_DIRECTORY = 64 << 20  # a central directory (torch's ~20000 members take ~2 MB)


class RangeNotHonoured(Exception):
    """The server does not serve byte ranges (or not this one)."""


@dataclass(frozen=True)
class Entry:
    name: str
    method: int  # 0 stored, 8 deflated
    crc: int
    compressed: int
    size: int
    offset: int  # of the local header


class RangedWheel:
    """The wheel at `url`, read by ranges; `bytes_read` counts what came over
    the wire, `from_cache` the members read back from the member cache."""

    def __init__(self, url: str, sha256: str | None, cache: Path | None = None, headers: dict | None = None,
                 deadline: Deadline | None = None):
        self.url, self.sha256, self.headers = url, sha256, headers or {}
        self.name = PurePosixPath(urllib.request.url2pathname(url.split("?")[0].split("#")[0])).name
        self.cache_root = cache / "member-crc" if cache is not None else None
        self.cache: Path | None = None  # known once the central directory is read
        self.deadline = deadline or Deadline()
        self.bytes_read = self.requests = self.from_cache = 0
        self.length: int | None = None
        self.key: str | None = None  # known once the central directory is read
        self._entries: dict[str, Entry] | None = None

    def fetch(self, first: int, last: int | None = None) -> bytes:
        """Bytes first..last (inclusive) of the file; first < 0: the last -first bytes."""
        wanted, asked = (f"bytes={first}-{last}", last - first + 1) if first >= 0 else (f"bytes={first}", -first)
        request = urllib.request.Request(self.url, headers={**self.headers, "Range": wanted,
                                                                "Accept-Encoding": "identity"})
        try:
            with urllib.request.urlopen(request, timeout=self.deadline.timeout(TIMEOUT)) as answer:
                if answer.status != 206:
                    raise RangeNotHonoured(f"HTTP {answer.status} to a range request")
                start, end, total = parse_content_range(answer.headers.get("Content-Range", ""))
                if end - start + 1 > asked:
                    raise RangeNotHonoured(f"the server answered range {start}-{end}/{total} to {wanted}: more "
                                           "than asked (not read)")
                data = read_capped(answer, asked, self.deadline)
        except urllib.error.HTTPError as err:
            raise RangeNotHonoured(f"HTTP {err.code} to a range request") from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise RangeNotHonoured(f"{one_line(err) or type(err).__name__} (to {wanted})") from None
        self.requests += 1
        self.bytes_read += len(data)
        expected_start = first if first >= 0 else max(total + first, 0)
        if start != expected_start or len(data) != end - start + 1 or (self.length not in (None, total)):
            raise RangeNotHonoured(f"the server answered range {start}-{end}/{total} to {wanted}")
        self.length = total
        return data

    def entries(self) -> dict[str, Entry]:
        """The central directory, read from the server: member name -> Entry."""
        if self._entries is None:
            self._entries = self.read_directory()
        return self._entries

    def read_directory(self) -> dict[str, Entry]:
        tail = self.fetch(-TAIL)
        at = tail.rfind(EOCD)
        if at < 0 or len(tail) < at + 22:
            raise self.refuse("no zip end record: not a zip file")
        count, size, offset = struct.unpack("<10xHII2x", tail[at:at + 22])
        if at >= 20 and tail[at - 20:at - 16] == ZIP64_LOCATOR:  # more than 65535 members or 4 GiB
            (where,) = struct.unpack("<xxxxxxxxQxxxx", tail[at - 20:at])
            record = self.fetch(where, where + 55)
            if record[:4] != ZIP64_EOCD:
                raise self.refuse("zip64 end record missing where its locator points")
            count, size, offset = struct.unpack("<32xQQQ", record[:56])
        if size > MAX_DIRECTORY or count > size // 46:
            raise self.refuse(f"a central directory of {size} bytes for {count} members (a wheel's is at most "
                              f"{MAX_DIRECTORY >> 20} MiB, at least 46 bytes a member)")
        tail_start = self.length - len(tail)
        if tail_start <= offset and offset + size <= self.length:  # read already, with the end record
            directory = tail[offset - tail_start:offset - tail_start + size]
        else:
            directory = self.fetch(offset, offset + size - 1) if size else b""
        # what this run's server answered, not what the index publishes: the member cache's key
        key = b"\0".join([self.url.encode(), (self.sha256 or "").encode(), str(self.length).encode(), directory])
        self.key = hashlib.sha256(key).hexdigest()
        if self.cache_root is not None:
            self.cache = self.cache_root / self.key
        entries, pos = {}, 0
        for _ in range(count):
            if directory[pos:pos + 4] != CENTRAL:
                raise self.refuse("central directory entry damaged")
            (method, crc, compressed, length, name_len, extra_len, comment_len,
             local) = struct.unpack("<10xH4xIIIHHH8xI", directory[pos:pos + 46])
            name = directory[pos + 46:pos + 46 + name_len].decode("utf-8", "replace")
            extra = directory[pos + 46 + name_len:pos + 46 + name_len + extra_len]
            length, compressed, local = zip64_sizes(extra, length, compressed, local)
            entries[name] = Entry(name, method, crc, compressed, length, local)
            pos += 46 + name_len + extra_len + comment_len
        return entries

    def read(self, name: str) -> bytes:
        """The member's bytes, checked against its CRC-32 and size."""
        entry = self.entries().get(name)
        if entry is None:
            raise KeyError(name)
        check_name(Path(self.name), name)
        if entry.size > MAX_MEMBER or (entry.size > RATIO_FLOOR and entry.size > MAX_RATIO * max(entry.compressed, 1)):
            raise self.refuse(f"{name}: declares {entry.size} bytes from {entry.compressed} (a zip bomb?)")
        cached = self.cache / "members" / hashlib.sha256(name.encode()).hexdigest() if self.cache else None
        if cached is not None and cached.is_file():
            data = cached.read_bytes()
            if len(data) == entry.size and zlib.crc32(data) == entry.crc:
                self.from_cache += 1
                return data
        data = self.inflate(entry)
        if len(data) != entry.size or zlib.crc32(data) != entry.crc:
            raise self.refuse(f"{name}: does not match the CRC-32 and size of the wheel's central directory "
                              "(a damaged or altered wheel)")
        if cached is not None:
            store(cached, data)
        return data

    def inflate(self, entry: Entry) -> bytes:
        last = entry.offset + 30 + len(entry.name.encode()) + SLACK + entry.compressed - 1
        block = self.fetch(entry.offset, min(last, (self.length or last + 1) - 1))
        if block[:4] != LOCAL:
            raise self.refuse(f"{entry.name}: no local header where the central directory points")
        name_len, extra_len = struct.unpack("<26xHH", block[:30])
        start = 30 + name_len + extra_len
        if len(block) < start + entry.compressed:
            block += self.fetch(entry.offset + len(block), entry.offset + start + entry.compressed - 1)
        raw = block[start:start + entry.compressed]
        if entry.method == 0:
            return raw
        if entry.method != 8:
            raise self.refuse(f"{entry.name}: compression method {entry.method} (wheels use stored or deflate)")
        inflater = zlib.decompressobj(-15)
        try:
            data = inflater.decompress(raw, entry.size + 1)
        except zlib.error as err:
            raise self.refuse(f"{entry.name}: does not inflate ({err})") from None
        return data

    def refuse(self, rule: str) -> UserError:
        return UserError(f"{self.name} ({self.url}): {rule}")


def parse_content_range(value: str) -> tuple[int, int, int]:
    """"bytes 10-19/100" -> (10, 19, 100)."""
    unit, _, rest = value.partition(" ")
    span, _, total = rest.partition("/")
    first, _, last = span.partition("-")
    if unit != "bytes" or not (first.isdigit() and last.isdigit() and total.isdigit()):
        raise ValueError(f"no usable Content-Range ({value!r})")
    return int(first), int(last), int(total)


def zip64_sizes(extra: bytes, size: int, compressed: int, offset: int) -> tuple[int, int, int]:
    """The sizes and offset a zip64 extra field (id 1) gives for the fields set to 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        kind, length = struct.unpack("<HH", extra[pos:pos + 4])
        if kind == 1:
            values = list(struct.unpack(f"<{length // 8}Q", extra[pos + 4:pos + 4 + length - length % 8]))
            out = []
            for field in (size, compressed, offset):
                out.append(values.pop(0) if field == 0xFFFFFFFF and values else field)
            return out[0], out[1], out[2]
        pos += 4 + length
    return size, compressed, offset


def store(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
