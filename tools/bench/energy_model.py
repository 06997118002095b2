#!/usr/bin/env python3
"""The energy accounting of RESULTS.md v83, from one `mlajit_bench --power` JSON.

At the board's power limit a call is as fast as the energy it takes allows.
This prices each case's work by what the bench's own power windows say the
same work costs: every product FLOP what cublasLt's adds above SMs that only
wait (its ceiling's watts less the waiting watts, over its rate), every byte
what the streaming read's adds, and the waiting watts for as long as the call
runs. At the limit the call would then take

    F8 / R8 + F16 / R16 + (bytes / R_read) * (P_read - P_wait) / (P_cap - P_wait)

(the products at the ceilings' rates plus the bytes' share of the watts the
limit leaves above waiting), P_cap being the e4m3 product's watts. It is a
model, not a bound: the waiting watts are taken at the full clock and energy
a product depends on the data, so calls beat it by up to 12 % (v83).

Products per case, from the case's name: S over 576 dims and P V over 512
(the bench's FLOP count splits 576 : 512); P V in bf16 always; S one e4m3
product with a8, two with bf16 Q (its two e4m3 terms), one bf16 product with
bf16 KV.

    tools/bench/energy_model.py s1.json [--target-tflops 750]

Standard library only.
"""
import argparse
import json
import sys

S_SHARE = 576 / 1088  # S's share of a case's FLOPs (576 of 1088 per token pair)


def product_flops(name, flops):
    """(e4m3 FLOPs, bf16 FLOPs) of a case named `name` doing `flops` in all."""
    s, pv = flops * S_SHARE, flops * (1 - S_SHARE)
    if " bf16" in name:  # bf16 KV: both products in bf16
        return 0.0, s + pv
    if " a8" in name:  # Q in e4m3: S once
        return s, pv
    return 2 * s, pv  # bf16 Q as two e4m3 terms


def model(doc, target_tflops=0.0):
    """One dict per case that has a power window: the model's terms (µs), the
    case's energy (mJ) and its split, and the energy a call may take at the
    case's watts to reach `target_tflops` (0: not asked)."""
    power = doc.get("power") or {}
    missing = [k for k in ("waiting", "read", "fp8", "bf16") if k not in power]
    if missing:
        raise ValueError("the JSON has no power window for " + ", ".join(missing) +
                         " (run mlajit_bench --power with measured ceilings)")
    ceil = doc["ceilings"]
    r_read = ceil["read_bytes_per_s"]["value"]
    r8, r16 = ceil["fp8_flops"]["value"], ceil["bf16_flops"]["value"]
    p_wait = power["waiting"]["watts"]
    p_read, p8, p16 = power["read"]["watts"], power["fp8"]["watts"], power["bf16"]["watts"]
    share = (p_read - p_wait) / (p8 - p_wait)
    rows = []
    for c in doc.get("cases", []):
        w = c.get("power")
        if not w:
            continue
        f8, f16 = product_flops(c["case"], c["flops"])
        products_us = (f8 / r8 + f16 / r16) * 1e6
        bytes_us = c["bytes"] / r_read * share * 1e6
        mj = w["joules_per_call"] * 1e3
        window_s = w["us_per_call"] * 1e-6
        row = {
            "case": c["case"], "watts": w["watts"], "mhz": w.get("sm_mhz_median", 0), "mj": mj,
            "products_us": products_us, "bytes_us": bytes_us,
            "model_us": products_us + bytes_us, "median_us": c["median_us"],
            # the energy split by the same prices, as shares of the measured energy
            "waiting_share": p_wait * window_s * 1e3 / mj,
            "bytes_share": c["bytes"] * (p_read - p_wait) / r_read * 1e3 / mj,
            "products_share": (f8 * (p8 - p_wait) / r8 + f16 * (p16 - p_wait) / r16) * 1e3 / mj,
        }
        if target_tflops:
            target_us = c["flops"] / (target_tflops * 1e12) * 1e6
            row["target_us"] = target_us
            row["target_mj"] = w["watts"] * target_us * 1e-3
        rows.append(row)
    return share, rows


def table(share, rows):
    lines = [f"bytes' share of the watts above waiting: {share:.4f}", "",
             "| case | W | MHz | mJ a call | products µs | bytes µs | model µs | median µs "
             "| model / median | energy: waiting / bytes / products |"
             + (" target µs | mJ allowed (change) |" if rows and "target_us" in rows[0] else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
             + ("---:|---|" if rows and "target_us" in rows[0] else "")]
    for r in rows:
        line = (f"| {r['case']} | {r['watts']:.0f} | {r['mhz']} | {r['mj']:.2f} "
                f"| {r['products_us']:.1f} | {r['bytes_us']:.1f} | {r['model_us']:.1f} "
                f"| {r['median_us']:.2f} | {r['model_us'] / r['median_us']:.2f} "
                f"| {100 * r['waiting_share']:.0f} / {100 * r['bytes_share']:.0f} / "
                f"{100 * r['products_share']:.0f} % |")
        if "target_us" in r:
            line += (f" {r['target_us']:.1f} | {r['target_mj']:.1f} "
                     f"({100 * (r['target_mj'] / r['mj'] - 1):+.1f} %) |")
        lines.append(line)
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", help="mlajit_bench --power --json output")
    ap.add_argument("--target-tflops", type=float, default=0,
                    help="also the energy a call may take to reach this rate (0: none)")
    args = ap.parse_args(argv)
    with open(args.json) as f:
        doc = json.load(f)
    try:
        share, rows = model(doc, args.target_tflops)
    except ValueError as e:
        print(f"energy_model.py: {args.json}: {e}", file=sys.stderr)
        return 2
    print(table(share, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
