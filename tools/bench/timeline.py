#!/usr/bin/env python3
"""Per-step medians of a timeline stamped by the warp-specialised 64-row path,
or (--path seesaw) by the bf16 64-row seesaw per pair of tiles, or
(--path two-stage) by the 64-row path's two-stage schedule per tile, or
(--path swap-ab) the steps of each tile and work item of the swap-AB path.

Run a case with the stamps compiled in (its merge kernel prints them; the
runtime runs it on every call of such a build), then read its output:

    MLAJIT_TIMELINE=151 MLAJIT_CACHE_DIR=/tmp/timeline-cache \\
        mlajit_bench --case 32,4,8192,32 > run.txt
    tools/bench/timeline.py run.txt

For a swap-AB case (q_len 1 fp8, e.g. --case 4,1,1024,32), add
--path swap-ab: its CTAs run few tiles, so every tile is listed. For the
seesaw (bf16, items of 16 tiles or more: --case 32,4,8192,32,bf16), add
--path seesaw. For bf16 64-row items shorter than that (split pieces, e.g.
--case 32,4,1024,16,bf16), --path two-stage (tiles are counted over the
CTA's items, so --skip 0 lists a CTA of one short item whole).
kernel_templates/mla_timeline.cuh says what is stamped; the stamps cost a
few per cent, so time the case without them. Cycles are SM clocks (the
bench prints the case's clock). Standard library only.
"""
import argparse
import re
import statistics
import sys

LINE = re.compile(r"mla_timeline tile (\d+) role (\d+):((?: -?\d+)+)")

# (name, role and event it starts at, role and event it ends at, tiles later
# the end is), roles and events as numbered in mla_timeline.cuh.
STEPS = [
    ("tile period (scorer, S done to S done)", 0, 2, 0, 2, 1),
    ("scorer: S issued", 0, 0, 0, 1, 0),
    ("scorer: S issued until done", 0, 0, 0, 2, 0),
    ("scorer: wait for the P buffer", 0, 2, 0, 3, 0),
    ("scorer: softmax, P written", 0, 3, 0, 4, 0),
    ("scorer: P out until the next tile's wait returns", 0, 4, 0, 0, 1),
    ("accumulators: wait for P", 1, 0, 1, 1, 0),
    ("accumulators: P seen until the last k-step issued", 1, 1, 1, 3, 0),
    ("accumulators: stage handed over", 1, 3, 1, 4, 0),
    ("accumulators: last group drained", 1, 4, 1, 5, 0),
    ("P out until the accumulators see it", 0, 4, 1, 1, 0),
]


def parse(lines):
    """{(tile, role): [cycles or None per event]} from the kernel's lines."""
    stamps = {}
    for line in lines:
        m = LINE.search(line)
        if m:
            values = [int(v) for v in m.group(3).split()]
            stamps[(int(m.group(1)), int(m.group(2)))] = [None if v < 0 else v for v in values]
    return stamps


# The seesaw's steps per pair of tiles (mla_timeline.cuh's Seesaw events),
# as its first warps see them: role 0 is warp 0 of warpgroup 0 (which scores
# tile A), role 4 warp 4, the first of warpgroup 1 (tile B).
SEESAW_STEPS = [
    ("pair period (warpgroup 0, tile A's last blocks landed to the next's)", 0, 0, 0, 0, 1),
    ("wg0: S_A over the last blocks", 0, 0, 0, 1, 0),
    ("wg0: maxima out", 0, 1, 0, 2, 0),
    ("wg0: softmax, P_A out", 0, 2, 0, 3, 0),
    ("wg0: P_A V_A[L] done, A + 2 copied", 0, 3, 0, 4, 0),
    ("wg0: wait for wg1's maxima", 0, 4, 0, 5, 0),
    ("wg0: rescale, wait for P_B", 0, 5, 0, 6, 0),
    ("wg0: P_B V_B[L] done, B + 2 copied", 0, 6, 0, 7, 0),
    ("wg0: S over the first blocks, wait for the next tile A's last", 0, 7, 0, 0, 1),
    ("wg1: tile B's last blocks landed after wg0's tile A's", 0, 0, 4, 0, 0),
    ("wg1: S_B over the last blocks", 4, 0, 4, 1, 0),
    ("wg1: wait for wg0's maxima", 4, 1, 4, 2, 0),
    ("wg1: maxima out", 4, 2, 4, 3, 0),
    ("wg1: wait for P_A", 4, 3, 4, 4, 0),
    ("wg1: P_A V_A[R] issued, softmax, P_B out", 4, 4, 4, 5, 0),
    ("wg1: P_A V_A[R] done, A + 2 copied", 4, 5, 4, 6, 0),
    ("wg1: P_B V_B[R] done, B + 2 copied", 4, 6, 4, 7, 0),
    ("wg1: S over the first blocks, wait for the next tile B's last", 4, 7, 4, 0, 1),
]


# The two-stage schedule's steps per tile (mla_timeline.cuh's TwoStage
# events): role 0 is warpgroup 0 (S, the softmax, half of P V), role 4
# warpgroup 1 (the other half of P V).
TWO_STAGE_STEPS = [
    ("tile period (warpgroup 0, barrier (1) to the next's)", 0, 1, 0, 1, 1),
    ("wg0: copies landed until barrier (1)", 0, 0, 0, 1, 0),
    ("wg0: S", 0, 1, 0, 2, 0),
    ("wg0: softmax, P and alpha out", 0, 2, 0, 3, 0),
    ("wg0: P out until barrier (2)", 0, 3, 0, 4, 0),
    ("wg0: P V issued", 0, 4, 0, 5, 0),
    ("wg0: P V drained", 0, 5, 0, 6, 0),
    ("wg0: P V done until the next tile's copies landed", 0, 6, 0, 0, 1),
    ("wg1: barrier (1) to barrier (2), under S and the softmax", 4, 1, 4, 4, 0),
    ("wg1: P V issued", 4, 4, 4, 5, 0),
    ("wg1: P V drained", 4, 5, 4, 6, 0),
    ("wg1: P V done after warpgroup 0's", 0, 6, 4, 6, 0),
]


def step_medians(stamps, skip=2, steps=None):
    """Median cycles of each step (STEPS unless given) over tiles skip.. (the
    first ones warm up)."""
    tiles = sorted({t for t, _ in stamps})
    out = []
    for name, r0, e0, r1, e1, next_tile in STEPS if steps is None else steps:
        samples = []
        for t in tiles[skip:]:
            a = stamps.get((t, r0), [None] * 8)[e0]
            b = stamps.get((t + next_tile, r1), [None] * 8)[e1]
            if a is not None and b is not None:
                samples.append(b - a)
        out.append((name, statistics.median(samples) if samples else None, len(samples)))
    return out


ACC_EVENTS = ["waiting for P", "P seen", "first group done", "last group issued",
              "stage handed over", "drained"]
ACC_WARPS = 8  # roles 1..8


def warp_offsets(stamps, skip=2, roles=None, events=None):
    """Per event, each role's median lag behind the tile's earliest role at
    that event (cycles), or None where no role stamped it. By default the
    accumulating warps (roles 1..8) and their events."""
    roles = list(range(1, 1 + ACC_WARPS)) if roles is None else roles
    events = ACC_EVENTS if events is None else events
    tiles = sorted({t for t, _ in stamps})[skip:]
    out = []
    for e, name in enumerate(events):
        lags = [[] for _ in roles]
        for t in tiles:
            seen = [stamps.get((t, r), [None] * 8)[e] for r in roles]
            if any(v is None for v in seen):
                continue
            first = min(seen)
            for w, v in enumerate(seen):
                lags[w].append(v - first)
        out.append((name, [statistics.median(x) if x else None for x in lags]))
    return out


# The seesaw's events per warpgroup, for the lags between its four warps.
SEESAW_WG0_EVENTS = ["A's last blocks in", "S_A done", "maxima out", "P_A out", "P_A V_A[L] done",
                     "wg1's maxima in", "P_B in", "pair done"]
SEESAW_WG1_EVENTS = ["B's last blocks in", "S_B done", "wg0's maxima in", "maxima out", "P_A in",
                     "P_B out", "P_A V_A[R] done", "pair done"]


def rows_item_steps(stamps, path="two-stage"):
    """Rows (what, cycles) for every stamped work item of the 64-row path
    (role 8, mla_timeline.cuh's RowsItem events): from its start to its first
    tile's barrier (1) (two-stage) or its first pair's tile A landed
    (seesaw), i.e. Q and the first copies; and from its last tile's or
    pair's P V done (the later warpgroup's) to its stores. An item's tiles
    (pairs) are those whose first event falls between its start and end."""
    first, last = (1, 6) if path == "two-stage" else (0, 7)
    unit = "tile" if path == "two-stage" else "pair"

    def at(tile, role, event):
        v = stamps.get((tile, role), [None] * 8)
        return v[event] if event < len(v) else None

    rows = []
    tiles = sorted(t for t, r in stamps if r == 0)
    for i in sorted(t for t, r in stamps if r == 8):
        start, end = at(i, 8, 0), at(i, 8, 1)
        if start is None or end is None:
            continue
        own = [t for t in tiles if at(t, 0, first) is not None and start <= at(t, 0, first) <= end]
        rows.append((f"item {i}: start to end ({len(own)} {unit}s)", end - start))
        if not own:
            continue
        what = "barrier (1)" if path == "two-stage" else "tile A landed"
        rows.append((f"item {i}: start to its first {unit}'s {what}", at(own[0], 0, first) - start))
        done = [d for d in (at(own[-1], 0, last), at(own[-1], 4, last)) if d is not None]
        if done:
            rows.append((f"item {i}: its last {unit}'s P V done to its stores", end - max(done)))
    return rows


def print_rows_items(stamps, path):
    """rows_item_steps as a table after the per-tile one, when any item was stamped."""
    items = rows_item_steps(stamps, path)
    if items:
        print()
        print("| work item (CTA 0) | cycles |")
        print("|---|---:|")
        for name, cycles in items:
            print(f"| {name} | {cycles} |")


# The swap-AB path's steps: (name, event it starts at, event it ends at), role 0
# per tile, role 1 per work item (mla_timeline.cuh's SwapAb events).
SWAP_AB_TILE_STEPS = [
    ("barrier before S", 0, 1),
    ("S", 1, 2),
    ("softmax, P written", 2, 3),
    ("P V issued", 3, 4),
    ("P V drained", 4, 5),
]
SWAP_AB_ITEM_STEPS = [
    ("Q converted, first tiles issued", 0, 1),
    ("row sums exchanged", 2, 3),
    ("rows normalised and staged", 3, 4),
    ("  of which thread 0's own stores", 3, 6),
    ("rows stored", 4, 5),
]


def swap_ab_steps(stamps):
    """Rows (what, cycles) for every stamped tile and work item, in order, with
    the waits between them: CTA start to the first item, the item's prologue
    to its first tile's copies landing, a tile's end to the next one's copies,
    and the last tile to the item's epilogue (tile t of the CTA is matched to
    items in order, each item's tiles being those stamped before its loop
    ended)."""
    def at(tile, role, event):
        v = stamps.get((tile, role), [None] * 8)
        return v[event] if event < len(v) else None

    rows = []
    items = sorted(t for t, r in stamps if r == 1)
    tiles = sorted(t for t, r in stamps if r == 0)
    start = at(0, 2, 0)
    t = 0
    prev_end = start
    for i in items:
        item_start = at(i, 1, 0)
        if prev_end is not None and item_start is not None:
            rows.append((f"item {i}: since the CTA start or the last item", item_start - prev_end))
        loop_done = at(i, 1, 2)
        before = at(i, 1, 1)
        name, a, b = SWAP_AB_ITEM_STEPS[0]
        if item_start is not None and before is not None:
            rows.append((f"item {i}: {name}", before - item_start))
        while t < len(tiles) and loop_done is not None and (at(tiles[t], 0, 5) or 0) <= loop_done:
            k = tiles[t]
            waited = at(k, 0, 0)
            if before is not None and waited is not None:
                rows.append((f"tile {k}: wait for its copies", waited - before))
            for name, a, b in SWAP_AB_TILE_STEPS:
                x, y = at(k, 0, a), at(k, 0, b)
                if x is not None and y is not None:
                    rows.append((f"tile {k}: {name}", y - x))
            before = at(k, 0, 5)
            t += 1
        if before is not None and loop_done is not None:
            rows.append((f"item {i}: after its last tile", loop_done - before))
        for name, a, b in SWAP_AB_ITEM_STEPS[1:]:
            x, y = at(i, 1, a), at(i, 1, b)
            if x is not None and y is not None:
                rows.append((f"item {i}: {name}", y - x))
        prev_end = at(i, 1, 5)
    if start is not None and prev_end is not None:
        rows.append(("CTA start to the last item's stores", prev_end - start))
    return rows


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output", help="the stamped run's output, or - for stdin")
    ap.add_argument("--skip", type=int, default=2, help="tiles left out at the start (2)")
    ap.add_argument("--path", choices=["ws", "seesaw", "two-stage", "swap-ab"], default="ws",
                    help="the kernel that stamped: the warp-specialised 64-row path (ws), "
                         "the bf16 64-row seesaw (per pair of tiles), the 64-row path's "
                         "two-stage schedule (per tile) or the swap-AB path")
    args = ap.parse_args(argv)
    if args.output == "-":
        stamps = parse(sys.stdin)
    else:
        with open(args.output, encoding="utf-8") as text:
            stamps = parse(text)
    if not stamps:
        print("no mla_timeline lines: was the kernel built with MLAJIT_TIMELINE=N, and did "
              "the case run N calls?", file=sys.stderr)
        return 1
    if args.path == "swap-ab":
        print("| step (CTA 0) | cycles |")
        print("|---|---:|")
        for name, cycles in swap_ab_steps(stamps):
            print(f"| {name} | {cycles} |")
        return 0
    if args.path == "two-stage":
        print("| step | median cycles | tiles |")
        print("|---|---:|---:|")
        for name, median, n in step_medians(stamps, args.skip, TWO_STAGE_STEPS):
            print(f"| {name} | {'-' if median is None else round(median)} | {n} |")
        print_rows_items(stamps, "two-stage")
        return 0
    if args.path == "seesaw":
        print("| step | median cycles | pairs |")
        print("|---|---:|---:|")
        for name, median, n in step_medians(stamps, args.skip, SEESAW_STEPS):
            print(f"| {name} | {'-' if median is None else round(median)} | {n} |")
        print_rows_items(stamps, "seesaw")
        for wg, events in ((0, SEESAW_WG0_EVENTS), (1, SEESAW_WG1_EVENTS)):
            roles = list(range(4 * wg, 4 * wg + 4))
            offsets = [(name, lags) for name, lags in
                       warp_offsets(stamps, args.skip, roles, events)
                       if any(v is not None for v in lags)]
            if offsets:
                print()
                print(f"warpgroup {wg}, median cycles each warp is behind its warpgroup's first:")
                print("| event | " + " | ".join(f"w{r}" for r in roles) + " |")
                print("|---|" + "---:|" * len(roles))
                for name, lags in offsets:
                    cells = ["-" if v is None else str(round(v)) for v in lags]
                    print(f"| {name} | " + " | ".join(cells) + " |")
        return 0
    print("| step | median cycles | tiles |")
    print("|---|---:|---:|")
    for name, median, n in step_medians(stamps, args.skip):
        print(f"| {name} | {'-' if median is None else round(median)} | {n} |")
    offsets = [(name, lags) for name, lags in warp_offsets(stamps, args.skip)
               if any(v is not None for v in lags)]
    if offsets:
        print()
        print("accumulating warps, median cycles behind the tile's first warp at each event:")
        print("| event | " + " | ".join(f"w{w}" for w in range(ACC_WARPS)) + " |")
        print("|---|" + "---:|" * ACC_WARPS)
        for name, lags in offsets:
            cells = ["-" if v is None else str(round(v)) for v in lags]
            print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
