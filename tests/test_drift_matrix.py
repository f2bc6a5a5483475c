"""The drift matrix over published wheels (tags network, slow): make_patch is
right on every version of the documented range, and the table says how the
static patch fares beside it. Bad input is refused before any download."""
import json
import os
import re
import subprocess
import sys

import pytest

from fixmono.testing import REPO_ROOT, git, make_repo, write_wheel
from tests.helpers import LOADER_BASE, LOADER_FIX, LOADER_RELEASE, TF_DIFF, TF_PATH, TF_TEXT

network = pytest.mark.skipif(os.environ.get("FIXMONO_NETWORK") != "1", reason="downloads wheels (tag: network)")
TE_FIX = "te-rocm-unfused-bias-grad-fp32-wgrad"


def run(*args, env=None):
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "drift_matrix"), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=600)


# TE 2.x final releases as of 2026-11-23, pinned: a later release must not change the counts
# (`tools/drift_matrix --fix ...` with no --versions lists the current range).
TE_2X = ("2.1.0 2.2.0 2.3.0 2.4.0 2.5.0 2.6.0 2.6.0.post1 2.7.0 2.8.0 2.9.0 2.10.0 2.11.0 2.12.0 2.13.0 2.14.0 "
         "2.14.1 2.15.0 2.16.0 2.16.1 2.17.0 2.17.1 2.18.0 2.19.0 2.20.2").split()


@network
def test_te_range_is_all_applied_and_static_patch_rate_is_reported():
    proc = run("--fix", TE_FIX, "--versions", "transformer-engine=" + ",".join(TE_2X))
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("make_patch: 24 fix-versions: 24 applied, 0 already-applied")
    assert "| 2.1.0 | applied |" in proc.stdout and "| 2.20.2 | applied | applies |" in proc.stdout


@network
def test_transformers_sample_written_to_out(tmp_path):
    report = tmp_path / "report.md"
    proc = run("--fix", "transformers-pin-moe-routing", "--versions", "transformers=5.2.0,5.23.0", "--out", report)
    assert proc.returncode == 0, proc.stderr
    assert "| 5.23.0 | applied | applies |" in proc.stdout
    assert report.read_text() == proc.stdout and sorted(tmp_path.iterdir()) == [report]


def case(id: str, *args: str, message: str):
    return pytest.param(args, message, id=id)


# Each case: its arguments (OUT: a report path in the test's folder, TMP: that
# folder) and what the one error line says.
BAD_INPUT = [
    case("out-is-a-dir", "--out", "TMP", message="is a directory"),
    case("out-in-proc", "--out", "/proc/x/report.md", message="--out /proc/x/report.md: no folder /proc/x"),
    case("out-not-a-regular-file", "--out", "/dev/null", message="--out /dev/null is not a regular file"),
    case("versions-empty-list", "--versions", "transformer-engine=", "--out", "OUT",
         message="--versions 'transformer-engine=': empty version in the list"),
    case("versions-empty-items", "--versions", "pytorch=,,", "--out", "OUT",
         message="--versions 'pytorch=,,': empty version in the list"),
    case("versions-project-not-in-wheels", "--versions", "xla=1.0", "--out", "OUT",
         message="xla fixes do not ship in wheels"),
    case("versions-project-not-selected", "--fix", TE_FIX, "--versions", "transformers=5.2.0", "--out", "OUT",
         message="none of the selected fixes targets transformers"),
    case("versions-unknown-project", "--versions", "nosuch=1.0", "--out", "OUT", message="unknown project 'nosuch'"),
    case("versions-malformed", "--versions", "x", "--out", "OUT", message="--versions 'x': expected PROJECT=V1,V2"),
    case("versions-not-a-version", "--versions", "pytorch=foo", "--out", "OUT", message="'foo' is not a version"),
    case("versions-twice", "--versions", "pytorch=2.13.0", "--versions", "pytorch=2.12.0", "--out", "OUT",
         message="pytorch given twice"),
    case("versions-no-value", "--out", "OUT", "--versions", message="argument --versions: expected one argument"),
    case("fix-unknown", "--fix", "nope", "--fix", TE_FIX, "--fix", "nope2", "--out", "OUT",
         message="unknown fix id(s): nope, nope2 (known: "),
    case("fix-not-in-wheels", "--fix", "xla-rocm-miopen-global-mutex", "--out", "OUT",
         message="--fix xla-rocm-miopen-global-mutex: its targets do not ship in wheels"),
    case("unknown-option", "--bogus", message="unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT)
def test_bad_input_is_one_line_before_any_download(tmp_path, args, message):
    paths = {"OUT": tmp_path / "report.md", "TMP": tmp_path}
    offline = {**os.environ, "PIP_NO_INDEX": "1", "PIP_INDEX_URL": "http://127.0.0.1:9/"}  # a download fails
    proc = run(*(paths.get(a, a) for a in args), env=offline)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("drift_matrix: error: ") and message in line, line
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no report, no partial one


def releases_of_the_diff(tmp_path, texts: dict[str, str]) -> dict:
    """TF_DIFF as fix.patch and one made-up transformers wheel per {version: TF_PATH's text} in a local
    find-links folder; the environment that reads them from there."""
    links = tmp_path / "links"
    links.mkdir()
    for version, text in texts.items():
        write_wheel(links, "transformers", version, {"transformers/__init__.py": "", TF_PATH: text})
    (tmp_path / "fix.patch").write_text(TF_DIFF)
    return {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), "FIXMONO_CACHE": str(tmp_path / "cache")}


def test_a_diff_over_releases_from_a_find_links_folder(tmp_path):
    """--diff: the user's patch over three releases served from a local
    find-links folder (wheels made here): applied where it was made, applied
    where a method above moved it, not-applicable where its code is absent."""
    moved = TF_TEXT.replace("class Scheduler:\n", "class Scheduler:\n    def reset(self):\n        self.step = 0\n\n")
    env = releases_of_the_diff(tmp_path, {"9.0.0": "x = 1\n", "9.1.0": TF_TEXT, "9.2.0": moved})
    proc = run("--diff", tmp_path / "fix.patch", "--versions", "transformers=9.0.0,9.1.0,9.2.0", "--json",
               "--html", tmp_path / "site", env=env)
    assert proc.returncode == 0, proc.stderr
    (cells,) = json.loads(proc.stdout)["matrix"].values()
    assert [(c["version"], c["status"]) for c in cells] == [("9.0.0", "not-applicable"), ("9.1.0", "applied"),
                                                            ("9.2.0", "applied")]
    index = (tmp_path / "site" / "index.html").read_text()  # --html: the same rows as a page
    assert re.findall(r'data-status="([a-z-]+)"', index) == ["not-applicable", "applied", "applied"]
    both = run("--diff", tmp_path / "fix.patch", "--fix", "x", env=env)
    assert both.returncode == 2 and "--diff takes the place of --fix" in both.stderr


def test_the_table_says_why_a_release_got_no_patch_and_counts_refusals_apart(tmp_path):
    """A refusal (failed) and a not-applicable carry their reason into the markdown table, escaped for it; the
    summary counts a refusal as an answer with a reason, not as a fix-version handled wrongly."""
    other_form = TF_TEXT.replace("return step / self.warmup", "return step / float(self.warmup)")
    env = releases_of_the_diff(tmp_path, {"9.0.0": "x = 1\n", "9.1.0": TF_TEXT, "9.3.0": other_form})
    proc = run("--diff", tmp_path / "fix.patch", "--versions", "transformers=9.0.0,9.1.0,9.3.0", env=env)
    assert proc.returncode == 1, proc.stderr  # no patch for one release: not a clean run
    rows = {line.split(" | ")[0].strip("| "): line for line in proc.stdout.splitlines() if line.startswith("| 9.")}
    assert rows["9.1.0"].endswith("| applied | n/a |  |")
    assert "| not-applicable | n/a | " in rows["9.0.0"] and "fixmono_example.py" in rows["9.0.0"]
    assert "| failed | n/a | " in rows["9.3.0"] and "return step / self.warmup" in rows["9.3.0"], rows["9.3.0"]
    assert proc.stdout.strip().splitlines()[-1].startswith(
        "make_patch: 3 fix-versions: 1 applied, 0 already-applied, 1 not-applicable with a reason, "
        "1 refused with a reason (failed)")


def test_a_reason_stays_one_table_cell():
    from fixmono.analysis.drift import REASON_CHARS, Cell, reason
    long = Cell("1.0", "failed", "a `x | y` line\nnot here " + "z" * 500, "n/a")
    cell = reason(long)
    assert "\n" not in cell and "`x \\| y`" in cell and len(cell) == REASON_CHARS and cell.endswith("…")
    assert reason(Cell("1.0", "applied", "a.py: 1 site(s) changed", "applies")) == ""


def test_history_ports_a_diff_over_releases_through_its_pre_image(tmp_path):
    """--history: wheels hold no blob of upstream's history; a clone that has the diff's pre-image (its
    `index` line's blob) lets each release be ported through it where the hunks alone cannot tell."""
    path = "mylib/loader.py"
    repo = make_repo(tmp_path / "repo", {"mylib/__init__.py": "", path: LOADER_BASE})
    (repo / path).write_text(LOADER_BASE.replace(*LOADER_FIX, 1))
    git(repo, "commit", "-qam", "load: an empty read is no data")
    (tmp_path / "fix.patch").write_text(git(repo, "format-patch", "-1", "--stdout"))
    links = tmp_path / "links"
    links.mkdir()
    write_wheel(links, "mylib", "1.0.0", {"mylib/__init__.py": "", path: LOADER_RELEASE})
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), "FIXMONO_CACHE": str(tmp_path / "cache")}
    args = ["--diff", tmp_path / "fix.patch", "--versions", "mylib=1.0.0", "--json"]
    (alone,) = json.loads(run(*args, env=env).stdout)["matrix"].values()
    assert [c["status"] for c in alone] == ["failed"], alone  # the hunks alone: which method of Loader?
    proc = run(*args, "--history", repo, env=env)
    assert proc.returncode == 0, proc.stderr
    (cells,) = json.loads(proc.stdout)["matrix"].values()
    assert [c["status"] for c in cells] == ["applied"] and f"in --history {repo})" in cells[0]["detail"], cells
    for bad in (["--history", repo], [*args, "--history", tmp_path / "nowhere"], [*args, "--history", " "]):
        proc = run(*bad, env=env)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "--history" in proc.stderr, proc.stderr
