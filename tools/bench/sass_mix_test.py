"""tools/bench/sass_mix.py on made-up cuobjdump output and cache entries whose
every figure is known (run by ctest as bench_sass_mix_py)."""
import contextlib
import io
import os
import struct
import tempfile
import unittest

import sass_mix

ELF = b"\x7fELF" + bytes(60)


def entry(payload, metadata=b"meta"):
    """A cache entry's bytes as src/cache/entry_format.h lays them out (the hashes
    are not checked by the reader, so zeros stand in for them)."""
    header = b"MLAJITCE" + struct.pack("<II", 1, 0) + struct.pack("<QQ", 1, 2)
    header += struct.pack("<QQQ", len(metadata), len(payload), 0)
    assert len(header) == sass_mix.ENTRY_HEADER_BYTES
    return header + metadata + bytes(8) + payload


def line(address, source):
    return f"        /*{address:04x}*/                   {source} ;   /* 0x00000000000000000000 */"


def listing():
    """Two functions; the second is a warp-specialised kernel with a
    prologue, role 1 (a loop of two HGMMAs around a loop without tensor
    instructions, then a loop of one HGMMA nested in a larger one), role 2
    (a QGMMA loop), and out-of-line code whose branch back into role 1
    spans both roles and is no loop."""
    out = ["", "Fatbin elf code:", "", "\t\tFunction : mla_combine_kernel",
           line(0x00, "MOV R1, R2"), line(0x10, "EXIT"), "",
           "\t\tFunction : mla_decode_kernel"]
    code = [
        (0x000, "LDC R1, c[0x0][0x28]"),
        (0x010, "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc0"),
        (0x020, "F2FP.F16.E4M3.UNPACK_B R8, R9"),            # loop A: 0x20..0x60
        (0x030, "R2UR UR14, R22"),
        (0x040, "HGMMA.64x64x16.F32 R24, R168, gdesc[UR12], R24"),
        (0x050, "HGMMA.64x64x16.F32 R56, R172, gdesc[UR16], R56"),
        (0x060, "@P0 BRA 0x20"),                             # loop A
        (0x070, "@!P1 BRA 0x20"),                            # a loop around loop A
        (0x080, "IADD3 R1, R1, 0x1, RZ"),                     # loop B: 0x80..0x90, no tensor
        (0x090, "@P2 BRA 0x80"),
        (0x0a0, "PRMT R1, R2, 0x5140, R3"),                   # outer: 0xa0..0xd0
        (0x0b0, "HGMMA.64x64x16.F32 R24, R168, gdesc[UR12], R24"),  # inner: 0xb0..0xc0
        (0x0c0, "@P3 BRA 0xb0"),
        (0x0d0, "@P4 BRA 0xa0"),
        (0x0e0, "EXIT"),
        (0x0f0, "USETMAXREG.DEALLOC.CTAPOOL 0x78"),
        (0x100, "QGMMA.64x64x32.F32.E4M3.E4M3 R24, gdesc[UR8], R24"),
        (0x110, "MUFU.EX2 R3, R3"),
        (0x120, "@P5 BRA 0x100"),
        (0x130, "EXIT"),
        (0x140, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R20"),  # out of line
        (0x150, "BRA 0x40"),
    ]
    out += [line(a, s) for a, s in code]
    return out


class Payload(unittest.TestCase):
    def test_an_entry_gives_its_payload(self):
        self.assertEqual(sass_mix.payload(entry(ELF)), ELF)

    def test_an_elf_file_is_its_own_payload(self):
        self.assertEqual(sass_mix.payload(ELF), ELF)

    def test_a_size_that_does_not_match_the_file_is_refused(self):
        with self.assertRaisesRegex(ValueError, "its header names"):
            sass_mix.payload(entry(ELF) + b"x")
        with self.assertRaisesRegex(ValueError, "shorter than its header"):
            sass_mix.payload(b"MLAJITCE" + bytes(10))

    def test_a_payload_that_is_not_elf_is_refused(self):
        with self.assertRaisesRegex(ValueError, "not an ELF file"):
            sass_mix.payload(entry(b"//PTX\n.version 8.0"))
        with self.assertRaisesRegex(ValueError, "neither a cache entry"):
            sass_mix.payload(b"hello")


class Listing(unittest.TestCase):
    def setUp(self):
        self.functions = sass_mix.read_sass(listing())
        self.rows = self.functions["mla_decode_kernel"]

    def test_functions_and_offsets(self):
        self.assertEqual(list(self.functions), ["mla_combine_kernel", "mla_decode_kernel"])
        self.assertEqual(len(self.functions["mla_combine_kernel"]), 2)
        self.assertEqual(len(self.rows), 22)
        self.assertEqual(self.rows[4]["address"], 0x40)
        self.assertEqual(self.rows[4]["source"], "HGMMA.64x64x16.F32 R24, R168, gdesc[UR12], R24")

    def test_every_backward_branch_is_a_loop(self):
        spans = [(self.rows[f]["address"], self.rows[l]["address"])
                 for f, l in sass_mix.loops(self.rows)]
        self.assertEqual(spans, [(0x20, 0x60), (0x20, 0x70), (0x40, 0x150), (0x80, 0x90),
                                 (0xa0, 0xd0), (0xb0, 0xc0), (0x100, 0x120)])

    def test_innermost_tensor_loops_inside_one_role(self):
        names = sass_mix.ncu_source.regions([dict(r) for r in self.rows])
        spans = [(self.rows[f]["address"], self.rows[l]["address"])
                 for f, l in sass_mix.tensor_loops(self.rows, names)]
        # (0x20, 0x70) holds (0x20, 0x60); 0x80 has no tensor op; 0xa0 holds
        # 0xb0; the out-of-line branch spans the roles.
        self.assertEqual(spans, [(0x20, 0x60), (0xb0, 0xc0), (0x100, 0x120)])

    def test_report_counts_each_role_and_loop(self):
        out = io.StringIO()
        sass_mix.report("mla_decode_kernel", self.rows, out=out)
        text = out.getvalue()
        self.assertIn("mla_decode_kernel: 22 instructions", text)
        self.assertIn("prologue: 1 instructions; LDC 1", text)
        # 14 of its own and the two out-of-line ones that return into it.
        self.assertIn("role 1: 16 instructions;", text)
        self.assertIn("loop 0x0020..0x0060: 5 instructions; HGMMA 2, F2FP 1, R2UR 1, BRA 1",
                      text)
        self.assertIn("loop 0x00b0..0x00c0: 2 instructions; HGMMA 1, BRA 1", text)
        self.assertIn("role 2: 5 instructions;", text)
        self.assertIn("loop 0x0100..0x0120: 3 instructions; QGMMA 1, MUFU 1, BRA 1", text)


class Main(unittest.TestCase):
    def run_main(self, *args):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()) as out:
            rc = sass_mix.main(list(args))
        return rc, out.getvalue(), err.getvalue()

    def test_a_fake_cuobjdump_feeds_the_report(self):
        with tempfile.TemporaryDirectory() as d:
            tool = os.path.join(d, "cuobjdump")
            dump = os.path.join(d, "dump.txt")
            with open(dump, "w") as f:
                f.write("\n".join(listing()) + "\n")
            with open(tool, "w") as f:
                f.write(f"#!/bin/sh\n[ \"$1\" = -sass ] || exit 3\ncat '{dump}'\n")
            os.chmod(tool, 0o755)
            binary = os.path.join(d, "k.bin")
            with open(binary, "wb") as f:
                f.write(entry(ELF))
            rc, out, err = self.run_main(binary, "--cuobjdump", tool)
            self.assertEqual(rc, 0, err)
            self.assertIn("loop 0x0100..0x0120", out)
            rc, out, err = self.run_main(binary, "--cuobjdump", tool, "--function", "nope")
            self.assertEqual(rc, 1)
            self.assertIn("no function 'nope' (there are: mla_combine_kernel, mla_decode_kernel)",
                          err)

    def test_a_bad_file_is_an_error_not_a_traceback(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.bin")
            with open(path, "wb") as f:
                f.write(b"hello")
            rc, _, err = self.run_main(path, "--cuobjdump", "/bin/false")
            self.assertEqual(rc, 1)
            self.assertIn("neither a cache entry", err)
            rc, _, err = self.run_main(os.path.join(d, "missing.bin"))
            self.assertEqual(rc, 1)
            self.assertIn("missing.bin", err)


if __name__ == "__main__":
    unittest.main()
