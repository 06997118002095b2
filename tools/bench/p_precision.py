#!/usr/bin/env python3
"""How much accuracy P V loses when P (the softmax numerators) is rounded
before the second product: to bf16 (DESIGN.md's contract for bf16 paths), or
to fp8 e4m3 (what an fp8 tensor-core P V would need), on the random normal
inputs of the accuracy bar. Output: ||out - ref|| / ||ref|| per KV length.

    pip install numpy ml_dtypes && python3 tools/bench/p_precision.py

Only P is rounded (Q, K and V exact, sums in float32), so the figures are
what P's rounding alone costs; the bar for fp8 paths is 1e-2 in total.
"""
import argparse

import ml_dtypes
import numpy as np


def rel_err(out, ref):
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kv", type=int, nargs="+", default=[1024, 8192])
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print("kv_len  P in bf16  P in e4m3 (max scaled to 448)")
    for kv in args.kv:
        q = rng.standard_normal((args.rows, 576)).astype(np.float32)
        k = rng.standard_normal((kv, 576)).astype(np.float32)
        v = k[:, :512]  # MLA: V is the first 512 dims of the latent K
        s = (q @ k.T) / np.sqrt(576)
        p = np.exp(s - s.max(1, keepdims=True))
        denom = p.sum(1, keepdims=True)
        ref = (p @ v) / denom
        p_bf16 = p.astype(ml_dtypes.bfloat16).astype(np.float32)
        # e4m3 with each row's maximum (1) scaled to the format's largest value,
        # which keeps the most small values normal.
        p_e4m3 = (p * 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) / 448
        print(f"{kv:6d}  {rel_err((p_bf16 @ v) / denom, ref):9.2e}  "
              f"{rel_err((p_e4m3 @ v) / denom, ref):9.2e}")


if __name__ == "__main__":
    main()
