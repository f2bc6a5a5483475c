"""Summarise a `bazel test` run as `N passed, N failed` (test cases, not targets).

Reads Bazel's output on stdin (passing it through), takes the targets this run
reported, and counts the test cases in their JUnit files (pytest writes them to
XML_OUTPUT_FILE). A target that failed without a JUnit file counts as one
failed case. Exit code: 0 when nothing failed.
"""
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

STATUS = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|"
                    r"FAILED TO BUILD|SKIPPED)\b")


def count_cases(xml: Path) -> tuple[int, int, int]:
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    total = failed = skipped = 0
    for s in suites:
        total += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def main(testlogs: str) -> int:
    targets = {}
    for line in sys.stdin:
        sys.stdout.write(line)
        if m := STATUS.match(line.strip()):
            targets[m.group(1)] = m.group(2)
    passed = failed = skipped = 0
    for label, status in sorted(targets.items()):
        xml = Path(testlogs, *label[2:].replace(":", "/").split("/"), "test.xml")
        if status == "SKIPPED":
            continue
        if status in ("PASSED", "FLAKY", "FAILED") and xml.is_file():
            p, f, s = count_cases(xml)
            if status != "PASSED" and f == 0:
                f = 1  # e.g. a crash after the report was written
        else:
            p, f, s = 0, 1, 0
        passed, failed, skipped = passed + p, failed + f, skipped + s
    print(f"{len(targets)} test targets; {skipped} test cases skipped")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not targets else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
