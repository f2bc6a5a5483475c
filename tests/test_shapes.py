"""model/shapes.py: the one validating layer for external JSON. A value of
the right shape comes back as it is; a wrong one is one UserError naming
where, the field and what was wrong."""
import pytest

from fixmono.model.errors import UserError
from fixmono.model import shapes
from fixmono.model.shapes import SHA256, Either, Maybe, OneOf, checked, parsed

PAGE = {"files": [{"url": str, "hashes?": Maybe({"sha256?": SHA256})}]}
GOOD_SHA = "ab" * 32


@pytest.mark.parametrize("value, shape", [
    ("x", str), (1, int), (1.5, float), (2, float), (True, bool), (None, type(None)),
    ([], [int]), ([1, 2], [int]), ({"a": 1, "extra": "kept"}, {"a": int}), ({}, {"a?": int}),
    ({"k": [1]}, {str: [int]}), (None, Maybe(str)), ("x", Maybe(str)), (3, Either(str, int)),
    ("range", OneOf("range", "full")), (GOOD_SHA, SHA256), (GOOD_SHA.upper(), SHA256),
    ({"files": [{"url": "a.whl"}, {"url": "b.whl", "hashes": None}, {"url": "c.whl", "hashes": {"sha256": GOOD_SHA}}]},
     PAGE),
])
def test_a_value_of_the_shape_comes_back_unchanged(value, shape):
    assert checked(value, shape, "here") is value


@pytest.mark.parametrize("value, shape, message", [
    (5, str, "here: the top: expected a string, got an integer"),
    (True, int, "expected an integer, got true/false"),  # a bool is not an int
    (1.5, int, "expected an integer, got a number"),
    ({"files": 5}, PAGE, "here: files: expected a list, got an integer"),
    ({"files": [{"url": 5}]}, PAGE, "here: files[0].url: expected a string, got an integer"),
    ({"files": [{}]}, PAGE, "here: files[0].url: missing"),
    ({"files": [{"url": "a", "hashes": {"sha256": 5}}]}, PAGE, "files[0].hashes.sha256: expected a sha256"),
    ({"files": [{"url": "a", "hashes": []}]}, PAGE, "files[0].hashes: expected null or an object, got a list"),
    ({"files": [{"url": "a", "hashes": {"sha256": "../../x"}}]}, PAGE, "expected a sha256 (64 hex digits), got '../../x'"),
    ([], {"a": int}, "the top: expected an object, got a list"),
    ({"k": "v"}, {str: int}, "here: k: expected an integer, got a string"),
    ({1: 2}, {str: int}, "key 1 is not a string"),
    ("partial", OneOf("range", "full"), "expected 'range' or 'full', got 'partial'"),
    (0, OneOf(False), "expected False, got 0"),  # 0 == False, but not the same kind
    (5, shapes.Test(lambda v: v.startswith("x"), "a name starting with x"), "expected a name starting with x, got 5"),
    (["a", 2], [str], "here: [1]: expected a string, got an integer"),
])
def test_a_wrong_shape_is_one_line_naming_the_field(value, shape, message):
    with pytest.raises(UserError) as err:
        checked(value, shape, "here")
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_parsed_checks_json_text():
    assert parsed(b'{"files": []}', PAGE, "page") == {"files": []}
    with pytest.raises(UserError, match=r"^page: not JSON \("):
        parsed("{files", PAGE, "page")
    with pytest.raises(UserError, match=r"^page: files: expected a list, got an integer$"):
        parsed('{"files": 5}', PAGE, "page")
    with pytest.raises(UserError, match=r"^page: not JSON"):
        parsed(b"\xff\xfe", PAGE, "page")


def test_a_deep_error_inside_an_option_is_named_where_it_is():
    shape = Maybe({"input": {"sha256": SHA256}})
    with pytest.raises(UserError, match=r"^p: input\.sha256: expected a sha256"):
        checked({"input": {"sha256": 5}}, shape, "p")
    with pytest.raises(UserError, match=r"^p: the top: expected null or an object, got a string$"):
        checked("x", shape, "p")
