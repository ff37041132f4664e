#!/usr/bin/env python3
"""Summarizes an e2e.test JUnit report against the list of tests that were asked for.

Usage: summary.py JUNIT.xml [WANTED.txt]

WANTED.txt names one test a line, exactly as e2e.test names it (blank lines and lines
starting with # are ignored); without it, every test the report shows as run counts.
ginkgo reports every test it did not focus on as skipped, so only the wanted tests are
counted: each is passed, failed (with the first lines of its failure), skipped (with
the reason ginkgo gave), or missing from the report. Prints one line a test that did not
pass, then "conformance: N passed, N failed, N skipped"; exits 1 unless every wanted
test passed.
"""
import sys
import xml.etree.ElementTree as ET


def results(path):
    """name -> (verdict, detail) for every test case in the report."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            text = (failure.get("message") or "") + "\n" + (failure.text or "")
            lines = [l.strip() for l in text.splitlines() if l.strip()]
            out[name] = ("failed", " / ".join(lines[:3])[:400])
        elif skipped is not None:
            out[name] = ("skipped", (skipped.get("message") or skipped.text or "").strip()[:200])
        else:
            out[name] = ("passed", case.get("time", ""))
    return out


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    got = results(sys.argv[1])
    if len(sys.argv) == 3:
        with open(sys.argv[2]) as fh:
            wanted = [l.strip() for l in fh if l.strip() and not l.startswith("#")]
    else:
        wanted = [n for n, (v, _) in got.items() if v != "skipped"]
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for name in wanted:
        verdict, detail = got.get(name, ("skipped", "not in the report (the focus did not select it)"))
        counts[verdict] += 1
        if verdict == "passed":
            print(f"  passed  {name} ({float(detail or 0):.1f} s)")
        else:
            print(f"  {verdict.upper()}  {name}: {detail}")
    print(f"conformance: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 0 if counts["passed"] == len(wanted) else 1


if __name__ == "__main__":
    sys.exit(main())
