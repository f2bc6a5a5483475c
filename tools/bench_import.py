#!/usr/bin/env python3
"""How often `fixmono import` can make a diff's own fixture and cases.

    .venv/bin/python tools/bench_import.py GITDIR [GITDIR...] [--commits N]

For the last N commits (default 150) touching Python files of each git
repository (a bare mirror will do), `git format-patch` of their Python files
is read as `fixmono import` reads it; per modified Python file, the fixture
and the applied case are made from the diff (engines/imported.py), and the
port engine must turn the fixture into the case's post-image exactly and then
call that post-image already-applied. Prints, per repository and in total,
the files where that holds, and a line per file where it does not. The data
is made at run time from the repositories; nothing of them is kept.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fixmono.engines.imported import Frames  # noqa: E402
from fixmono.engines.port import DiffTransform  # noqa: E402
from fixmono.model.errors import FixDeclarationError, NotApplicable, TargetSyntaxError, TransformFailed  # noqa: E402
from fixmono.model.errors import UserError  # noqa: E402
from fixmono.model.patchfile import parse_patch  # noqa: E402
from fixmono.sources.git import clean_env, run_git  # noqa: E402

GIT_ENV = clean_env(GIT_LITERAL_PATHSPECS="0")  # `-- '*.py'` is a pattern here


def git(repo: str, *args: str) -> str:
    """git on a mirror, through the one git layer (sources/git.py: its hardened environment)."""
    proc = run_git(None, f"--git-dir={repo}", *args, env=GIT_ENV)
    if proc.returncode:
        raise SystemExit(f"bench_import: {repo}: git {args[0]}: {proc.stderr.strip()}")
    return proc.stdout


def verdict(diff) -> str | None:
    """None when the fixture and both cases hold; else why not."""
    try:
        before, after = Frames(diff).texts
        transform = DiffTransform(diff.path, diff.hunks)
        applied, again = transform.rewrite(before), transform.rewrite(after)
    except (FixDeclarationError, NotApplicable, TargetSyntaxError, TransformFailed) as err:
        return str(err)
    if applied.source != after or applied.changed != len(diff.hunks) or again.changed or \
            again.present != len(diff.hunks):
        return "the engine's output is not the post-image"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("repos", nargs="+", metavar="GITDIR")
    p.add_argument("--commits", type=int, default=150)
    args = p.parse_args(argv)
    totals = Counter()
    for repo in args.repos:
        counts = Counter()
        for sha in git(repo, "log", "--no-merges", "--format=%H", f"-n{args.commits}", "HEAD", "--", "*.py").split():
            try:
                patch = parse_patch(git(repo, "format-patch", "-1", "--stdout", sha, "--", "*.py"), sha)
            except UserError:  # a binary or otherwise refused patch: import refuses it the same way
                counts["patches refused"] += 1
                continue
            for diff in patch.files:
                if diff.kind != "modified" or not diff.path.endswith(".py"):
                    continue
                problem = verdict(diff)
                counts["files"] += 1
                counts["made"] += problem is None
                if problem:
                    print(f"{Path(repo).parent.name} {sha[:12]} {diff.path}: {problem}", file=sys.stderr)
        print(f"{Path(repo).parent.name}: {counts['made']}/{counts['files']} files "
              f"({counts['patches refused']} patches refused)")
        totals.update(counts)
    print(f"total: {totals['made']}/{totals['files']} files "
          f"({100 * totals['made'] / max(totals['files'], 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
