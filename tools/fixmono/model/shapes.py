"""The one layer every external JSON document goes through before any of it
is used (an index's PEP 691 page, the answer of a `--python` interpreter's
probe, a patch-env journal, a cache entry): `checked(value, SHAPE, where)`
returns the value or raises UserError naming where, the field and what was
wrong. So a wrong shape is one line and exit 2, never a TypeError deep inside.

A shape is written with Python's own values:
    str, int, bool, float, type(None)   an instance (a bool is not an int)
    [SHAPE]                             a list whose items all have SHAPE
    {"key": SHAPE, "opt?": SHAPE}       a dict with these keys ('?': may be absent); other keys allowed
    {str: SHAPE}                        a dict of any string keys to SHAPE
    Maybe(SHAPE)                        None or SHAPE
    Either(SHAPE, SHAPE, ...)           the first that fits
    Test(predicate, "what it must be")  a value the predicate accepts
    OneOf("a", "b", ...)                one of these values
Imports nothing of fixmono but errors: the bottom of the package.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from fixmono.model.errors import UserError, one_line


@dataclass(frozen=True)
class Either:
    options: tuple

    def __init__(self, *options):
        object.__setattr__(self, "options", options)


def Maybe(shape) -> Either:  # noqa: N802 (reads as a type)
    return Either(type(None), shape)


@dataclass(frozen=True)
class Test:
    predicate: Callable[[Any], bool]
    what: str


def OneOf(*values) -> Test:  # noqa: N802 (reads as a type)
    return Test(lambda v: any(type(v) is type(w) and v == w for w in values), " or ".join(map(repr, values)))


SHA256 = Test(lambda s: isinstance(s, str) and re.fullmatch(r"[0-9a-fA-F]{64}", s) is not None,
               "a sha256 (64 hex digits)")


class ShapeError(Exception):
    def __init__(self, at: str, message: str):
        super().__init__(f"{at or 'the top'}: {message}")
        self.at = at


def describe(shape) -> str:
    if isinstance(shape, type):
        return {str: "a string", int: "an integer", bool: "true/false", float: "a number", dict: "an object",
                list: "a list", type(None): "null"}.get(shape, shape.__name__)
    if isinstance(shape, list):
        return "a list"
    if isinstance(shape, dict):
        return "an object"
    if isinstance(shape, Either):
        return " or ".join(describe(s) for s in shape.options)
    return shape.what


def kind(value) -> str:
    return {str: "a string", int: "an integer", bool: "true/false", float: "a number", dict: "an object",
            list: "a list", type(None): "null"}.get(type(value), type(value).__name__)


def _check(value, shape, at: str) -> None:
    if isinstance(shape, Either):
        deeper = []
        for option in shape.options:
            try:
                return _check(value, option, at)
            except ShapeError as err:
                deeper += [err] if err.at != at else []
        if deeper:  # the value is an option's kind, wrong inside: say where
            raise deeper[0]
        raise ShapeError(at, f"expected {describe(shape)}, got {kind(value)}")
    if isinstance(shape, Test):
        ok = False
        try:
            ok = bool(shape.predicate(value))
        except Exception:  # a predicate that cannot judge this value rejects it
            ok = False
        if not ok:
            raise ShapeError(at, f"expected {shape.what}, got {value!r:.80}")
        return None
    if isinstance(shape, type):
        fits = isinstance(value, shape) and not (shape in (int, float) and isinstance(value, bool))
        if shape is float and isinstance(value, int) and not isinstance(value, bool):
            fits = True
        if not fits:
            raise ShapeError(at, f"expected {describe(shape)}, got {kind(value)}")
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            raise ShapeError(at, f"expected a list, got {kind(value)}")
        for n, item in enumerate(value):
            _check(item, shape[0], f"{at}[{n}]")
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ShapeError(at, f"expected an object, got {kind(value)}")
        if len(shape) == 1 and next(iter(shape)) is str:  # {str: SHAPE}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ShapeError(at, f"key {key!r} is not a string")
                _check(item, shape[str], f"{at}.{key}" if at else key)
            return None
        for key, sub in shape.items():
            name = key.removesuffix("?")
            where = f"{at}.{name}" if at else name
            if name not in value:
                if key.endswith("?"):
                    continue
                raise ShapeError(where, "missing")
            _check(value[name], sub, where)
        return None
    raise TypeError(f"not a shape: {shape!r}")


def checked(value, shape, where: str):
    """`value` if it has `shape`; else UserError "<where>: <field>: expected ..., got ..."."""
    try:
        _check(value, shape, "")
    except ShapeError as err:
        raise UserError(f"{where}: {err}") from None
    return value


def parsed(text: str | bytes, shape, where: str):
    """JSON text parsed and checked against `shape` (not JSON: the same one line)."""
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError) as err:
        raise UserError(f"{where}: not JSON ({one_line(err)})") from None
    return checked(value, shape, where)
