"""tools/bench/grid_timeline.py on grid stamps made up so that every figure
is known (run by ctest as bench_grid_timeline_py)."""
import contextlib
import io
import os
import tempfile
import unittest

import grid_timeline


def cta_line(cta, entry, waited, leave, items):
    """A kernel line (CTA c on SM 2 c + 1): items is [(start, end, tiles)],
    padded to six with -1."""
    values = []
    for i in range(6):
        values += list(items[i]) if i < len(items) else [-1, -1, -1]
    return (f"mla_grid cta {cta} sm {2 * cta + 1}: {entry} {waited} {leave} items 6: "
            + " ".join(map(str, values)))


def stamped_run():
    """Four CTAs: 0-2 run one item of 64 tiles at 1000 ns a tile, CTA 3 two
    items of 32 tiles at 1500 ns a tile with 2000 ns between them; CTA 2
    entered 300 ns late and never stamped its exit."""
    lines = ["case (32,4,8192,32) bf16 ...",
             cta_line(0, 0, 500, 70000, [(2000, 66000, 64)]),
             cta_line(1, 100, 600, 71000, [(2100, 66100, 64)]),
             cta_line(2, 300, 800, -1, [(2300, 66300, 64)]),
             cta_line(3, 200, 700, 103000, [(2200, 50200, 32), (52200, 100200, 32)]),
             "mla_grid merge done: 108500"]
    return lines


def run_main(lines):
    """grid_timeline.main on a file of these lines: (exit code, stdout, stderr)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = grid_timeline.main([f.name])
    finally:
        os.unlink(f.name)
    return code, out.getvalue(), err.getvalue()


class GridTimelineTest(unittest.TestCase):
    def test_rows_are_the_made_up_figures(self):
        rows, slow, after = grid_timeline.summary(*grid_timeline.parse(stamped_run()))
        got = dict(rows)
        self.assertEqual(got["entry"], (0.0, 0.15, 0.3))
        self.assertEqual(got["past the wait for the previous kernel"], (0.5, 0.65, 0.8))
        self.assertEqual(got["first work item starts"], (2.0, 2.15, 2.3))
        self.assertEqual(got["exit"], (70.0, 71.0, 103.0))
        self.assertEqual(got["inside work items"], (64.0, 64.0, 96.0))
        self.assertEqual(got["between work items"], (2.0, 2.0, 2.0))
        self.assertEqual(got["ns per tile inside items"], (1000.0, 1000.0, 1500.0))
        self.assertEqual(got["tiles"], (64, 64, 64))
        self.assertEqual(slow[0], (3, 7, 103.0, 64, 1500.0))
        self.assertEqual([c for c, *_ in slow], [3, 1, 0])  # CTA 2 has no exit
        self.assertAlmostEqual(after, 5.5)

    def test_main_prints_the_tables(self):
        code, text, _ = run_main(stamped_run())
        self.assertEqual(code, 0)
        self.assertIn("4 CTAs stamped", text)
        self.assertIn("| ns per tile inside items | 1000.00 | 1000.00 | 1500.00 |", text)
        self.assertIn("| 3 | 7 | 103.00 | 64 | 1500 |", text)
        self.assertIn("merge kernel's CTA 0 done 5.50 µs after the last CTA left", text)

    def test_merge_ctas_are_summarised_after_the_decode(self):
        # Three merge CTAs: they enter while the decode runs (before its last
        # CTA leaves at 103000), get past their wait 1500-2500 ns after it,
        # and are done 4000-6000 ns after it; CTA 2 had nothing to merge.
        lines = stamped_run() + ["mla_grid merge cta 0 sm 4: 70500 104500 107000",
                                 "mla_grid merge cta 1 sm 9: 71500 105500 109000",
                                 "mla_grid merge cta 2 sm 11: 72000 -1 104000"]
        merge_ctas = {}
        ctas, _ = grid_timeline.parse(lines, merge_ctas)
        self.assertEqual(len(ctas), 4)  # the merge's lines are not the decode's
        self.assertEqual(merge_ctas[1], {"sm": 9, "entry": 71500, "waited": 105500,
                                         "exit": 109000})
        rows, (first_waited, last_done) = grid_timeline.merge_summary(ctas, merge_ctas)
        got = dict(rows)
        self.assertEqual(got["merge: entry"], (70.5, 71.5, 72.0))
        self.assertEqual(got["merge: past its wait for the decode"], (104.5, 105.0, 105.5))
        self.assertEqual(got["merge: exit"], (104.0, 107.0, 109.0))
        self.assertAlmostEqual(first_waited, 1.5)
        self.assertAlmostEqual(last_done, 6.0)
        code, text, _ = run_main(lines)
        self.assertEqual(code, 0)
        self.assertIn("3 merge CTAs stamped", text)
        self.assertIn("| merge: past its wait for the decode | 104.50 | 105.00 | 105.50 |", text)
        self.assertIn("the merge's first wait returned in 1.50 µs, its last CTA was done in "
                      "6.00 µs", text)

    def test_a_run_without_stamps_is_an_error(self):
        code, _, err = run_main(["nothing stamped here"])
        self.assertEqual(code, 1)
        self.assertIn("MLAJIT_TIMELINE", err)


if __name__ == "__main__":
    unittest.main()
