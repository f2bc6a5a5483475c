"""Summarise a `bazel test` run as `N passed, N failed` (test cases, not targets).

Reads Bazel's output on stdin (passing it through; one run or several one after
the other), takes the targets the runs reported, and counts the test cases in
their JUnit files (pytest writes them to XML_OUTPUT_FILE). A target that failed
without a JUnit file counts as one failed case. A failing target is named, with
its failed cases, as soon as Bazel reports it (`FAILED //x: case, ...`); at the
end, a table of the targets (status, cases passed, failed, skipped; `no cases`
where a target ran none), each skipped case with its reason, as `pytest -rs`
does (Bazel prints nothing of a passing target), the ten slowest targets of the
run (Bazel's `in 12.3s`), and the counts. Exit code: 0
when nothing failed.
"""
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

FAIL = re.compile(r"^FAIL: (//\S+) ")
SECONDS = re.compile(r"\bin ([\d.]+)s\b")  # Bazel's "PASSED in 12.3s"
STATUS = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|"
                    r"FAILED TO BUILD|SKIPPED)\b")


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


def junit(testlogs: str, label: str) -> Path:
    return Path(testlogs, *label[2:].replace(":", "/").split("/"), "test.xml")


def failed_cases(xml: Path) -> list[str]:
    if not xml.is_file():
        return []
    return [case.get("name", "?") for case in ET.parse(xml).getroot().iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None]


def main(testlogs: str) -> int:
    targets, seconds = {}, {}
    for line in sys.stdin:
        sys.stdout.write(line)
        if m := FAIL.match(line.strip()):
            cases = failed_cases(junit(testlogs, m.group(1)))
            sys.stdout.write(f"FAILED {m.group(1)}" + (f": {', '.join(cases)}" if cases else "") + "\n")
        if m := STATUS.match(line.strip()):
            targets[m.group(1)] = m.group(2)
            if (took := SECONDS.search(line)) and "(cached)" not in line:
                seconds[m.group(1)] = float(took.group(1))
        sys.stdout.flush()
    passed = failed = 0
    skipped, rows = [], []
    for label, status in sorted(targets.items()):
        xml = junit(testlogs, label)
        if status == "SKIPPED":
            rows.append((label, status, "", "", ""))
            continue
        if status in ("PASSED", "FLAKY", "FAILED") and xml.is_file():
            p, f, s = count_cases(xml)
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
        print(f"ten slowest targets this run (of {len(seconds)} run, {sum(seconds.values()):.0f} s in all): "
              + ", ".join(f"{label} {took:.0f} s" for label, took in slowest))
    print(f"{len(targets)} test targets; {len(skipped)} test cases skipped")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not targets else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
