"""Summarise a `bazel test` run as `N passed, N failed` (test cases, not targets).

Reads Bazel's output on stdin (passing it through; one run or several one after
the other), takes the targets the runs reported, and counts the test cases in
their JUnit files (pytest writes them to XML_OUTPUT_FILE). A target that failed
without a JUnit file counts as one failed case. A failing target is named, with
its failed cases, as soon as Bazel reports it (`FAILED //x: case, ...`); at the
end, a table of the targets (status, cases passed, failed, skipped; `no cases`
where a target ran none), each skipped case with its reason, as `pytest -rs`
does (Bazel prints nothing of a passing target), the ten slowest targets of the
run (Bazel's `in 12.3s`; of a sharded target, its slowest shard) each with its share
of its timeout, every target that used more than a third of its timeout (a timeout
must hold with margin on a loaded machine: docs/testing.md), and the counts. The
timeout is the one Bazel gave the test (TEST_TIMEOUT, which tools/pytest_main.py
writes at the top of test.log); a target that timed out used all of it. A sharded
target's cases are counted over its shards' JUnit files. Exit code: 0 when nothing
failed.
"""
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

FAIL = re.compile(r"^FAIL: (//\S+) ")
SECONDS = re.compile(r"\bin ([\d.]+)s\b")  # Bazel's "PASSED in 12.3s"
STATUS = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|"
                    r"FAILED TO BUILD|SKIPPED)\b")
STATS = re.compile(r"^Stats over (\d+) runs: max = ([\d.]+)s, min = ([\d.]+)s, avg = ([\d.]+)s")
TIMEOUT = re.compile(r"^TEST_TIMEOUT=(\d+)\s*$", re.M)  # written by tools/pytest_main.py


def count_cases(xml: Path) -> tuple[int, int, list[str]]:
    """Passed and failed cases, and a `name: reason` line per skipped case."""
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    total = failed = 0
    for s in suites:
        total += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
    skipped = [f"{case.get('name')}: {' '.join(mark.get('message', '').split())[:300]}"
               for case in root.iter("testcase") for mark in case.findall("skipped")]
    return total - failed - len(skipped), failed, skipped


def logs(testlogs: str, label: str) -> list[Path]:
    """The target's log folders: its own, or one per shard (shard_1_of_4/...)."""
    d = Path(testlogs, *label[2:].replace(":", "/").split("/"))
    shards = sorted(d.glob("shard_*_of_*"), key=lambda p: int(p.name.split("_")[1]))
    return shards or [d]


def junit(testlogs: str, label: str) -> list[Path]:
    return [d / "test.xml" for d in logs(testlogs, label)]


def timeout_of(testlogs: str, label: str) -> int | None:
    """The timeout Bazel gave the target, in seconds, as its test.log says (the first shard's that says)."""
    for d in logs(testlogs, label):
        try:
            with open(d / "test.log", errors="replace") as f:
                head = f.read(20000)
        except OSError:
            continue
        if m := TIMEOUT.search(head):
            return int(m.group(1))
    return None


def failed_cases(xmls: list[Path]) -> list[str]:
    return [case.get("name", "?") for xml in xmls if xml.is_file()
            for case in ET.parse(xml).getroot().iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None]


def share(took: float, timeout: int | None, status: str) -> str:
    if status == "TIMEOUT":
        return "timed out"
    return f"{took / timeout:.0%} of {timeout} s" if timeout else "timeout unknown"


def main(testlogs: str) -> int:
    targets, seconds, spent, last = {}, {}, {}, None
    for line in sys.stdin:
        sys.stdout.write(line)
        if m := FAIL.match(line.strip()):
            cases = failed_cases(junit(testlogs, m.group(1)))
            sys.stdout.write(f"FAILED {m.group(1)}" + (f": {', '.join(cases)}" if cases else "") + "\n")
        if m := STATUS.match(line.strip()):
            targets[m.group(1)] = m.group(2)
            last = None
            if (took := SECONDS.search(line)) and "(cached)" not in line:
                seconds[m.group(1)] = spent[m.group(1)] = float(took.group(1))
                last = m.group(1)
        elif last and (m := STATS.match(line.strip())):  # a sharded target: `in` is its slowest shard
            spent[last] = int(m.group(1)) * float(m.group(4))
        sys.stdout.flush()
    passed = failed = 0
    skipped, rows = [], []
    for label, status in sorted(targets.items()):
        xmls = junit(testlogs, label)
        if status == "SKIPPED":
            rows.append((label, status, "", "", ""))
            continue
        if status in ("PASSED", "FLAKY", "FAILED") and all(xml.is_file() for xml in xmls):
            p, f, s = 0, 0, []
            for xml in xmls:
                counts = count_cases(xml)
                p, f, s = p + counts[0], f + counts[1], s + counts[2]
            if status != "PASSED" and f == 0:
                f = 1  # e.g. a crash after the report was written
        else:
            p, f, s = 0, 1, []
        passed, failed = passed + p, failed + f
        skipped += [f"SKIPPED {label} {line}" for line in s]
        rows.append((label, status if p + f + len(s) else "no cases", p, f, len(s)))
    width = max([len(row[0]) for row in rows] + [len("target")])
    print(f"{'target':<{width}}  {'result':<8}  {'passed':>6}  {'failed':>6}  {'skipped':>7}")
    for label, status, p, f, s in rows:
        print(f"{label:<{width}}  {status:<8}  {p:>6}  {f:>6}  {s:>7}")
    for line in skipped:
        print(line)
    if seconds:  # where the suite's time goes (cached targets took none this run)
        slowest = sorted(seconds.items(), key=lambda item: -item[1])[:10]
        timeouts = {label: timeout_of(testlogs, label) for label in seconds}
        print(f"ten slowest targets this run (of {len(seconds)} run, {sum(spent.values()):.0f} s in all): "
              + ", ".join(f"{label} {took:.0f} s ({share(took, timeouts[label], targets[label])})"
                          for label, took in slowest))
        over = [(label, took) for label, took in sorted(seconds.items(), key=lambda item: -item[1])
                if targets[label] == "TIMEOUT" or (timeouts[label] and took > timeouts[label] / 3)]
        for label, took in over:
            print(f"OVER A THIRD OF ITS TIMEOUT {label} {took:.0f} s ({share(took, timeouts[label], targets[label])})")
    print(f"{len(targets)} test targets; {len(skipped)} test cases skipped")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not targets else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
