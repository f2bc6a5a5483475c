"""`make_patch --diff SERIES` on a tree that has the series (apply/superseded.py): a patch whose lines a
later patch edits again is already-applied where every later patch of its file is here and the series
from its pre-image on is present; failed where any of that does not hold (a hunk of its own that is not
here, a later patch not made on it, no pre-image to start from). Our own PyTorch-shaped files."""
from __future__ import annotations

import json

import pytest

from fixmono.testing import git, make_patch, make_repo, snapshot

BASE = """import math


class WarmupScheduler:
    def lr(self, step):
        scale = step + 1
        return self.base * scale / self.warmup


def floor_lr(lr):
    return 1
"""
FIRST = BASE.replace("scale = step + 1", "scale = step + 2").replace("return 1", "return 2")  # two hunks
SECOND = FIRST.replace("scale = step + 2", "scale = step + 3")  # the first hunk's line again


def commit(repo, text: str, subject: str) -> None:
    (repo / "torch/nn/m.py").write_text(text)
    git(repo, "commit", "-qam", subject)


@pytest.fixture
def made(tmp_path):
    """The repository the series was made in: BASE, then the two patches; the series in tmp_path/series."""
    repo = make_repo(tmp_path / "made", {"torch/__init__.py": "", "torch/nn/m.py": BASE})
    commit(repo, FIRST, "Fix the offset and the helper")
    commit(repo, SECOND, "Fix the offset again")
    git(repo, "format-patch", "-q", "-2", "-o", str(tmp_path / "series"))
    return repo


def statuses(tmp_path, upstream, *extra: str) -> tuple[int, list[tuple[str, str]]]:
    before = snapshot(upstream)
    proc = make_patch("--diff", str(tmp_path / "series"), "--upstream", str(upstream), "--check", "--json", *extra)
    assert snapshot(upstream) == before
    results = json.loads(proc.stdout)["runs"][0]["results"]
    return proc.returncode, [(r["status"], r["detail"]) for r in results]


def test_a_series_upstream_merged_is_already_applied_patch_by_patch(tmp_path, made):
    code, found = statuses(tmp_path, made)
    assert code == 0 and [status for status, _ in found] == ["already-applied", "already-applied"]
    assert "present as the series leaves it" in found[0][1] and "fix-the-offset-again" in found[0][1]


def test_a_hunk_of_its_own_not_there_keeps_it_failed(tmp_path, made):
    commit(made, SECOND.replace("return 2", "return 1"), "Revert the helper")  # the first patch's other hunk
    code, found = statuses(tmp_path, made)
    assert code == 1 and [status for status, _ in found] == ["failed", "already-applied"]


def test_a_later_patch_not_made_on_it_keeps_it_failed(tmp_path, made):
    """The second patch made on another text (`import cmath` where the first patch's result has `import math`;
    its hunk applies there line for line): the chain of pre-images breaks, nothing is composed."""
    other = make_repo(tmp_path / "other", {"torch/__init__.py": "",
                                           "torch/nn/m.py": FIRST.replace("import math", "import cmath")})
    commit(other, SECOND.replace("import math", "import cmath"), "Fix the offset again")
    second = next((tmp_path / "series").glob("0002-*"))
    second.write_text(git(other, "format-patch", "-1", "--stdout"))
    code, found = statuses(tmp_path, made)
    assert code == 1 and [status for status, _ in found] == ["failed", "already-applied"]


def test_without_its_pre_image_it_stays_failed(tmp_path, made):
    """A tree with the series' result but not its history (no blob of the first patch's pre-image)."""
    bare = make_repo(tmp_path / "squashed", {"torch/__init__.py": "", "torch/nn/m.py": SECOND})
    code, found = statuses(tmp_path, bare)
    assert code == 1 and [status for status, _ in found] == ["failed", "already-applied"]
    code, found = statuses(tmp_path, bare, "--history", str(made))  # its blob found in --history's objects
    assert code == 0 and [status for status, _ in found] == ["already-applied", "already-applied"]


def test_a_later_patch_still_to_apply_leaves_the_first_to_the_port(tmp_path, made):
    """The tree at BASE: both patches applied in turn, nothing superseded."""
    git(made, "checkout", "-q", "HEAD~2")
    code, found = statuses(tmp_path, made)
    assert code == 0 and [status for status, _ in found] == ["applied", "applied"]


def test_a_file_without_a_last_line_end_is_judged_too(tmp_path):
    """Its last line edited by both patches, no line end after it: the composed diff carries git's
    `\\ No newline at end of file` (the whole run ended in "not a well-formed diff", exit 2; review 15)."""
    text = BASE.rstrip("\n")
    repo = make_repo(tmp_path / "made", {"torch/__init__.py": "", "torch/nn/m.py": text})
    commit(repo, text.replace("scale = step + 1", "scale = step + 2").replace("return 1", "return 2"), "First")
    commit(repo, text.replace("scale = step + 1", "scale = step + 2").replace("return 1", "return 3"), "Again")
    git(repo, "format-patch", "-q", "-2", "-o", str(tmp_path / "series"))
    code, found = statuses(tmp_path, repo)
    assert code == 0 and [status for status, _ in found] == ["already-applied", "already-applied"]

