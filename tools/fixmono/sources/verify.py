"""Verification of a wheel this package did not build, before any of it is
used: what pip's installer and the wheel spec (PEP 427, PEP 376 RECORD)
require, and more. A wheel that breaks a rule is refused with one line naming
the member and the rule; nothing of it is extracted before it passes."""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from fixmono.model.errors import UserError

MAX_MEMBER = 8 << 30  # declared uncompressed size of one member (CUDA libraries reach ~2 GiB)
MAX_TOTAL = 32 << 30  # declared uncompressed size of the whole wheel
MAX_RATIO = 200  # uncompressed / compressed, for members above RATIO_FLOOR (deflate tops out near 1032)
RATIO_FLOOR = 1 << 20
CHUNK = 1 << 20
HASHES = {"sha256", "sha384", "sha512"}  # what RECORD may use (PEP 376 via the wheel spec: sha256 or better)
SIGNATURES = ("RECORD.jws", "RECORD.p7s")  # RECORD and these carry no hash of their own


def record_hash(data: bytes, like: str | None = None) -> str:
    """A RECORD hash field of `data`: "sha256=<urlsafe base64, no padding>",
    or with the algorithm of `like` (another RECORD hash field)."""
    algorithm = (like or "").partition("=")[0]
    digest = hashlib.new(algorithm if algorithm in HASHES else "sha256", data)
    return f"{digest.name}=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class VerifiedWheel:
    path: Path
    sha256: str  # of the whole file
    name: str  # distribution name as in the file name
    version: str
    dist_info: str  # "<name>-<version>.dist-info"
    members: dict[str, str] = field(default_factory=dict)  # member -> its RECORD hash ("sha256=...")


def refuse(wheel: Path, member: str, rule: str) -> UserError:
    return UserError(f"{wheel.name}: {member}: {rule}" if member else f"{wheel.name}: {rule}")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def check_name(wheel: Path, name: str) -> None:
    parts = PurePosixPath(name).parts
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or "\\" in name:
        raise refuse(wheel, name, "absolute name (a member must stay inside the install folder)")
    if ".." in parts or "" in name.split("/")[:-1]:
        raise refuse(wheel, name, "'..' or empty part in the name (a member must stay inside the install folder)")


def check_kind(wheel: Path, info: zipfile.ZipInfo) -> None:
    kind = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0  # unix: type bits of the mode
    if kind == stat.S_IFLNK:
        raise refuse(wheel, info.filename, "symlink entry (a wheel holds regular files only)")
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: no type given (zipfile's writestr), a regular file
        raise refuse(wheel, info.filename, "special-file entry (a wheel holds regular files only)")


def check_size(wheel: Path, info: zipfile.ZipInfo) -> None:
    if info.file_size > MAX_MEMBER:
        raise refuse(wheel, info.filename, f"declares {info.file_size} bytes, above the {MAX_MEMBER >> 30} GiB "
                                           "limit for a member")
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        raise refuse(wheel, info.filename, f"compression ratio {info.file_size / max(info.compress_size, 1):.0f}:1 "
                                           f"(above {MAX_RATIO}:1, a zip bomb)")


def member_digest(wheel: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, algorithm: str) -> tuple[str, int]:
    """The member's hash and its size, inflated in chunks, never past its declared size."""
    digest, size = hashlib.new(algorithm), 0
    try:
        with zf.open(info) as f:
            while block := f.read(CHUNK):
                size += len(block)
                if size > info.file_size:
                    raise refuse(wheel, info.filename, "inflates past its declared size")
                digest.update(block)
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError) as err:
        raise refuse(wheel, info.filename, f"cannot be read ({err})") from None
    value = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    return f"{algorithm}={value}", size


def read_record(wheel: Path, zf: zipfile.ZipFile, record: str) -> dict[str, tuple[str, str]]:
    try:
        text = zf.read(record).decode("utf-8")
    except (zipfile.BadZipFile, UnicodeDecodeError, OSError) as err:
        raise refuse(wheel, record, f"cannot be read ({err})") from None
    rows = {}
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if len(row) != 3:
            raise refuse(wheel, record, f"row {row!r} does not have three fields (path, hash, size)")
        path, digest, size = row
        if path in rows:
            raise refuse(wheel, record, f"lists {path} twice")
        rows[path] = (digest, size)
    return rows


def verify_wheel(wheel: Path, expect_sha256: str | None = None) -> VerifiedWheel:
    """`wheel` checked whole; a violation is one UserError naming the member and the rule."""
    if not wheel.is_file():
        raise UserError(f"{wheel}: no such file" if not wheel.exists() else f"{wheel}: not a file")
    try:
        name, version, _, _ = parse_wheel_filename(wheel.name)
    except (InvalidWheelFilename, InvalidVersion) as err:
        raise UserError(f"{wheel}: not a wheel file name ({err})") from None
    sha256 = file_sha256(wheel)
    if expect_sha256 is not None and sha256 != expect_sha256.lower():
        raise refuse(wheel, "", f"sha256 is {sha256}, expected {expect_sha256.lower()} (the file is not the "
                                "published wheel)")
    try:
        zf = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as err:
        raise refuse(wheel, "", f"not a valid zip file, truncated or damaged ({err})") from None
    with zf:
        infos = zf.infolist()
        seen: set[str] = set()
        total = 0
        for info in infos:
            if info.filename in seen:
                raise refuse(wheel, info.filename, "duplicate member name (which copy is installed is undefined)")
            seen.add(info.filename)
            check_name(wheel, info.filename)
            check_kind(wheel, info)
            check_size(wheel, info)
            total += info.file_size
        if total > MAX_TOTAL:
            raise refuse(wheel, "", f"declares {total} bytes in all, above the {MAX_TOTAL >> 30} GiB limit")
        dist_infos = sorted({n.split("/")[0] for n in seen if n.split("/")[0].endswith(".dist-info")})
        if len(dist_infos) != 1:
            raise refuse(wheel, "", f"has {len(dist_infos)} .dist-info folders ({', '.join(dist_infos) or 'none'}), "
                                    "a wheel has exactly one")
        dist_info = dist_infos[0]
        info_name, _, info_version = dist_info.removesuffix(".dist-info").rpartition("-")
        try:
            same = canonicalize_name(info_name) == name and Version(info_version) == version
        except InvalidVersion:
            same = False
        if not same:
            raise refuse(wheel, dist_info, f"does not match the file name ({name} {version})")
        record = f"{dist_info}/RECORD"
        if record not in seen:
            raise refuse(wheel, record, "missing (a wheel lists every member with its hash)")
        listed = read_record(wheel, zf, record)
        unhashed = {record} | {f"{dist_info}/{s}" for s in SIGNATURES}
        members = {}
        for info in infos:
            if info.is_dir():
                continue
            if info.filename not in listed:
                raise refuse(wheel, info.filename, "not listed in RECORD")
            if info.filename in unhashed:
                continue
            digest, size = listed[info.filename]
            algorithm = digest.partition("=")[0]
            if algorithm not in HASHES:
                raise refuse(wheel, info.filename, f"RECORD gives no sha256 (or stronger) hash ({digest or 'none'})")
            actual, actual_size = member_digest(wheel, zf, info, algorithm)
            if actual != digest:
                raise refuse(wheel, info.filename, "hash does not match RECORD (the member was changed)")
            if size and size != str(actual_size):
                raise refuse(wheel, info.filename, f"size {actual_size} does not match RECORD ({size})")
            members[info.filename] = digest
        missing = sorted(set(listed) - seen)
        if missing:
            raise refuse(wheel, missing[0], "listed in RECORD but not in the wheel")
    return VerifiedWheel(wheel, sha256, name, str(version), dist_info, members)
