#!/usr/bin/env python3
"""Summarizes e2e.test JUnit reports against the list of tests that were asked for.

Usage: summary.py [--wanted LIST] [--second-try DIR] REPORT...
       summary.py --focus LIST [--serial | --parallel]
       summary.py --failed --wanted LIST REPORT...

REPORT is a JUnit file, or a folder whose junit_*.xml files (at any depth) are read: a
parallel run writes one a ginkgo node. LIST names one test a line, exactly as e2e.test
names it (blank lines and lines starting with # are ignored); without it, every test a
report shows as run counts. ginkgo reports the tests outside its focus as skipped, so
only the listed tests are counted: each passed, failed (with the first lines of its
failure), skipped (with ginkgo's reason) or missing from every report. A test some
report shows failed is failed; else passed if one shows it passed. Prints one line a
test, then "conformance: N passed, N failed, N skipped"; exits 1 unless every listed
test passed.

--second-try DIR (a folder named second-try, which a REPORT folder may hold: it is
left out of the REPORTs) reads the reports of a second run of the tests that failed in the
REPORTs, one at a time (conformance/lib.sh runs it). A test that failed in the REPORTs
and passed there counts as passed and is printed as such, with its first failure; the
last line then ends "; K of them on a second try", so a flaky test is never silent. A
test that failed twice is failed, with its first failure.

--failed prints the listed tests the REPORTs show failed, one a line: the second try's
list.

--focus prints the ginkgo focus that selects exactly the listed tests: with --serial
only those that run alone (SERIAL below), with --parallel the rest; nothing when there
are none.
"""
import argparse
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

RANK = {"skipped": 0, "passed": 1, "failed": 2}
# Tests that run alone: those the suite marks [Serial], and those that create custom
# resource definitions. Each new CRD makes the apiserver rebuild its OpenAPI document, and
# the suite's fixtures give a CRD 30 s to be served: four at a time on an emulated node
# missed that ("listing custom resource definition objects works" timed out, 224 s), and
# so did a CustomResourcePublishOpenAPI test, which waits for its CRD's schema to appear
# in the rebuilt document ("removes definition from spec when one version gets changed
# to not be served", 175 s, four at a time on two emulated nodes).
SERIAL = re.compile(r"\[Serial\]|\] CustomResource(Definition resources|PublishOpenAPI) ")


def wanted_tests(path):
    """The test names of a list file: one a line, blank lines and # comments ignored."""
    with open(path) as fh:
        return [l.strip() for l in fh if l.strip() and not l.startswith("#")]


def focus(names):
    """A ginkgo focus selecting exactly these tests. ginkgo 1 matches it against the names
    of a test's containers and the test, joined by spaces (with "[Top Level]" first)."""
    return "|".join(r"(^|\s)" + re.escape(n) + "$" for n in names)


SECOND_TRY = "second-try"  # the folder of the second try's reports, left out of the first's


def report_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for f in sorted(glob.glob(os.path.join(p, "**", "junit_*.xml"), recursive=True)):
                if SECOND_TRY not in os.path.relpath(f, p).split(os.sep):
                    yield f
        else:
            yield p


def results(paths):
    """name -> (verdict, detail) over every test case of the reports."""
    out = {}
    for path in report_files(paths):
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name", "")
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            skipped = case.find("skipped")
            if failure is not None:
                text = (failure.get("message") or "") + "\n" + (failure.text or "")
                lines = [l.strip() for l in text.splitlines() if l.strip()]
                got = ("failed", " / ".join(lines[:3])[:400])
            elif skipped is not None:
                why = (skipped.get("message") or skipped.text or "").strip()[:200]
                got = ("skipped", why or "not run (outside ginkgo's focus, or the suite stopped before it)")
            else:
                got = ("passed", case.get("time", ""))
            if name not in out or RANK[got[0]] > RANK[out[name][0]]:
                out[name] = got
    return out


def progress(paths):
    """name -> (verdict, detail) from e2e.test's own progress lines in the e2e.log files
    under the given folders ({"msg":"PASSED <name>",...} or "FAILED <name>"), which it
    prints as each test ends: what a part cut short finished, when ginkgo wrote no report."""
    out = {}
    for p in paths:
        if not os.path.isdir(p):
            continue
        for log in sorted(glob.glob(os.path.join(p, "**", "e2e.log"), recursive=True)):
            if SECOND_TRY in os.path.relpath(log, p).split(os.sep):
                continue
            with open(log, errors="replace") as fh:
                for line in fh:
                    m = re.match(r'\{"msg":"(PASSED|FAILED) (.*?)","total"', line.strip())
                    if m:
                        verdict = "passed" if m.group(1) == "PASSED" else "failed"
                        detail = "" if verdict == "passed" else "failed (from e2e.test's progress line: its part ended before a report; the failure is in %s)" % log
                        out[m.group(2)] = (verdict, detail)
    return out


def merged(reports, lines):
    """The reports' verdicts, with each progress line's where it ranks higher. A part
    cut short wrote no report, but the other parts' reports list its tests as skipped
    (outside their focus): its progress lines must win over those, or its tests would
    look never run, its failures too."""
    out = dict(reports)
    for name, verdict in lines.items():
        if RANK[verdict[0]] > RANK[out.get(name, ("skipped", ""))[0]]:
            out[name] = verdict
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--wanted")
    ap.add_argument("--focus")
    ap.add_argument("--serial", action="store_true")
    ap.add_argument("--parallel", action="store_true")
    ap.add_argument("--second-try")
    ap.add_argument("--failed", action="store_true")
    ap.add_argument("reports", nargs="*")
    a = ap.parse_args()
    if a.focus:
        names = wanted_tests(a.focus)
        if a.serial:
            names = [n for n in names if SERIAL.search(n)]
        elif a.parallel:
            names = [n for n in names if not SERIAL.search(n)]
        print(focus(names))
        return 0
    if not a.reports:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    got = merged(results(a.reports), progress(a.reports))
    wanted = wanted_tests(a.wanted) if a.wanted else [n for n, (v, _) in got.items() if v != "skipped"]
    if a.failed:
        for name in wanted:
            if got.get(name, ("skipped",))[0] == "failed":
                print(name)
        return 0
    second = {}
    if a.second_try and os.path.isdir(a.second_try):
        second = merged(results([a.second_try]), progress([a.second_try]))
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    retried = 0
    for name in wanted:
        verdict, detail = got.get(name, ("skipped", "not in any report (the focus did not select it)"))
        again = second.get(name, ("", ""))
        if verdict == "failed" and again[0] == "passed":
            counts["passed"] += 1
            retried += 1
            print(f"  passed  {name} (on a second try, alone, {float(again[1] or 0):.1f} s; the first try FAILED: {detail})")
            continue
        counts[verdict] += 1
        if verdict == "passed":
            print(f"  passed  {name} ({float(detail or 0):.1f} s)")
        elif verdict == "failed" and again[0] == "failed":
            print(f"  FAILED  {name}: {detail} (and again on a second try, alone)")
        else:
            print(f"  {verdict.upper()}  {name}: {detail}")
    tail = f"; {retried} of them on a second try" if retried else ""
    print(f"conformance: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped{tail}")
    return 0 if counts["passed"] == len(wanted) else 1


if __name__ == "__main__":
    sys.exit(main())
