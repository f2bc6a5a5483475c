"""Ports of one fix onto releases that moved on in the ways real code does, each with its right answer
(issue 42's case suite; our own module, shaped like a library's). A fix made on `main` (its pre-image the
main branch's file) is ported onto a release branch of the same repository (its blob at hand) and onto the
same release text in a repository without it (the hunks alone). Where the engine cannot yet give the right
answer it must refuse (`failed`), never give another text."""
from __future__ import annotations

import json

import pytest

from fixmono.testing import git, make_patch, make_repo

PATH = "pkg/mod.py"
BASE = '''"""A module shaped like a library's."""


def scale(values, factor):
    out = []
    for v in values:
        out.append(v * factor)
    return out


class Runner:
    def step(self, batch, lr):
        loss = self.model(batch)
        loss.backward()
        self.optim.step(lr=lr)
        return loss
'''
FIX = ("        self.optim.step(lr=lr)\n", "        self.optim.step(lr=lr)\n        self.optim.zero_grad()\n")


def moved(*pairs: tuple[str, str]) -> str:
    text = BASE
    for old, new in pairs:
        assert old in text
        text = text.replace(old, new)
    return text


RIGHT = "right"  # the release with the fix's line added after its `self.optim.step(...)` statement
CASES = {  # name: (release, with the pre-image, with the hunks only)
    "a context line changed between the edit's neighbours": (
        moved(("        loss = self.model(batch)\n", "        loss = self.model(batch, train=True)\n")), RIGHT, "failed"),
    "a renamed local": (
        moved(("        loss = self.model(batch)\n        loss.backward()\n",
               "        total = self.model(batch)\n        total.backward()\n"),
              ("        return loss\n", "        return total\n")), RIGHT, "failed"),
    "a statement split over lines": (
        moved(("        loss = self.model(batch)\n", "        loss = self.model(\n            batch)\n")), RIGHT, "failed"),
    "a method renamed": (moved(("    def step(self, batch, lr):\n", "    def train_step(self, batch, lr):\n")),
                         RIGHT, RIGHT),
    "a def added above": (moved(("\n\nclass Runner:\n", "\n\ndef unused():\n    return 0\n\n\nclass Runner:\n")),
                          RIGHT, RIGHT),
    # the statement the fix adds after is reflowed over three lines: one statement to the syntax
    "the argument list of the edit's neighbour reflowed": (
        moved(("        self.optim.step(lr=lr)\n", "        self.optim.step(\n            lr=lr,\n        )\n")),
        RIGHT, "failed"),
}


def right_answer(release: str) -> str:
    for statement in ("        self.optim.step(lr=lr)\n", "        self.optim.step(\n            lr=lr,\n        )\n"):
        if statement in release:
            return release.replace(statement, statement + "        self.optim.zero_grad()\n", 1)
    raise AssertionError("no right answer written for this release")


@pytest.fixture(scope="module")
def fix_patch(tmp_path_factory) -> tuple:
    tmp = tmp_path_factory.mktemp("made")
    repo = make_repo(tmp / "repo", {"pkg/__init__.py": "", PATH: BASE})
    (repo / PATH).write_text(BASE.replace(*FIX))
    git(repo, "commit", "-qam", "step: zero the gradients after the optimiser step")
    patch = tmp / "fix.patch"
    patch.write_text(git(repo, "format-patch", "-1", "--stdout"))
    return repo, patch


def ported(patch, checkout, tmp_path) -> tuple[str, str | None]:
    run = make_patch("--diff", str(patch), "--upstream", str(checkout), "--json", "--out", str(tmp_path / "out"))
    (result,) = json.loads(run.stdout)["runs"][0]["results"]
    if result["status"] != "applied":
        return result["status"], None
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(checkout), str(clone))
    git(clone, "am", "-q", *sorted(str(p) for p in (tmp_path / "out").glob("0*.patch")))
    return "applied", (clone / PATH).read_text()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("evidence", ["pre-image", "hunks only"])
def test_each_kind_of_change_gets_its_right_answer_or_a_refusal(fix_patch, tmp_path, case, evidence):
    made_on, patch = fix_patch
    release, with_pre_image, hunks_only = CASES[case]
    expected = with_pre_image if evidence == "pre-image" else hunks_only
    if evidence == "pre-image":  # a release branch of the repository the fix was made in: its blob is there
        checkout = tmp_path / "checkout"
        git(tmp_path, "clone", "-q", str(made_on), str(checkout))
        git(checkout, "checkout", "-q", "-b", "release", "HEAD~1")
        (checkout / PATH).write_text(release)
        git(checkout, "commit", "-qam", "the release moved on")
    else:
        checkout = make_repo(tmp_path / "checkout", {"pkg/__init__.py": "", PATH: release})
    status, text = ported(patch, checkout, tmp_path)
    if expected == RIGHT:
        assert status == "applied" and text == right_answer(release), (status, text)
    else:
        assert status == expected, (status, text)
