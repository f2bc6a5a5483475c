"""`--upstream`: one value, one of the three sources it names."""
from __future__ import annotations

from fixmono.model.errors import UserError, describe
from fixmono.sources import remote
from fixmono.sources.git import GitError
from fixmono.sources.upstream import Upstream, open_checkout
from fixmono.sources.wheel import open_wheel


def open_upstream(spec: str, full_wheel: bool = False, extra: frozenset = frozenset(),
                  any_project: bool = False, refresh: bool = False) -> Upstream:
    """`full_wheel`: a pip: wheel downloaded whole and its sha256 checked,
    instead of the members the fixes target read by ranges. `extra`: more
    repository paths a wheel's scratch repository must hold (a --diff's files).
    `any_project`: a tree or wheel of no catalogue project is taken (a --diff).
    `refresh`: a pip: release's indexes asked again, not the answer an earlier
    run kept (sources/wheel.py)."""
    if not spec.strip():
        raise UserError("--upstream is empty; give a git checkout, pip:NAME==VERSION or 'default'")
    try:
        if remote.is_remote(spec):
            return remote.open_remote(spec, extra, any_project)
        if spec.startswith("pip:"):
            return open_wheel(spec, full=full_wheel, extra=extra, any_project=any_project, refresh=refresh)
        return open_checkout(spec, any_project)
    except GitError as err:
        raise UserError(f"--upstream {spec}: {err}") from None
    except OSError as err:  # unreadable directories
        raise UserError(f"--upstream {spec}: cannot open it: {describe(err)}") from None
