"""The generic test of inline transformation cases: every Case a fix declares
in fix.py runs here (FIX_PACKAGE=fixmono.fixes.<upstream>.<name> picks one fix; unset,
all fixes)."""
import os

import pytest

from fixmono.model.registry import discover, load
from fixmono.testing import check_case

_pkg = os.environ.get("FIX_PACKAGE")
FIXES = [load(_pkg)] if _pkg else discover()
PARAMS = [pytest.param(fix, case, id=f"{fix.id}: {case.name}") for fix in FIXES for case in fix.cases]


def test_every_fix_declares_cases():
    for fix in FIXES:
        kinds = {c.expect for c in fix.cases}
        assert "applied" in kinds and "already-applied" in kinds, \
            f"{fix.id}: needs at least one applied and one already-applied case"


def test_cases_are_distinct():
    """A case built with .replace()/.format() that stopped matching would
    silently repeat another one: every case's input must be its own."""
    for fix in FIXES:
        seen: dict = {}
        for case in fix.cases:
            key = (case.path, case.before)
            assert key not in seen, f"{fix.id}: cases {seen[key]!r} and {case.name!r} have the same input"
            seen[key] = case.name


@pytest.mark.parametrize("fix,case", PARAMS)
def test_case(fix, case):
    check_case(fix, case)
