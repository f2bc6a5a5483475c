"""patches/xla, made by make_patch's remote form from a ROCm/xla branch tip
(BASE: the branch and its commit), checked without the network: make_patch on
our fixture tree of the XLA fix (shaped like those files, not upstream's text)
must give the same commit message (subject, description, DEP-3 fields), the
same files, and the same lines of the fix itself (the global MIOpen mutex and
its locks, the autotuner's fallback warning; the code around them differs
between our fixture and the branch). A change to the
fix's transformation or declaration fails this until the series is written
again (command in README)."""
import collections
import re
from pathlib import Path

from fixmono.testing import REPO_ROOT, catalogue_tree, make_patch, make_repo

SERIES = Path(REPO_ROOT / "patches" / "xla" / "series").resolve().parent
MESSAGE = re.compile(r"^Subject:.*?^---$", re.M | re.S)
OWN = re.compile(r"miopen_global_mutex|MIOpen autotuning failed|falling back to the default config")


def fix_lines(patch: str) -> dict[str, collections.Counter]:
    """Per file, the added lines that are the fix's own (whitespace removed)."""
    lines: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    current = None
    for line in patch.splitlines():
        if line.startswith("+++ b/"):
            current = line[len("+++ b/"):]
        elif current and line.startswith("+") and OWN.search(line):
            lines[current]["".join(line[1:].split())] += 1
    return dict(lines)


def test_checked_in_series_is_what_make_patch_writes(tmp_path):
    base, commit = (SERIES / "BASE").read_text().split()
    assert re.fullmatch(r"https://github\.com/ROCm/xla@rocm-jaxlib-v[0-9.]+", base) and re.fullmatch(r"[0-9a-f]{40}", commit)
    names = (SERIES / "series").read_text().split()
    assert names == ["0001-xla-rocm-miopen-global-mutex.patch"]
    checked_in = (SERIES / names[0]).read_text()

    repo = make_repo(tmp_path / "xla", catalogue_tree("xla"))
    run = make_patch("xla-rocm-miopen-global-mutex", "--upstream", str(repo), "--out", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    fresh = (tmp_path / "out" / names[0]).read_text()

    assert MESSAGE.search(checked_in).group(0) == MESSAGE.search(fresh).group(0)
    assert fix_lines(checked_in) == fix_lines(fresh)
    assert set(fix_lines(checked_in)) == {"xla/stream_executor/rocm/rocm_dnn.cc", "xla/backends/gpu/autotuner/miopen.cc"}
