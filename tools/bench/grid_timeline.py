#!/usr/bin/env python3
"""How one decode launch's CTAs spend it, from the grid stamps that
MLAJIT_TIMELINE builds print (kernel_templates/mla_timeline.cuh): when
each CTA entered, got past its wait for the previous kernel, started and
ended its work items and left, and when the merge kernel's CTA 0 was done;
and, where printed, when each merge CTA entered, got past its wait for the
decode and was done.

    MLAJIT_TIMELINE=151 MLAJIT_CACHE_DIR=/tmp/timeline-cache \\
        mlajit_bench --case 32,4,8192,32,bf16 > run.txt
    tools/bench/grid_timeline.py run.txt

It answers where a call's time goes outside its CTAs' steady work: how far
the CTAs' ends spread, whether some SMs run their tiles slower than the
rest, and how long the merge takes after the last CTA. Times are ns of
%globaltimer since the first CTA's entry; a CTA stamps its first six work
items (mla_timeline::GRID_ITEMS), so tiles past them are not counted.
Standard library only.
"""
import argparse
import re
import statistics
import sys

CTA = re.compile(
    r"mla_grid cta (\d+) sm (\d+): (-?\d+) (-?\d+) (-?\d+) items (\d+):((?: -?\d+)+)")
MERGE = re.compile(r"mla_grid merge done: (-?\d+)")
MERGE_CTA = re.compile(r"mla_grid merge cta (\d+) sm (\d+): (-?\d+) (-?\d+) (-?\d+)")


def stamps(m):
    """SM, entry, waited and exit of a CTA line's match (groups 2-5; None
    where not stamped)."""
    entry, waited, leave = (int(m.group(k)) for k in (3, 4, 5))
    return {"sm": int(m.group(2)), "entry": entry if entry >= 0 else None,
            "waited": waited if waited >= 0 else None, "exit": leave if leave >= 0 else None}


def parse(lines, merge_ctas=None):
    """({cta: row}, merge_done or None); a row is a dict of its SM, entry,
    waited, exit (None where not stamped) and items, [(start, end, tiles)]
    of the items the CTA stamped. The merge kernel's CTAs, where printed,
    go into `merge_ctas` as {cta: row} with the same SM, entry, waited and
    exit (no items)."""
    ctas, merge = {}, None
    for line in lines:
        m = MERGE_CTA.search(line)
        if m:
            if merge_ctas is not None:
                merge_ctas[int(m.group(1))] = stamps(m)
            continue
        m = CTA.search(line)
        if m:
            values = [int(v) for v in m.group(7).split()]
            items = []
            for i in range(int(m.group(6))):
                start, end, tiles = values[3 * i:3 * i + 3]
                if start >= 0:
                    items.append((start, end if end >= 0 else None, tiles))
            ctas[int(m.group(1))] = dict(stamps(m), items=items)
            continue
        m = MERGE.search(line)
        if m:
            merge = int(m.group(1))
    return ctas, merge


def per_cta(row):
    """Tiles, time inside items and between them, and ns per tile of one CTA
    (None where it ran no complete item)."""
    done = [(s, e, t) for s, e, t in row["items"] if e is not None]
    tiles = sum(t for _, _, t in done)
    busy = sum(e - s for s, e, _ in done)
    gaps = sum(b[0] - a[1] for a, b in zip(done, done[1:]))
    return {
        "tiles": tiles,
        "busy": busy if done else None,
        "gaps": gaps if len(done) > 1 else None,
        "ns_per_tile": busy / tiles if tiles else None,
        "first_start": done[0][0] if done else None,
    }


def quantiles(values):
    """(min, median, max) of the values that are not None, or None."""
    v = [x for x in values if x is not None]
    if not v:
        return None
    return min(v), statistics.median(v), max(v)


def summary(ctas, merge):
    """Rows (what, min, median, max) in µs (tiles as counts), then the
    slowest CTAs [(cta, SM, exit µs, tiles, ns per tile)] and the merge's
    time after the last CTA left (µs, or None)."""
    stats = {c: per_cta(r) for c, r in ctas.items()}
    working = [c for c in ctas if stats[c]["busy"] is not None]
    us = lambda q: None if q is None else tuple(x / 1000 for x in q)
    rows = [
        ("entry", us(quantiles(ctas[c]["entry"] for c in ctas))),
        ("past the wait for the previous kernel", us(quantiles(ctas[c]["waited"] for c in ctas))),
        ("first work item starts", us(quantiles(stats[c]["first_start"] for c in working))),
        ("exit", us(quantiles(ctas[c]["exit"] for c in ctas))),
        ("inside work items", us(quantiles(stats[c]["busy"] for c in working))),
        ("between work items", us(quantiles(stats[c]["gaps"] for c in working))),
        ("ns per tile inside items", quantiles(stats[c]["ns_per_tile"] for c in working)),
        ("tiles", quantiles(stats[c]["tiles"] for c in working)),
    ]
    slowest = sorted((c for c in working if ctas[c]["exit"] is not None),
                     key=lambda c: ctas[c]["exit"], reverse=True)[:5]
    slow = [(c, ctas[c]["sm"], ctas[c]["exit"] / 1000, stats[c]["tiles"],
             stats[c]["ns_per_tile"]) for c in slowest]
    exits = [ctas[c]["exit"] for c in ctas if ctas[c]["exit"] is not None]
    after = (merge - max(exits)) / 1000 if merge is not None and exits else None
    return rows, slow, after


def merge_summary(ctas, merge_ctas):
    """Rows (what, min, median, max) in µs since the decode's first entry
    for the merge kernel's CTAs, and (first past its wait, last exit) in µs
    after the decode's last CTA left (None where not stamped)."""
    us = lambda q: None if q is None else tuple(x / 1000 for x in q)
    rows = [
        ("merge: entry", us(quantiles(r["entry"] for r in merge_ctas.values()))),
        ("merge: past its wait for the decode",
         us(quantiles(r["waited"] for r in merge_ctas.values()))),
        ("merge: exit", us(quantiles(r["exit"] for r in merge_ctas.values()))),
    ]
    exits = [r["exit"] for r in ctas.values() if r["exit"] is not None]
    waited = [r["waited"] for r in merge_ctas.values() if r["waited"] is not None]
    merged = [r["exit"] for r in merge_ctas.values() if r["exit"] is not None]
    last = max(exits) if exits else None
    after = lambda xs, pick: (pick(xs) - last) / 1000 if xs and last is not None else None
    return rows, (after(waited, min), after(merged, max))


def print_quantiles(title, rows):
    """A table of (name, (min, median, max) or None) rows, "-" for None."""
    print(f"| {title} | min | median | max |")
    print("|---|---:|---:|---:|")
    for name, q in rows:
        cells = ["-"] * 3 if q is None else [f"{x:.2f}" for x in q]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output", help="the stamped run's output, or - for stdin")
    args = ap.parse_args(argv)
    merge_ctas = {}
    if args.output == "-":
        ctas, merge = parse(sys.stdin, merge_ctas)
    else:
        with open(args.output, encoding="utf-8") as text:
            ctas, merge = parse(text, merge_ctas)
    if not ctas:
        print("no mla_grid lines: was the kernel built with MLAJIT_TIMELINE=N, and did the "
              "case run N calls?", file=sys.stderr)
        return 1
    rows, slow, after = summary(ctas, merge)
    print(f"{len(ctas)} CTAs stamped")
    print_quantiles("what (µs since the first entry; ns per tile; tiles)", rows)
    print()
    print("| slowest CTAs | SM | exit µs | tiles | ns per tile |")
    print("|---|---:|---:|---:|---:|")
    for c, sm, leave, tiles, per_tile in slow:
        print(f"| {c} | {sm} | {leave:.2f} | {tiles} | "
              f"{'-' if per_tile is None else round(per_tile)} |")
    if after is not None:
        print()
        print(f"merge kernel's CTA 0 done {after:.2f} µs after the last CTA left")
    if merge_ctas:
        merge_rows, (first_waited, last_done) = merge_summary(ctas, merge_ctas)
        print()
        print(f"{len(merge_ctas)} merge CTAs stamped")
        print_quantiles("what (µs since the decode's first entry)", merge_rows)
        if first_waited is not None and last_done is not None:
            print()
            print(f"after the decode's last CTA left: the merge's first wait returned in "
                  f"{first_waited:.2f} µs, its last CTA was done in {last_done:.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
