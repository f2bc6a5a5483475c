"""The port engine on random releases of a small module (a class of inputs, after a review that broke the
engine with them, 2026-11-27): a module of 2-4 defs whose bodies are drawn from a few statements (so lines
repeat across defs, as in real code), a fix that replaces, adds or removes one statement of one def, and a
release made from the module by 1-3 of: a def deleted, renamed, moved, given another argument, copied under a
new name, a def added, two defs' names swapped, a statement edited away from the fix, a blank line added. The
right answer follows the def (its identity, not its name): the fix in that def as the release has it. Python,
C++ with K&R braces and with Allman braces; the diff as `git diff` writes it (section headers).

Asserted: with the diff's pre-image, no result is wrong (a refusal is never wrong); from the hunks alone, a
wrong result only where the release swapped two defs' names (the hunks' text follows the name, which only the
pre-image shows is the other def's), and never more than with the pre-image is right. Not judged: releases
that deleted the fixed def (a copy or a new def of its name may be it or not: no right answer)."""
from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field

import pytest

from fixmono.engines.port import DiffTransform
from fixmono.model.errors import NotApplicable, TransformFailed
from fixmono.testing import git_hunks

STATEMENTS = ["x = load(path)", "check(x)", "y = save(x)", "close(y)", "x = load(y)", "check(y)", "return x",
              "y = x", "log(x)", "log(y)"]
ADDED = ["check(x, 1)", "log(path)", "y = load(x)", "close(x)", "x = save(y)"]
NAMES = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
SEEDS = range(150)


@dataclass
class Def:
    ident: int
    name: str
    body: list[str]  # "" is a blank line
    params: str = "path"


@dataclass
class Fix:
    ident: int  # the def it edits
    kind: str  # replace, insert (after the statement), delete
    at: int
    new: str


@dataclass
class Release:
    defs: list[Def]
    fix: Fix  # where the fix goes in it (blank lines added above move it)
    ops: list[str] = field(default_factory=list)


def render(defs: list[Def], lang: str, style: str = "kr") -> str:
    if lang == "py":
        return "from lib import load, check, save, close, log\n" + "".join(
            f"\n\ndef {d.name}({d.params}):\n" + "".join(f"    {s}\n" if s else "\n" for s in d.body) for d in defs)
    out = '#include "lib.h"\n'
    for d in defs:
        params = ", ".join(f"int {p.split('=')[0].strip()}" for p in d.params.split(","))
        out += f"\nint {d.name}({params})" + (" {\n" if style == "kr" else "\n{\n")
        out += "".join(f"  {s};\n" if s else "\n" for s in d.body) + "}\n"
    return out


def fixed(defs: list[Def], fix: Fix) -> list[Def] | None:
    defs = copy.deepcopy(defs)
    body = next(d for d in defs if d.ident == fix.ident).body
    if fix.kind == "replace":
        body[fix.at] = fix.new
    elif fix.kind == "insert":
        body.insert(fix.at + 1, fix.new)
    elif len(body) > 1:
        del body[fix.at]
    else:
        return None
    return defs


def released(rng: random.Random, defs: list[Def], fix: Fix) -> Release:
    release = Release(copy.deepcopy(defs), fix)
    for _ in range(rng.randint(1, 3)):
        op, d = rng.choice(["delete", "rename", "swap", "move", "add", "params", "edit", "blank", "copy"]), \
            rng.randrange(len(release.defs))
        defs, target = release.defs, release.defs[d]
        free = [n for n in NAMES if n not in {x.name for x in defs}]
        near = set(range(release.fix.at - 1, release.fix.at + 3)) if target.ident == fix.ident else set()
        if op == "delete" and len(defs) > 1:
            del defs[d]
        elif op == "rename":
            target.name = rng.choice(free)
        elif op == "swap" and len(defs) > 1:
            other = defs[rng.choice([n for n in range(len(defs)) if n != d])]
            target.name, other.name = other.name, target.name
        elif op == "move" and len(defs) > 1:
            defs.insert(rng.randrange(len(defs)), defs.pop(d))
        elif op == "add":
            defs.insert(rng.randrange(len(defs) + 1), Def(100 + len(release.ops), rng.choice(free),
                                                          [rng.choice(STATEMENTS) for _ in range(rng.randint(3, 6))]))
        elif op == "params":
            target.params = "path, flag=None"
        elif op == "edit" and (lines := [n for n in range(len(target.body)) if n not in near]):
            target.body[rng.choice(lines)] = rng.choice(STATEMENTS)
        elif op == "blank" and (lines := [n for n in range(len(target.body) + 1) if n not in near]):
            n = rng.choice(lines)
            target.body.insert(n, "")
            if target.ident == fix.ident and n <= release.fix.at:
                release.fix = Fix(fix.ident, fix.kind, release.fix.at + 1, fix.new)
        elif op == "copy":
            defs.insert(rng.randrange(len(defs) + 1), Def(200 + len(release.ops), rng.choice(free),
                                                          list(target.body), target.params))
        else:
            continue
        release.ops.append(op)
    return release


def case(seed: int, lang: str, style: str):
    """(pre-image, post-image, release, right answer, the release's ops), or None where not judged."""
    rng = random.Random(seed)
    defs = [Def(n, name, [rng.choice(STATEMENTS) for _ in range(rng.randint(3, 6))])
            for n, name in enumerate(rng.sample(NAMES, rng.randint(2, 4)))]
    edited = rng.randrange(len(defs))
    fix = Fix(edited, rng.choice(["replace", "insert", "delete"]), rng.randrange(len(defs[edited].body)),
              rng.choice(ADDED))
    post = fixed(defs, fix)
    release = released(rng, defs, fix)
    if post is None or not any(d.ident == fix.ident for d in release.defs):
        return None
    pre, target = render(defs, lang, style), render(release.defs, lang, style)
    if pre == render(post, lang, style) or pre == target:
        return None
    return pre, render(post, lang, style), target, render(fixed(release.defs, release.fix), lang, style), release.ops


def outcome(pre: str, post: str, target: str, right: str, path: str, with_pre_image: bool) -> str:
    try:
        got = DiffTransform(path, git_hunks(pre, post, path)).rewrite(
            target, pre_image=pre if with_pre_image else None).source
    except (TransformFailed, NotApplicable):
        return "refused"
    return "right" if got == right else "wrong"


@pytest.mark.parametrize("lang,style", [("py", "kr"), ("cpp", "kr"), ("cpp", "allman")])
def test_no_wrong_result_on_random_releases(lang, style):
    path = f"m.{lang}"
    tally = {(pre_image, result): 0 for pre_image in (True, False) for result in ("right", "wrong", "refused")}
    wrong = []
    for seed in SEEDS:
        judged = case(seed, lang, style)
        if judged is None:
            continue
        *texts, ops = judged
        with_pre, hunks_only = (outcome(*texts, path, pre_image) for pre_image in (True, False))
        tally[True, with_pre] += 1
        tally[False, hunks_only] += 1
        if with_pre == "wrong" or hunks_only == "wrong" and "swap" not in ops:
            wrong.append((seed, ops, with_pre, hunks_only))
    print(f"\n{lang} {style}: " + ", ".join(f"{'pre-image' if p else 'hunks'} {r} {n}" for (p, r), n in tally.items()))
    assert not wrong, f"wrong results (seed, the release's ops, with the pre-image, hunks only): {wrong}"
    judged = sum(n for (p, _), n in tally.items() if p)
    assert tally[True, "right"] > judged / 2 and tally[True, "right"] >= tally[False, "right"], tally


SIBLING_LINES = ["out = self.model(x)", "x = self.norm(x)", "check(x)", "return out"]
SIBLING_ADDED = ["x = x.contiguous()", "log(out)", "check(x, strict=True)"]
SIBLING_NAMES = ["predict", "score", "loss", "encode", "decode"]


def siblings(blocks: list, kind: str, decorated: str | None = None) -> str:
    """Methods of a class, branches of an if/elif chain, or C++ functions, each (name, body lines)."""
    head = "from lib import check, log, deco\n\n\n"
    if kind == "method":
        return head + "class Runner:\n" + "\n".join(
            ("    @deco\n" if name == decorated else "") + f"    def {name}(self, x):\n" +
            "".join(f"        {line}\n" for line in body) for name, body in blocks)
    if kind == "elif":
        return head + "def run(self, mode, x):\n" + "".join(
            f"    {'if' if n == 0 else 'elif'} mode == \"{name}\":\n" + "".join(f"        {line}\n" for line in body)
            for n, (name, body) in enumerate(blocks)) + "    return None\n"
    return '#include "lib.h"\n' + "".join(
        f"\nint Runner::{name.capitalize()}(int x) {{\n" +
        "".join(f"  {line.replace('self.', '').replace('return out', 'return x')};\n" for line in body) + "}\n"
        for name, body in blocks)


def sibling_case(seed: int):
    """(pre-image, post-image, release, right answer, path): blocks of few, repeated lines; the fix one line
    added, replaced or removed in one block (or a decorator added); the release moves one block or swaps two.
    None where not judged."""
    rng = random.Random(seed)
    kind = rng.choice(["method", "elif", "cpp"])
    blocks = [(name, [rng.choice(SIBLING_LINES) for _ in range(rng.randint(1, 3))])
              for name in rng.sample(SIBLING_NAMES, rng.randint(2, 4))]
    for _, body in blocks:
        if kind == "method" and body[-1] != "return out":
            body.append("return out")
    k = rng.randrange(len(blocks))
    op = rng.choice(["insert", "replace", "delete"] + (["decorate"] if kind == "method" else []))
    at = rng.randrange(len(blocks[k][1]))
    fixed, decorated = copy.deepcopy(blocks), None
    if op == "insert":
        fixed[k][1].insert(at + rng.randint(0, 1), rng.choice(SIBLING_ADDED))
    elif op == "replace":
        fixed[k][1][at] = rng.choice(SIBLING_ADDED)
    elif op == "delete":
        if len(fixed[k][1]) < 2 or kind == "method" and fixed[k][1][at] == "return out":
            return None
        del fixed[k][1][at]
    else:
        decorated = blocks[k][0]
    order = list(range(len(blocks)))
    if rng.random() < 0.5:
        order.insert(rng.randrange(len(order)), order.pop(rng.randrange(len(order))))
    else:
        i, j = rng.sample(order, 2)
        order[i], order[j] = order[j], order[i]
    pre, post = siblings(blocks, kind), siblings(fixed, kind, decorated)
    if order == sorted(order) or pre == post:
        return None
    return (pre, post, siblings([blocks[i] for i in order], kind), siblings([fixed[i] for i in order], kind, decorated),
            "m.cpp" if kind == "cpp" else "m.py")


def test_no_wrong_result_where_the_release_moved_or_swapped_sibling_blocks():
    """Sibling blocks whose lines repeat (methods, elif branches, C++ functions), moved or swapped by the
    release: with the pre-image never a wrong result (9 of these 300 seeds were wrong on the code of bd3f6c3, before
    the session-9 rules: lines paired across the move as edits in place). From the hunks alone the text
    can fit the moved block exactly (a line added at a method's end, the next method now another): counted,
    not asserted."""
    tally = {(pre_image, result): 0 for pre_image in (True, False) for result in ("right", "wrong", "refused")}
    wrong = []
    for seed in range(300):
        judged = sibling_case(seed)
        if judged is None:
            continue
        *texts, path = judged
        for pre_image in (True, False):
            result = outcome(*texts, path, pre_image)
            tally[pre_image, result] += 1
            if pre_image and result == "wrong":
                wrong.append(seed)
    print("\nsiblings: " + ", ".join(f"{'pre-image' if p else 'hunks'} {r} {n}" for (p, r), n in tally.items()))
    assert not wrong, f"wrong with the pre-image, seeds: {wrong}"
    assert tally[True, "right"] > sum(n for (p, _), n in tally.items() if p) / 2, tally
