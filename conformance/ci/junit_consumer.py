"""Reads a JUnit report of rcp-conformance with junitparser (a real JUnit consumer) and checks
it against the JSON report of the same run: one test case per check, a <failure> exactly for
each FAIL, a <skipped> with a message for every other status that is not PASS.

usage: python3 junit_consumer.py REPORT.xml REPORT.json
"""

import json
import sys

from junitparser import Failure, JUnitXml, Skipped


def main(xml_path: str, json_path: str) -> int:
    report = json.load(open(json_path, encoding="utf-8"))
    by_id = {c["id"]: c for c in report["checks"]}
    xml = JUnitXml.fromfile(xml_path)
    cases = [case for suite in xml for case in suite]
    problems = []
    if len(cases) != len(by_id):
        problems.append(f"{len(cases)} test cases for {len(by_id)} checks")
    failures = 0
    for case in cases:
        check = by_id.get(case.name)
        if check is None:
            problems.append(f"test case {case.name!r} is no check of the report")
            continue
        kinds = [type(r) for r in case.result]
        status = check["status"]
        if status == "FAIL":
            failures += 1
            if kinds != [Failure]:
                problems.append(f"{case.name}: FAIL but results {kinds}")
        elif status == "PASS":
            if kinds:
                problems.append(f"{case.name}: PASS but results {kinds}")
        elif kinds != [Skipped] or not case.result[0].message:
            problems.append(f"{case.name}: {status} is not a skipped case with a message ({kinds})")
    if failures != report["counts"]["failed"]:
        problems.append(f"{failures} failures in the XML, {report['counts']['failed']} in the JSON report")
    for p in problems:
        print(f"junit: {p}", file=sys.stderr)
    if not problems:
        print(f"junit: {len(cases)} test cases, {failures} failures, consistent with the JSON report")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
