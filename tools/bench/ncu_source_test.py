"""tools/bench/ncu_source.py on a made-up SourceCounters table whose every
figure is known (run by ctest as bench_ncu_source_py)."""
import contextlib
import csv
import io
import os
import tempfile
import unittest

import ncu_source

BASE = 0x7F0000000000
HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)",
          "Warp Stall Sampling (Not-issued Samples)", "Instructions Executed", "stall_wait",
          "stall_long_sb", "stall_long_sb (Not Issued)"]


def row(offset, source, samples, executed, wait=0, long_sb=0):
    return [hex(BASE + offset), "      " + source, str(samples), "0", f"{executed:,}", str(wait),
            str(long_sb), "0"]


def table_lines():
    """A two-role kernel: a prologue, role 1 (a wait on an mbarrier whose
    retry branch comes two instructions later), role 2, and an out-of-line
    retry loop that returns into role 2."""
    rows = [
        row(0x00, "LDC R1, c[0x0][0x28]", 1, 100),
        row(0x10, "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xd0", 0, 100),
        row(0x20, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R20", 2, 1000, wait=2),
        row(0x30, "FMUL R1, R2, R3", 3, 1000, wait=3),
        row(0x40, "@!P0  BRA " + hex(BASE + 0x80), 40, 1000, long_sb=40),
        row(0x50, "@P1   EXIT", 0, 100),  # predicated: not the role's end
        row(0x60, "HGMMA.64x64x16.F32.BF16 R152, gdesc[UR40], R152", 5, 2000, wait=5),
        row(0x70, "EXIT", 0, 100),
        row(0x80, "USETMAXREG.DEALLOC.CTAPOOL 0x90", 0, 200),
        row(0x90, "PRMT R1, R2, 0x5140, R3", 30, 8000, wait=30),
        row(0xA0, "@!P0  BRA " + hex(BASE + 0xC0), 0, 200),
        row(0xB0, "EXIT", 0, 200),
        # out of line: a retry loop that goes back into role 2
        row(0xC0, "SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [R4+URZ], R5", 10, 500, long_sb=10),
        row(0xD0, "@!P2  BRA " + hex(BASE + 0xC0), 9, 500, long_sb=9),
        row(0xE0, "BRA " + hex(BASE + 0x90), 0, 500),
    ]
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["Kernel Name", "mla_decode_kernel"])
    w.writerow(HEADER)
    for r in rows:
        w.writerow(r)
    return out.getvalue().splitlines(keepends=True)


class NcuSourceTest(unittest.TestCase):
    def setUp(self):
        self.table = ncu_source.read_table(table_lines())

    def test_reads_offsets_counts_and_reasons(self):
        self.assertEqual(len(self.table), 15)
        self.assertEqual(self.table[4]["address"], 0x40)
        self.assertEqual(self.table[4]["samples"], 40)
        self.assertEqual(self.table[9]["executed"], 8000)  # "8,000"
        self.assertEqual(self.table[4]["stalls"], {"wait": 0, "long_sb": 40})

    def test_cuts_at_the_roles_and_gives_out_of_line_code_to_its_role(self):
        names = ncu_source.regions(self.table)
        self.assertEqual(names[0], "prologue")
        self.assertEqual(names[1:8], ["role 1"] * 7)
        self.assertEqual(names[8:12], ["role 2"] * 4)
        self.assertEqual(names[12:], ["role 2"] * 3)

    def test_sums_each_region_and_its_mbarrier_waits(self):
        s = ncu_source.summarize(self.table, ncu_source.regions(self.table))
        self.assertEqual(list(s), ["prologue", "role 1", "role 2"])
        self.assertEqual(s["role 1"]["executed"], 100 + 1000 * 3 + 100 + 2000 + 100)
        self.assertEqual(s["role 1"]["samples"], 50)
        # The PHASECHK and its retry branch two rows on; not the FMUL between.
        self.assertEqual(s["role 1"]["waits"], 42)
        self.assertEqual(s["role 2"]["samples"], 49)
        self.assertEqual(s["role 2"]["waits"], 19)
        self.assertEqual(s["role 2"]["stalls"]["long_sb"], 19)
        self.assertEqual(s["role 2"]["ops"]["PRMT"], 8000)
        self.assertEqual(s["role 1"]["sites"][0]["address"], 0x40)

    def test_explicit_cuts_replace_the_roles(self):
        names = ncu_source.regions(self.table, [0x80])
        self.assertEqual(names[:8], ["part 0"] * 8)
        self.assertEqual(names[8:], ["part 1"] * 7)

    def test_a_kernel_without_roles_is_one_region(self):
        table = [r for r in self.table if "USETMAXREG" not in r["source"]]
        self.assertEqual(set(ncu_source.regions(table)), {"whole"})

    def test_report_and_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.csv")
            with open(path, "w") as f:
                f.writelines(table_lines())
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(ncu_source.main([path]), 0)
        text = out.getvalue()
        self.assertIn("15 instructions", text)
        self.assertIn("| role 1 | 0.01 |", text)
        self.assertIn("84.0 %", text)  # role 1's 42 waiting samples of its 50
        self.assertIn("stalls: long_sb 80 %, wait 20 %", text)  # role 1
        self.assertIn("stalls: wait 61 %, long_sb 39 %", text)  # role 2

    def test_refuses_a_table_without_its_columns(self):
        with self.assertRaisesRegex(ValueError, "no header row"):
            ncu_source.read_table(["a,b\n", "1,2\n"])
        with self.assertRaisesRegex(ValueError, "no column 'Instructions Executed'"):
            ncu_source.read_table(['"Address","Source","Warp Stall Sampling (All Samples)"\n'])


if __name__ == "__main__":
    unittest.main()
