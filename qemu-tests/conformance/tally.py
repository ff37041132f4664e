#!/usr/bin/env python3
"""Tallies the [Conformance] tests over several runs: which passed in any run, which
failed in every run that ran them, which no run has reached.

usage: tally.py ALL [--ledger] [--todo FILE] [--scaled-waits FILE] [LABEL=]RUN ...

ALL is the release's list of tests: the suite's conformance.yaml (as compile.sh puts it
beside e2e.test) or a file of names, one a line. Each RUN is either a run's summary.txt
(written by conformance_run: "  passed  NAME (...)", "  FAILED  NAME: why") or a list of
names, one a line, that passes as a whole (CI's api-only.txt passes at every landing).
LABEL names the run in the output (default: the file's path).

A test counts as passed when some run passed it: a long list runs in parts over several
sessions (docs/conformance.md). In a run whose summary begins "waits scaled:"
(CONFORMANCE_WAIT_SCALE), a pass of a test whose waits the scale reaches (scaled-waits.txt,
beside this file, or --scaled-waits FILE) is counted apart, as passing only with scaled waits, unless a run
without scaled waits also passed it; any other test's code reads no scaled wait, so its
pass there is a plain pass. --ledger prints every test with its verdict
and the run that gave it. --todo FILE writes the names of the tests not yet passed
without scaled waits, one a line, as the next run's LIST (conformance.sh IMAGE FILE).
Exits 0 when every test of ALL passed without scaled waits."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summary import wanted_tests  # noqa: E402  (the runner's own reading of a list)


def names_in(path):
    """The test names of a conformance.yaml or of a list (comments and blanks skipped)."""
    if path.endswith((".yaml", ".yml")):
        import yaml  # python3-yaml; only for the suite's own list

        with open(path) as fh:
            return [t["codename"] for t in yaml.safe_load(fh)]
    return wanted_tests(path)


def read_run(path):
    """(verdicts, scaled): name -> ("passed" | "failed", detail) from a summary.txt, or
    every name passed from a plain list; scaled is True when the run scaled its waits."""
    with open(path) as fh:
        lines = fh.read().splitlines()
    if not any(re.match(r"conformance: \d+ passed", l) for l in lines):
        return {n: ("passed", "") for n in names_in(path)}, False
    scaled = bool(lines) and lines[0].startswith("waits scaled:")
    out = {}
    for l in lines:
        # Every name ends in "[Conformance]"; a name may itself hold " (".
        m = re.match(r"  passed  (.*?\[Conformance\]) \((.*)\)$", l)
        if m:
            out[m.group(1)] = ("passed", m.group(2))
            continue
        m = re.match(r"  FAILED  (.*?\[Conformance\]): (.*)$", l)
        if m:
            out[m.group(1)] = ("failed", m.group(2))
    return out, scaled


def take_option(argv, flag, what):
    """(value, argv without the flag and its value); value None when the flag is absent.
    Raises ValueError naming what the flag needs when its value is missing."""
    if flag not in argv:
        return None, argv
    i = argv.index(flag)
    if i + 1 >= len(argv):
        raise ValueError(f"tally.py: {flag} needs {what}")
    return argv[i + 1], argv[:i] + argv[i + 2:]


def main(argv):
    try:
        todo, argv = take_option(argv, "--todo", "a file to write the list to")
        scaled_list, argv = take_option(argv, "--scaled-waits", "the file listing the tests the scale reaches")
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    # The tests whose waits CONFORMANCE_WAIT_SCALE reaches.
    reached = set(wanted_tests(scaled_list or os.path.join(os.path.dirname(os.path.abspath(__file__)), "scaled-waits.txt")))
    args = [a for a in argv if a != "--ledger"]
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    every = names_in(args[0])
    best = {}  # name -> (rank, label, detail): passed 3, passed with scaled waits 2, failed 1
    per_run = []
    for arg in args[1:]:
        label, _, path = arg.partition("=") if "=" in arg else ("", "", arg)
        label = label or path
        verdicts, scaled = read_run(path)
        passed = 0
        for name, (verdict, detail) in verdicts.items():
            if name not in every:
                continue
            rank = 1 if verdict == "failed" else (2 if scaled and name in reached else 3)
            passed += rank > 1
            if rank > best.get(name, (0,))[0]:
                best[name] = (rank, label, detail)
        per_run.append(f"{label} {passed}" + (" (waits scaled)" if scaled else ""))
    counts = {3: 0, 2: 0, 1: 0, 0: 0}
    for name in every:
        counts[best.get(name, (0,))[0]] += 1
    scaled_note = f" ({counts[2]} more only with scaled waits)" if counts[2] else ""
    print(f"of {len(every)} [Conformance] tests: {counts[3]} passed{scaled_note}, "
          f"{counts[1]} failed in every run that ran them, {counts[0]} not run yet")
    print("  passes by run (a test passed in several counts in each): " + "; ".join(per_run))
    for name in every:
        rank, label, detail = best.get(name, (0, "", ""))
        if rank == 3 and "--ledger" not in argv:
            continue
        word = {3: "passed", 2: "passed with scaled waits", 1: "FAILED", 0: "not run"}[rank]
        where = f" ({label}: {detail})" if rank else ""
        print(f"  {word}  {name}{where}")
    if todo:
        left = [n for n in every if best.get(n, (0,))[0] < 3]
        with open(todo + ".tmp", "w") as fh:
            fh.write("".join(n + "\n" for n in left))
        os.replace(todo + ".tmp", todo)
        print(f"  {len(left)} tests not yet passed written to {todo}", file=sys.stderr)
    return 0 if counts[3] == len(every) else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # a reader such as head stopped early
        sys.exit(1)
