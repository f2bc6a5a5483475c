"""patch-env writes only inside the environment it was given.

Every path it reads, writes, renames, deletes or compiles is named by a
relative path under one site folder (site-packages) and checked here first:
the site folder itself must lie inside the environment's prefix once links
are resolved, no folder between the site and the file may be a symbolic
link, and a file that is a link must point inside the same site. A path from
the journal or RECORD (untrusted: whoever can write the environment wrote
them) must be relative, normalised and free of '..'. A violation is one
UserError naming both places; nothing is written.
"""
from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from fixmono.model.errors import UserError

SAFE_REL = re.compile(r"^[^/\\\x00]+(?:/[^/\\\x00]+)*$")


def within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_rel(rel: str, what: str) -> str:
    """`rel` if it is a plain relative path (no absolute, '..', '.', empty part or backslash)."""
    parts = PurePosixPath(rel).parts if isinstance(rel, str) else ()
    if not isinstance(rel, str) or not SAFE_REL.match(rel) or any(p in (".", "..") for p in rel.split("/")) \
            or not parts:
        raise UserError(f"{what}: {rel!r} is not a relative path inside site-packages (absolute, '..' or "
                        "empty parts); nothing was changed")
    return rel


def own_site(site: Path, prefix: str) -> Path:
    """`site` if, links resolved, it lies inside the environment's prefix:
    a site-packages that is a link into another environment is refused."""
    real, real_prefix = os.path.realpath(site), os.path.realpath(prefix)
    if not within(real, real_prefix):
        raise UserError(f"{site} leads to {real}, outside the environment {prefix}: patch-env writes only inside the "
                        "environment it was given; patch the one that owns that folder with its own --python; "
                        "nothing was changed")
    return site


def confined(site: Path, rel: str, what: str = "") -> Path:
    """site/rel, after checking no folder on the way is a link and a file that
    is a link stays inside `site`."""
    check_rel(rel, what or str(site))
    folder = site
    for part in rel.split("/")[:-1]:
        folder = folder / part
        if folder.is_symlink():
            raise UserError(f"{folder} is a link to {os.path.realpath(folder)}: patch-env does not write through "
                            f"links (the file may belong to another environment); nothing was changed")
    path = site / rel
    if path.is_symlink() and not within(os.path.realpath(path), os.path.realpath(site)):
        raise UserError(f"{path} is a link to {os.path.realpath(path)}, outside {site}: patch-env writes only inside "
                        "the environment it was given; nothing was changed")
    return path


def relative_to_site(site: Path, path: Path) -> str:
    """The path of `path` under `site`, lexically (links are judged by `confined`)."""
    try:
        return PurePosixPath(Path(os.path.abspath(path)).relative_to(os.path.abspath(site))).as_posix()
    except ValueError:
        raise UserError(f"{path} is not under {site}; nothing was changed") from None
