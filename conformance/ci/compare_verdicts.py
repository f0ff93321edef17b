#!/usr/bin/env python3
"""Compare two `rcp-conformance --json` reports of the same server: the pip-installed wheel's
and the workspace build's. They must agree on every check (same ids in the same order, same
level, same status) and on the outcome (certified and declared level, level limit, honesty of
the declaration, success, exit code). Details and anything timed are not compared.

    compare_verdicts.py WHEEL.json WORKSPACE.json

Exits 0 and prints one summary line when they agree; otherwise prints each difference and
exits 1. A report with no checks, or no check that ran, is an error: two empty reports agree
about nothing.
"""
import collections
import json
import sys

OUTCOME = ("certifiedLevel", "declaredLevel", "levelLimit", "declarationHonest", "success", "exitCode")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: not a JSON report ({e})")
    checks = report.get("checks")
    if not isinstance(checks, list) or not checks:
        sys.exit(f"{path}: the report has no checks")
    if not any(c.get("status") in ("PASS", "FAIL") for c in checks):
        sys.exit(f"{path}: no check ran (every one skipped)")
    return report


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: compare_verdicts.py WHEEL.json WORKSPACE.json")
    a_path, b_path = sys.argv[1:]
    a, b = load(a_path), load(b_path)
    diffs = []
    for key in OUTCOME:
        if a.get(key) != b.get(key):
            diffs.append(f"{key}: {a.get(key)!r} (wheel) vs {b.get(key)!r} (workspace)")
    rows_a = [(c.get("id"), c.get("level"), c.get("status")) for c in a["checks"]]
    rows_b = [(c.get("id"), c.get("level"), c.get("status")) for c in b["checks"]]
    if [r[0] for r in rows_a] != [r[0] for r in rows_b]:
        only_a = sorted({r[0] for r in rows_a} - {r[0] for r in rows_b})
        only_b = sorted({r[0] for r in rows_b} - {r[0] for r in rows_a})
        diffs.append(f"check ids differ: only in the wheel's {only_a}, only in the workspace's {only_b}"
                     + ("" if only_a or only_b else " (same ids, another order)"))
    by_id_b = {r[0]: r for r in rows_b}
    for row in rows_a:
        other = by_id_b.get(row[0])
        if other is not None and other != row:
            diffs.append(f"{row[0]}: {row[1]} {row[2]} (wheel) vs {other[1]} {other[2]} (workspace)")
    if diffs:
        print("the wheel's verdict differs from the workspace build's:")
        for d in diffs:
            print("  " + d)
        sys.exit(1)
    counts = collections.Counter(r[2] for r in rows_a)
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"same verdict: {len(rows_a)} checks ({tally}); certified {a.get('certifiedLevel')}, "
          f"declared {a.get('declaredLevel')}, exit code {a.get('exitCode')}")


if __name__ == "__main__":
    main()
