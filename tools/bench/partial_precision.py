#!/usr/bin/env python3
"""What storing split partials in 16 bits costs in accuracy, on the random
normal inputs of DESIGN.md's accuracy bar: the bf16 decode path as the
kernels compute it (bf16 Q and KV, P rounded to bf16 for P V, each piece's
rows normalised by their own sums, merged by LSE, the output rounded to
bf16), with the partial rows kept in fp32, bf16 or f16. Output:
||out - ref|| / ||ref|| against a float64 reference, per shape.

    pip install numpy ml_dtypes && python3 tools/bench/partial_precision.py

The bar for bf16 paths is 5e-3. f16 partials would cost nothing here but
overflow above 65504, which bf16 values can reach; bf16 partials keep
fp32's range and add one rounding of the size P's already has.
"""
import argparse

import ml_dtypes
import numpy as np


def to_bf16(x):
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def to_f16(x):
    return x.astype(np.float16).astype(np.float32)


def rel_err(out, ref):
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


def decode(q, k, splits, store):
    """The split decode of one row tile; `store` rounds each piece's rows."""
    v = k[:, :512]  # MLA: V is the first 512 dims of the latent K
    s = (q @ k.T) / np.sqrt(576)
    kv = k.shape[0]
    pieces = []
    for i in range(splits):
        part = slice(i * kv // splits, (i + 1) * kv // splits)
        si = s[:, part]
        mi = si.max(1, keepdims=True)
        pi = np.exp(si - mi)
        li = pi.sum(1, keepdims=True)
        pieces.append((store((to_bf16(pi) @ v[part]) / li), mi + np.log(li)))
    top = np.max([lse for _, lse in pieces], axis=0)
    num = sum(np.exp(lse - top) * o for o, lse in pieces)
    den = sum(np.exp(lse - top) for _, lse in pieces)
    return to_bf16((num / den).astype(np.float32))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print("rows  kv_len  pieces   fp32      bf16      f16     (the bench case it stands for)")
    for rows, kv, splits, case in [(64, 8192, 16, "(4,4,8192,32)"), (64, 1024, 4, "(32,4,1024,16)"),
                                   (16, 1024, 8, "(4,1,1024,32)"), (16, 8192, 4, "(32,1,8192,16)")]:
        q = to_bf16(rng.standard_normal((rows, 576)).astype(np.float32)).astype(np.float64)
        k = to_bf16(rng.standard_normal((kv, 576)).astype(np.float32)).astype(np.float64)
        v = k[:, :512]
        s = (q @ k.T) / np.sqrt(576)
        p = np.exp(s - s.max(1, keepdims=True))
        ref = (p @ v) / p.sum(1, keepdims=True)
        errs = [rel_err(decode(q, k, splits, store), ref)
                for store in (lambda x: x.astype(np.float32), to_bf16, to_f16)]
        print(f"{rows:4d}  {kv:6d}  {splits:6d}  " + "  ".join(f"{e:.2e}" for e in errs) + f"  {case}")


if __name__ == "__main__":
    main()
