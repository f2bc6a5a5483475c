"""The uses check remembered (apply/remembered_uses.py): the same answer as
computed; computed again where a file it read reads otherwise now, where its
entry is damaged, and with FIXMONO_REWRITE_CACHE=off."""
from __future__ import annotations

import json

import pytest

from fixmono.apply import remembered_uses
from fixmono.engines import uses

ENGINE = uses.unresolved_uses  # the check itself, before the fixture counts its calls
OLD = "from pkg.helpers import scale\n\n\ndef run(x):\n    return scale(x)\n"
NEW = "from pkg.helpers import scale\nfrom pkg.helpers import shift\n\n\ndef run(x):\n    return shift(scale(x))\n"


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """The engine's check, counted; the cache in tmp_path."""
    monkeypatch.setenv("FIXMONO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FIXMONO_REWRITE_CACHE", raising=False)
    calls = []
    real = uses.unresolved_uses

    def check(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(uses, "unresolved_uses", check)
    return calls


def tree(helpers: str):
    files = {"pkg/__init__.py": b"", "pkg/helpers.py": helpers.encode()}
    return files, files.get


def ask(read):
    return remembered_uses.unresolved_uses("pkg/run.py", OLD, NEW, read, whole_tree=True)


def test_the_same_answer_and_no_second_check(counted):
    files, read = tree("def scale(x):\n    return x\n")
    first = ask(read)
    assert first == ENGINE("pkg/run.py", OLD, NEW, read, whole_tree=True)
    assert first and "shift" in first[0]
    assert ask(read) == first and counted == ["pkg/run.py"]


def test_a_file_it_read_that_changed_is_checked_again(counted):
    files, read = tree("def scale(x):\n    return x\n")
    assert ask(read)
    files["pkg/helpers.py"] = b"def scale(x):\n    return x\n\n\ndef shift(x):\n    return x + 1\n"
    assert ask(read) == [] and len(counted) == 2


def test_a_damaged_entry_is_checked_again(counted, tmp_path):
    files, read = tree("def scale(x):\n    return x\n")
    first = ask(read)
    for entry in (tmp_path / "cache" / "uses").rglob("*.json"):
        data = json.loads(entry.read_text())
        data["problems"] = "not a list"
        entry.write_text(json.dumps(data))
    assert ask(read) == first and len(counted) == 2


def test_off_with_the_rewrite_cache(counted, monkeypatch, tmp_path):
    monkeypatch.setenv("FIXMONO_REWRITE_CACHE", "off")
    files, read = tree("def scale(x):\n    return x\n")
    assert ask(read) == ask(read) and len(counted) == 2
    assert not (tmp_path / "cache" / "uses").exists()
