#!/usr/bin/env python3
"""The static instruction mix of a compiled kernel, per warp role and per
loop, without a GPU: what each role's loop issues per trip.

    jitcache --cache-dir /tmp/c warm --manifest one_spec.jsonl
    tools/bench/sass_mix.py /tmp/c/v1/ab/abcd....bin        # a cache entry
    tools/bench/sass_mix.py kernel.cubin --function mla_combine_kernel

The input is a cache entry (src/cache/entry_format.h: the payload follows the
56-byte header, the metadata block and its 8-byte hash) or an ELF cubin;
cuobjdump (--cuobjdump, else $CUOBJDUMP, else on the PATH, else
$CUDA_HOME/bin, else /usr/local/cuda/bin; the `nvidia-cuda-cuobjdump`
wheel ships one) prints its SASS. The function is cut into the roles that
tools/bench/ncu_source.py uses (one per USETMAXREG), and within each role
each innermost loop (a backward branch and its target) that issues
tensor-core instructions is listed with its opcode counts (RESULTS.md,
"what comes next" item 5, counts the warp-specialised accumulators'
k-step: 4 HGMMA, 16 F2FP, 8 PRMT, 4 LDS, 8 R2UR). Counts are static: a
loop's body once, an unrolled loop as many times as it is unrolled.
Standard library only.
"""
import argparse
import collections
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_source  # noqa: E402  (the role cutter and opcode reader)

ENTRY_MAGIC = b"MLAJITCE"
ENTRY_HEADER_BYTES = 56
FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;")
TENSOR_OPS = ("HGMMA", "QGMMA", "IGMMA", "BGMMA", "HMMA", "IMMA")


def payload(data):
    """The kernel binary in `data`: a cache entry's payload, or `data` itself
    when it is an ELF file. ValueError for anything else."""
    if data.startswith(b"\x7fELF"):
        return data
    if not data.startswith(ENTRY_MAGIC):
        raise ValueError("neither a cache entry (MLAJITCE) nor an ELF file")
    if len(data) < ENTRY_HEADER_BYTES:
        raise ValueError(f"cache entry of {len(data)} bytes: shorter than its header")
    metadata, size = struct.unpack_from("<QQ", data, 32)
    start = ENTRY_HEADER_BYTES + metadata + 8
    if start + size != len(data):
        raise ValueError(f"cache entry of {len(data)} bytes: its header names "
                         f"{start + size} (metadata {metadata}, payload {size})")
    binary = data[start:]
    if not binary.startswith(b"\x7fELF"):
        raise ValueError("the cache entry's payload is not an ELF file (a HIP code object "
                         "bundle or a PTX entry has no SASS to read)")
    return binary


def find_cuobjdump(explicit=None):
    """The cuobjdump to run, or None."""
    for candidate in (explicit, os.environ.get("CUOBJDUMP")):
        if candidate:
            return candidate
    found = shutil.which("cuobjdump")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "cuobjdump"), os.X_OK):
            return os.path.join(home, "bin", "cuobjdump")
    return None


def read_sass(lines):
    """{function: [{address, absolute, source}]} from cuobjdump -sass output."""
    functions = collections.OrderedDict()
    rows = None
    for line in lines:
        m = FUNCTION.match(line)
        if m:
            rows = functions.setdefault(m.group(1), [])
            continue
        m = INSTRUCTION.match(line)
        if m and rows is not None:
            address = int(m.group(1), 16)
            rows.append({"address": address, "absolute": address, "source": m.group(2).strip()})
    return functions


def loops(rows):
    """(first row, last row) of each loop: a branch to an address at or
    before its own, in the order of their first rows."""
    by_address = {row["address"]: i for i, row in enumerate(rows)}
    found = []
    for i, row in enumerate(rows):
        if ncu_source.opcode(row["source"]) != "BRA":
            continue
        m = ncu_source.BRANCH_TARGET.search(row["source"])
        if not m:
            continue
        target = by_address.get(int(m.group(1), 16))
        if target is not None and target <= i:
            found.append((target, i))
    return sorted(found)


def mix(rows):
    return collections.Counter(ncu_source.opcode(r["source"]) for r in rows)


def tensor_loops(rows, names):
    """The innermost loops that issue tensor-core instructions, each inside
    one region: (first row, last row). (A branch back from the out-of-line
    code after the roles, such as an mbarrier wait's retry, spans regions
    and is no loop of the role's own.)"""
    def tensor(first, last):
        counts = mix(rows[first:last + 1])
        return any(counts[op] for op in TENSOR_OPS)
    own = [(f, l) for f, l in loops(rows)
           if len(set(names[f:l + 1])) == 1 and tensor(f, l)]
    return [(f, l) for f, l in own
            if not any((f2, l2) != (f, l) and f <= f2 and l2 <= l for f2, l2 in own)]


def report(name, rows, top=12, out=None):
    """Prints the function's roles and each role's innermost tensor-core loops."""
    out = out or sys.stdout
    names = ncu_source.regions([dict(r) for r in rows])
    inner = tensor_loops(rows, names)
    print(f"{name}: {len(rows)} instructions", file=out)
    for region in dict.fromkeys(names):
        own = [r for r, n in zip(rows, names) if n == region]
        counts = mix(own)
        ops = ", ".join(f"{k} {v}" for k, v in counts.most_common(top))
        print(f"\n{region}: {len(own)} instructions; {ops}", file=out)
        for first, last in inner:
            if names[first] != region:
                continue
            body = rows[first:last + 1]
            counts = mix(body)
            ops = ", ".join(f"{k} {v}" for k, v in counts.most_common(top))
            print(f"  loop {body[0]['address']:#06x}..{body[-1]['address']:#06x}: "
                  f"{len(body)} instructions; {ops}", file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", help="a cache entry (.bin) or an ELF cubin")
    ap.add_argument("--function", default="mla_decode_kernel",
                    help="the kernel to read (default: mla_decode_kernel)")
    ap.add_argument("--cuobjdump", help="the cuobjdump to run")
    ap.add_argument("--top", type=int, default=12, help="opcodes listed per line")
    args = ap.parse_args(argv)
    try:
        with open(args.binary, "rb") as f:
            binary = payload(f.read())
    except (OSError, ValueError) as e:
        print(f"sass_mix.py: {args.binary}: {e}", file=sys.stderr)
        return 1
    tool = find_cuobjdump(args.cuobjdump)
    if tool is None:
        print("sass_mix.py: no cuobjdump (give --cuobjdump, set $CUOBJDUMP, or install the "
              "nvidia-cuda-cuobjdump wheel)", file=sys.stderr)
        return 1
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(binary)
        f.flush()
        run = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"sass_mix.py: {tool} failed: {run.stderr.strip()}", file=sys.stderr)
        return 1
    functions = read_sass(run.stdout.splitlines())
    if args.function not in functions:
        print(f"sass_mix.py: no function '{args.function}' (there are: "
              f"{', '.join(functions) or 'none'})", file=sys.stderr)
        return 1
    try:
        report(args.function, functions[args.function], args.top)
    except BrokenPipeError:  # a reader such as `head` stopped early
        sys.stdout = open(os.devnull, "w")
    return 0


if __name__ == "__main__":
    sys.exit(main())
