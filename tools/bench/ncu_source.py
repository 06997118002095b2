#!/usr/bin/env python3
"""Where one profiled launch issues and stalls, per warp role, from the
per-instruction table that Nsight Compute's SourceCounters section
collects:

    ncu --section SourceCounters ... -o run mlajit_bench --case ...
    ncu --import run.ncu-rep --page source --csv --print-source sass > run.csv
    tools/bench/ncu_source.py run.csv

The kernels' warpgroups run disjoint stretches of one function: a
warp-specialised CTA sets each role's registers with setmaxnreg
(USETMAXREG in the SASS) and ends each role with an EXIT. So the table is
cut into regions: the prologue up to the first USETMAXREG, then one region
from each USETMAXREG to the first unpredicated EXIT after it. The code after
the last region (the out-of-line retry loops of mbarrier waits) counts for
the region its closing branch returns to. A kernel without USETMAXREG is
one region; `--cut ADDR` (hex offsets from the function's start) cuts
anywhere else.

Per region: warp instructions executed and stall samples (totals and
shares), the leading stall reasons, the samples at mbarrier waits
(SYNCS.PHASECHK and the branch that retries it: time spent waiting for
another role), the commonest opcodes, and the sites with most samples.
It answers which role bounds a launch: RESULTS.md v64 found MXFP4's
product warpgroup waiting for converted tiles 5 % of its time, so faster
converters could not help. Standard library only.
"""
import argparse
import collections
import csv
import gzip
import re
import sys

ADDRESS = "Address"
SOURCE = "Source"
SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
BRANCH_TARGET = re.compile(r"\bBRA\s+(?:`\()?(0x[0-9a-fA-F]+)")
PHASECHK = re.compile(r"SYNCS\.PHASECHK\S*\s+(P\d)\s*,")


def number(text):
    """A table cell as a float ('1,584' -> 1584.0; '-' and '' -> 0)."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(source):
    """The instruction's opcode without its predicate or modifiers."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def read_table(lines):
    """[{address, source, samples, executed, stalls: {reason: samples}}] from
    the CSV's lines: a 'Kernel Name' line, then the header, then one row per
    instruction. Addresses become offsets from the first instruction."""
    rows = list(csv.reader(lines))
    start = next((i for i, r in enumerate(rows) if r and r[0] == ADDRESS), None)
    if start is None:
        raise ValueError(f"no header row starting with '{ADDRESS}'")
    header = rows[start]
    col = {name: i for i, name in enumerate(header)}
    for name in (ADDRESS, SOURCE, SAMPLES, EXECUTED):
        if name not in col:
            raise ValueError(f"no column '{name}'")
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    table = []
    for r in rows[start + 1:]:
        if len(r) < len(header) or not r[col[ADDRESS]].startswith("0x"):
            continue
        table.append({"address": int(r[col[ADDRESS]], 16), "source": r[col[SOURCE]].strip(),
                      "samples": number(r[col[SAMPLES]]), "executed": number(r[col[EXECUTED]]),
                      "stalls": {h[len("stall_"):]: number(r[col[h]]) for h in reasons}})
    if not table:
        raise ValueError("no instruction rows")
    base = table[0]["address"]
    for row in table:
        row["absolute"] = row["address"]  # what branches name
        row["address"] -= base
    return table


def regions(table, cuts=()):
    """Each row's region name: 'prologue', 'role 1', 'role 2', ... as above,
    or 'part 0', 'part 1', ... at the given cut offsets."""
    names = [None] * len(table)
    if cuts:
        cuts = sorted(cuts)
        for i, row in enumerate(table):
            names[i] = f"part {sum(1 for c in cuts if row['address'] >= c)}"
        return names
    roles = []  # (first row, last row) of each role
    i = 0
    while i < len(table):
        if opcode(table[i]["source"]) == "USETMAXREG":
            end = next((j for j in range(i, len(table))
                        if table[j]["source"].split()[:1] == ["EXIT"]), len(table) - 1)
            roles.append((i, end))
            i = end + 1
        else:
            i += 1
    if not roles:
        return ["whole"] * len(table)
    for n, (first, last) in enumerate(roles):
        for j in range(first, last + 1):
            names[j] = f"role {n + 1}"
    for j in range(roles[0][0]):
        names[j] = "prologue"
    # Between and after the roles: each block of unnamed rows, up to its
    # first unpredicated branch, belongs to the role that branch returns to.
    by_absolute = {row["absolute"]: k for k, row in enumerate(table)}
    j = 0
    while j < len(table):
        if names[j] is not None:
            j += 1
            continue
        k, owner = j, "other"
        while k < len(table) and names[k] is None:
            src = table[k]["source"]
            m = BRANCH_TARGET.search(src)
            if m and not src.startswith("@"):
                t = by_absolute.get(int(m.group(1), 16))
                if t is not None and names[t] is not None:
                    owner = names[t]
                k += 1
                break
            k += 1
        for b in range(j, k):
            names[b] = owner
        j = k
    return names


def summarize(table, names, top=5):
    """{region: figures}, in the order regions first appear."""
    out = collections.OrderedDict()
    for row, name in zip(table, names):
        r = out.setdefault(name, {"executed": 0.0, "samples": 0.0, "waits": 0.0,
                                  "stalls": collections.Counter(), "ops": collections.Counter(),
                                  "sites": []})
        r["executed"] += row["executed"]
        r["samples"] += row["samples"]
        r["stalls"].update(row["stalls"])
        r["ops"][opcode(row["source"])] += row["executed"]
        r["sites"].append(row)
    for name, r in out.items():
        rows = r["sites"]
        # A wait is the PHASECHK and the branch that retries it: the first
        # one, a few instructions on, taken when its predicate is false.
        for k, row in enumerate(rows):
            m = PHASECHK.search(row["source"])
            if not m:
                continue
            r["waits"] += row["samples"]
            retry = "@!" + m.group(1) + " "
            for later in rows[k + 1:k + 9]:
                if later["source"].startswith(retry) and opcode(later["source"]) == "BRA":
                    r["waits"] += later["samples"]
                    break
        r["sites"] = sorted(rows, key=lambda x: -x["samples"])[:top]
    return out


def report(table, names, out=None):
    """Prints the per-region table, then each region's stalls, opcodes and sites."""
    out = out or sys.stdout
    summary = summarize(table, names)
    executed = sum(r["executed"] for r in summary.values()) or 1.0
    samples = sum(r["samples"] for r in summary.values()) or 1.0
    print(f"{len(table)} instructions, {executed / 1e6:.2f} M warp instructions executed, "
          f"{samples:.0f} stall samples", file=out)
    print("| region | executed (M) | executed | samples | waiting at mbarriers (of its samples) |"
          "\n|---|---:|---:|---:|---:|", file=out)
    for name, r in summary.items():
        own = r["samples"] or 1.0
        print(f"| {name} | {r['executed'] / 1e6:.2f} | {100 * r['executed'] / executed:.1f} % | "
              f"{100 * r['samples'] / samples:.1f} % | {100 * r['waits'] / own:.1f} % |", file=out)
    for name, r in summary.items():
        own = r["samples"] or 1.0
        print(f"\n{name}:", file=out)
        stalls = ", ".join(f"{k} {100 * v / own:.0f} %" for k, v in r["stalls"].most_common(6) if v)
        print(f"  stalls: {stalls or '-'}", file=out)
        ops = ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in r["ops"].most_common(10) if v)
        print(f"  opcodes (executed): {ops or '-'}", file=out)
        for row in r["sites"]:
            if row["samples"]:
                print(f"  {row['address']:#07x} {row['samples']:6.0f} samples  {row['source'][:70]}",
                      file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass output (.gz read too)")
    ap.add_argument("--cut", action="append", default=[],
                    help="cut the function at this hex offset instead of at its roles (repeatable)")
    args = ap.parse_args(argv)
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt", newline="") as f:
        table = read_table(f)
    report(table, regions(table, [int(c, 16) for c in args.cut]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
