"""Bounded on any input (issue 40, part 5): a diff over a cap
(fixmono/model/limits.py) is refused with one line naming the cap and the
figure before any work; below the caps the port engine is near-linear in
the file's lines and the diff's hunks, with git apply's bytes. Time is
measured by tools/bench_port_scale.py, not here: the big cases below run
under a generous timeout that only a quadratic engine misses (the engine
before this took hours on them). Our own generated text."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import pytest

from fixmono.apply.contract import apply_change
from fixmono.engines import port
from fixmono.engines.port import Chains, Lines, diff_fix, exact
from fixmono.model import limits
from fixmono.model.errors import UserError
from fixmono.model.outcome import Status
from fixmono.model.patchfile import parse_patch, read_patch
from fixmono.testing import REPO_ROOT, make_patch, make_repo

GENEROUS = 240  # seconds, for cases the engine does in a few: only an O(hunks x lines) engine runs past it


def hunks(count: int) -> str:
    return "--- a/torch/m.py\n+++ b/torch/m.py\n" + "".join(f"@@ -{4 * n + 1} +{4 * n + 1} @@\n-a{n}\n+b{n}\n"
                                                            for n in range(count))


def test_a_diff_with_more_hunks_than_the_cap_is_refused_before_it_is_parsed(monkeypatch):
    import unidiff

    parse_patch(hunks(3), "small.patch")  # under the cap: read
    monkeypatch.setattr(unidiff, "PatchSet", lambda *a, **k: pytest.fail("parsed a diff over the cap"))
    with pytest.raises(UserError) as err:
        parse_patch(hunks(limits.MAX_HUNKS + 1), "many.patch")
    assert str(err.value) == (f"many.patch: it has {limits.MAX_HUNKS + 1:,} hunks, over the cap of "
                              f"{limits.MAX_HUNKS:,} hunks (MAX_HUNKS); nothing was written")


def test_a_diff_over_the_byte_cap_is_refused_before_it_is_decoded(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_DIFF_BYTES", 1000)
    big = tmp_path / "big.patch"
    big.write_bytes(hunks(100).encode() + b"\xff")  # not UTF-8 either: the size is told, not the byte
    with pytest.raises(UserError) as err:
        read_patch(big)
    assert str(err.value) == (f"{big}: its size is {big.stat().st_size:,} bytes, over the cap of 1,000 bytes "
                              "(MAX_DIFF_BYTES); nothing was written")
    with pytest.raises(UserError, match="MAX_DIFF_BYTES"):
        parse_patch(hunks(100), "text.patch")


def test_make_patch_refuses_a_diff_over_the_cap_in_one_line(tmp_path):
    repo = make_repo(tmp_path / "up", {"torch/__init__.py": "", "torch/m.py": "a0\n"})
    (tmp_path / "many.patch").write_text(hunks(limits.MAX_HUNKS + 1))
    proc = make_patch("--diff", str(tmp_path / "many.patch"), "--upstream", str(repo), "--check")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"make_patch: error: {tmp_path / 'many.patch'}: it has {limits.MAX_HUNKS + 1:,} hunks, over the cap of {limits.MAX_HUNKS:,} "
        "hunks (MAX_HUNKS); nothing was written"], proc.stderr


def test_a_target_over_the_cap_is_failed_in_one_line_before_it_is_parsed(monkeypatch):
    (change,) = diff_fix(parse_patch(hunks(1), "one.patch"), "pytorch", "one").changes
    monkeypatch.setattr(limits, "MAX_TARGET_BYTES", 10)
    monkeypatch.setattr(port, "Scopes", lambda *a: pytest.fail("parsed a target over the cap"))
    result = apply_change(change, "a0\n" * 10)
    assert result.status is Status.FAILED and result.detail == (
        "torch/m.py: it is 30 bytes, over the cap of 10 bytes (MAX_TARGET_BYTES); refusing to port the diff onto it")


def test_lines_finds_every_place_as_a_scan_does_while_hunks_rewrite_it():
    """Lines' index against a plain scan, over random rewrites in and out of file order."""
    rng = random.Random(40)
    for _ in range(200):
        plain = [rng.choice("abc") + "\n" for _ in range(rng.randint(0, 30))]
        lines = Lines(plain)
        for _ in range(rng.randint(1, 12)):
            start = rng.randint(0, len(plain))
            stop = min(len(plain), start + rng.randint(0, 3))
            new = [rng.choice("abcd") + "\n" for _ in range(rng.randint(0, 4))]
            plain[start:stop], lines[start:stop] = new, new
            assert lines == plain
            for block in ([rng.choice("abcd") + "\n" for _ in range(rng.randint(1, 3))] for _ in range(5)):
                assert exact(block, lines) == exact(block, plain), (plain, block)


def test_chains_are_the_sorted_spans_around_each_line():
    """Chains against its definition, spans nested or not (C/C++ spans may share a line)."""
    rng = random.Random(5)
    for _ in range(200):
        spans = []
        for n in range(rng.randint(0, 8)):
            start = rng.randint(1, 30)
            spans.append((start, start + rng.randint(0, 10), rng.randint(0, 1), f"s{n}"))
        chains = Chains(spans)
        for line in range(0, 45):
            assert chains.at(line) == [s[-1] for s in sorted(spans) if s[0] <= line <= s[1]], (spans, line)


ENGINE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from fixmono.apply.contract import apply_change
    from fixmono.engines.port import diff_fix
    from fixmono.model.patchfile import read_patch

    folder = Path(sys.argv[1])
    (change,) = diff_fix(read_patch(folder / "diff.patch"), "pytorch", "big").changes
    result = apply_change(change, (folder / "a" / change.path).read_text())
    print(result.status.value, result.detail)
    (folder / "engine.out").write_text(result.new_text or "")
""")


def generated(kind: str, count: int) -> tuple[str, str, str]:
    """(path, text, text edited in `count` places, every change its own hunk with one line of context)."""
    if kind == "python":
        text = "import os\n" + "".join((f"\n\nclass K{f // 20}:\n" if f % 20 == 0 else "")
                                       + f"    def m{f}(self, x):\n        y = x + 0\n        return y\n\n"
                                       for f in range(count))
        return "torch/big.py", text, text.replace("        y = x + 0\n", "        y = x - 0\n")
    if kind == "cpp":
        text = "namespace gen {\n" + "".join(f"\nint Func{f}(int x) {{\n  int y = x + 0;\n  return y;\n}}\n"
                                             for f in range(count)) + "}  // namespace gen\n"
        return "csrc/big.cc", text, text.replace("  int y = x + 0;\n", "  int y = x - 0;\n")
    text = "".join(f"entry {n}\nvalue 0\nkept\nkept\n" for n in range(count))
    return "docs/big.txt", text, text.replace("value 0\n", "value 1\n")


@pytest.mark.parametrize("kind", ["python", "cpp", "text"])
def test_ten_thousand_hunks_are_ported_with_git_applys_bytes(tmp_path, kind):
    path, before, after = generated(kind, 10_000)
    for side, text in (("a", before), ("b", after)):
        (tmp_path / side / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / side / path).write_text(text)
    diff = subprocess.run(["git", "diff", "--no-index", "--no-color", "-U1", f"a/{path}", f"b/{path}"],
                          cwd=tmp_path, capture_output=True, text=True).stdout
    assert diff.count("\n@@ ") == 10_000
    (tmp_path / "diff.patch").write_text(diff.replace(f"a/a/{path}", f"a/{path}").replace(f"b/b/{path}", f"b/{path}"))
    try:
        proc = subprocess.run([sys.executable, "-c", ENGINE, str(tmp_path)], capture_output=True, text=True,
                              timeout=GENEROUS, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools"),
                                                                   "FIXMONO_REWRITE_CACHE": "off"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"10,000 hunks not ported in {GENEROUS} s: the engine is not near-linear")
    assert proc.stdout.startswith("applied"), proc.stdout + proc.stderr
    assert (tmp_path / "engine.out").read_text() == after  # what git apply writes: the diff's own post-image
