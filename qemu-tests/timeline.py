#!/usr/bin/env python3
"""Per-node timeline of a cluster's first boot: a table on stdout and an SVG.

Usage: timeline.py PHASES.jsonl [--svg OUT.svg] [--baseline "label=seconds,..."] [--title T]

PHASES.jsonl has one object a node, as qemu-tests/timeline.sh's node_phases writes it:
poweron and kernel as epoch seconds; initrd, userspace, multiuser, import_start,
import_end and firstboot as systemd's monotonic microseconds (since the kernel started);
member as seconds since the kernel started (the journal's monotonic clock); container
true on a container node (the kernel is the host's: no firmware, kernel or initrd phase); apiserver
and ready as RFC 3339 times. Every phase is shown in seconds since the node's power-on:

  firmware   power-on to the kernel        kernel   to the initrd
  initrd     to systemd on the root        systemd  to multi-user.target
  import     the preloaded images' import (sprout-images.service)
  etcd       sprout-firstboot's start to the node being an etcd member
  apiserver  member to its apiserver's mirror pod Ready
  Ready      that to the node's Ready condition

A value the node did not report (an etcd-only image has no apiserver) is left out.
--baseline draws reference lines, for example the plain boots of the same run.
"""
import argparse
import datetime
import json
import sys

PHASES = [  # name, row, colour
    ("firmware", 0, "#9e9e9e"),
    ("kernel", 0, "#5c6bc0"),
    ("initrd", 0, "#26a69a"),
    ("systemd", 0, "#9ccc65"),
    ("import", 1, "#ffb300"),
    ("etcd", 2, "#ef5350"),
    ("apiserver", 2, "#ab47bc"),
    ("Ready", 2, "#29b6f6"),
]
ROWS = ["boot", "images", "cluster"]


def epoch(rfc3339):
    if not rfc3339:
        return None
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def spans(n):
    """The phases of one node as {name: (start, end)} in seconds since its power-on."""
    on = float(n["poweron"])
    k = float(n["kernel"]) - on

    def mono(key):  # systemd's monotonic microseconds, 0 when it did not happen
        v = n.get(key)
        return k + float(v) / 1e6 if v not in (None, "", 0, "0") else None

    out = {}

    def add(name, start, end):
        if start is not None and end is not None and end >= start:
            out[name] = (start, end)

    initrd, user, mu = mono("initrd"), mono("userspace"), mono("multiuser")
    # A container node has no firmware, kernel or initrd of its own: "kernel" is the
    # host's (its monotonic clock's start), and its systemd starts at power-on.
    if not n.get("container"):
        add("firmware", 0.0, k)
        add("kernel", k, initrd if initrd is not None else user)
        add("initrd", initrd, user)
    add("systemd", user, mu)
    add("import", mono("import_start"), mono("import_end"))
    member = k + float(n["member"]) if n.get("member") is not None else None
    add("etcd", mono("firstboot"), member)
    api = epoch(n.get("apiserver"))
    api = api - on if api is not None else None
    ready = epoch(n.get("ready"))
    ready = ready - on if ready is not None else None
    add("apiserver", member, api)
    # A worker has no apiserver and is no etcd member: its Ready follows its boot.
    add("Ready", next((t for t in (api, member, mu) if t is not None), None), ready)
    return out


def table(nodes):
    cols = [p[0] for p in PHASES]
    print("   timeline (seconds since each node's power-on; each phase's end, and its length)")
    print("   %-8s" % "node" + "".join("%16s" % c for c in cols))
    for name, s in nodes:
        row = ""
        for c in cols:
            row += "%16s" % ("%.0f (%.0f)" % (s[c][1], s[c][1] - s[c][0]) if c in s else "-")
        print("   %-8s%s" % (name, row))


def svg(nodes, baseline, title):
    end = max([e for _, s in nodes for (_, e) in s.values()] + [b for _, b in baseline] + [1.0])
    left, width, bar, gap = 90, 760, 14, 10
    scale = width / end
    node_h = len(ROWS) * (bar + 3) + gap
    top = 40
    height = top + len(nodes) * node_h + 70
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
         % (left + width + 30, height),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18" font-size="13" font-weight="bold">%s</text>' % (left, escape(title or "time to Ready"))]
    step = 60 if end > 300 else 30 if end > 120 else 10
    t = 0
    while t <= end:
        x = left + t * scale
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0"/>' % (x, top - 6, x, height - 60))
        o.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#616161">%d s</text>' % (x, height - 46, t))
        t += step
    for i, (name, s) in enumerate(nodes):
        y0 = top + i * node_h
        o.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (left - 8, y0 + bar + 6, escape(name)))
        for phase, row, colour in PHASES:
            if phase not in s:
                continue
            a, b = s[phase]
            y = y0 + row * (bar + 3)
            o.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %.0f-%.0f s (%.0f s)</title></rect>'
                     % (left + a * scale, y, max((b - a) * scale, 1), bar, colour, escape(name), phase, a, b, b - a))
    for label, b in baseline:
        x = left + b * scale
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4,3"/>' % (x, top - 6, x, height - 60))
        o.append('<text x="%.1f" y="%d" fill="black">%s %.0f s</text>' % (x + 3, top - 8, escape(label), b))
    x = left
    for phase, _, colour in PHASES:
        o.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (x, height - 30, colour))
        o.append('<text x="%d" y="%d">%s</text>' % (x + 16, height - 20, phase))
        x += 16 + 8 * len(phase) + 18
    o.append("</svg>")
    return "\n".join(o) + "\n"


def escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("phases")
    ap.add_argument("--svg")
    ap.add_argument("--baseline", default="")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    nodes = []
    with open(args.phases) as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                n = json.loads(line)
                nodes.append((n["node"], spans(n)))
            except (ValueError, KeyError, TypeError) as e:
                print("timeline: left out a node whose phases do not read (%s): %s" % (e, line.strip()[:120]),
                      file=sys.stderr)
    if not nodes:
        print("timeline: no node reported its phases", file=sys.stderr)
        return 1
    baseline = []
    for item in filter(None, args.baseline.split(",")):
        label, _, value = item.rpartition("=")
        baseline.append((label, float(value)))
    table(nodes)
    if args.svg:
        tmp = args.svg + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(svg(nodes, baseline, args.title))
        import os
        os.replace(tmp, args.svg)
        print("   timeline drawn: %s" % args.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
