"""Report files the commands write (--out, --csv, --png): checked before a
long run, written whole or not at all."""
from __future__ import annotations

import tempfile
from pathlib import Path

from fixmono.model.errors import UserError


def check_site_folder(path: Path, flag: str = "--html") -> None:
    """A folder to write a site into, checked before the run: a new one in an existing folder, an empty one,
    or one holding only a site written here, unchanged."""
    path = path.resolve()
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is not a folder")
    if not path.exists() and not path.parent.is_dir():
        raise UserError(f"{flag} {path}: no folder {path.parent}")
    if path.is_dir():  # the user's folder: written only where it holds a site written here (its manifest)
        from fixmono.output.html_report import SITE
        from fixmono.output.out_dir import check_ours
        check_ours(path, f"{flag} {path}", SITE)


def check_report_path(path: Path, flag: str = "--out") -> None:
    """An output path, checked before the (minutes-long) run: a file in a writable folder."""
    path = path.resolve()  # a symlink: its target is the report
    if path.is_dir():
        raise UserError(f"{flag} {path} is a directory")
    if path.exists() and not path.is_file():
        raise UserError(f"{flag} {path} is not a regular file")
    if not path.parent.is_dir():
        raise UserError(f"{flag} {path}: no folder {path.parent}")
    try:
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        raise UserError(f"{flag} {path}: cannot write in {path.parent}: {err.strerror}") from None


def write_report(path: Path, data: str | bytes) -> None:
    """Written beside it, then renamed: the file is whole or not there."""
    path = path.resolve()
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        partial.replace(path)
    except OSError as err:
        raise UserError(f"--out {path}: cannot write the report: {err.strerror}") from None
    finally:
        partial.unlink(missing_ok=True)
