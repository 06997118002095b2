"""tools/bench/timeline.py on stamps made up so that every step has a known
length (run by ctest as bench_timeline_py)."""
import contextlib
import io
import os
import tempfile
import unittest

import timeline


def stamped_run(tiles, period):
    """Kernel lines for `tiles` tiles of `period` cycles: the scorer's events
    0..4 at 0, 100, 300, 310, 1010 into its tile, the accumulators' 0..5 at
    250, 1050, 2300, 2350, 2950, 2980; tile 3 lost its scorer line."""
    lines = ["first call ...: cold compile"]
    for t in range(tiles):
        base = t * period
        if t != 3:
            s = [base + d for d in (0, 100, 300, 310, 1010)] + [-1, -1, -1]
            lines.append(f"mla_timeline tile {t} role 0: " + " ".join(map(str, s)))
        a = [base + d for d in (250, 1050, 2300, 2350, 2950, 2980)] + [-1, -1]
        lines.append(f"mla_timeline tile {t} role 1: " + " ".join(map(str, a)))
    return lines


def two_stage_tiles(bases):
    """Kernel lines for two-stage tiles starting at `bases`: warpgroup 0's
    events 0..6 at 0, 40, 1300, 1800, 1850, 1900, 2900 into its tile,
    warpgroup 1's at 20, 40, -, -, 1850, 1880, 2950."""
    lines = []
    for t, base in enumerate(bases):
        w0 = [base + d for d in (0, 40, 1300, 1800, 1850, 1900, 2900)] + [-1]
        w1 = [base + 20, base + 40, -1, -1, base + 1850, base + 1880, base + 2950, -1]
        lines.append(f"mla_timeline tile {t} role 0: " + " ".join(map(str, w0)))
        lines.append(f"mla_timeline tile {t} role 4: " + " ".join(map(str, w1)))
    return lines


def run_main(test, lines, args):
    """timeline.main on `lines` written to a file, with `args` after its
    name; checks that it succeeds and returns what it printed."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    test.addCleanup(os.unlink, f.name)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        test.assertEqual(timeline.main([f.name] + args), 0)
    return out.getvalue()


class TimelineTest(unittest.TestCase):
    def test_medians_are_the_steps_lengths(self):
        medians = {name: (m, n) for name, m, n in
                   timeline.step_medians(timeline.parse(stamped_run(10, 3000)))}
        self.assertEqual(medians["tile period (scorer, S done to S done)"][0], 3000)
        self.assertEqual(medians["scorer: S issued"][0], 100)
        self.assertEqual(medians["scorer: softmax, P written"][0], 700)
        self.assertEqual(medians["scorer: P out until the next tile's wait returns"][0], 1990)
        self.assertEqual(medians["accumulators: wait for P"][0], 800)
        self.assertEqual(medians["accumulators: stage handed over"][0], 600)
        self.assertEqual(medians["P out until the accumulators see it"][0], 40)
        # Tiles 2..9 counted, tile 3's scorer line missing: 7 samples, 5 where
        # a step needs the next tile's scorer line too (2->3, 3->4 and 9->10).
        self.assertEqual(medians["scorer: S issued"][1], 7)
        self.assertEqual(medians["tile period (scorer, S done to S done)"][1], 5)

    def test_warp_offsets_are_each_warps_lag(self):
        lines = []
        for t in range(6):
            for w in range(8):
                # Warp w stamps every event 10 w cycles after warp 0, but warp 5
                # hands the stage over 300 cycles after the others.
                a = [t * 3000 + d + 10 * w for d in (250, 1050, 2300, 2350, 2950, 2980)]
                if w == 5:
                    a[4] += 300
                lines.append(f"mla_timeline tile {t} role {1 + w}: " +
                             " ".join(map(str, a + [-1, -1])))
        offsets = dict(timeline.warp_offsets(timeline.parse(lines)))
        self.assertEqual(offsets["P seen"], [10 * w for w in range(8)])
        self.assertEqual(offsets["stage handed over"][5], 350)
        self.assertEqual(offsets["stage handed over"][7], 70)

    def test_seesaw_steps_per_pair(self):
        # Warpgroup 0's events 0..7 at 0, 1200, 1250, 1600, 2000, 2100, 2150,
        # 2500 into a pair of 4000 cycles; warpgroup 1's at 100, 1400, 1450,
        # 1650, 1700, 2000, 2300, 2700.
        lines = []
        for g in range(8):
            base = g * 4000
            w0 = [base + d for d in (0, 1200, 1250, 1600, 2000, 2100, 2150, 2500)]
            w1 = [base + d for d in (100, 1400, 1450, 1650, 1700, 2000, 2300, 2700)]
            lines.append(f"mla_timeline tile {g} role 0: " + " ".join(map(str, w0)))
            lines.append(f"mla_timeline tile {g} role 4: " + " ".join(map(str, w1)))
        medians = {name: (m, n) for name, m, n in
                   timeline.step_medians(timeline.parse(lines), 2, timeline.SEESAW_STEPS)}
        period = "pair period (warpgroup 0, tile A's last blocks landed to the next's)"
        self.assertEqual(medians[period], (4000, 5))
        self.assertEqual(medians["wg0: S_A over the last blocks"], (1200, 6))
        self.assertEqual(medians["wg0: softmax, P_A out"][0], 350)
        wait_a = "wg0: S over the first blocks, wait for the next tile A's last"
        self.assertEqual(medians[wait_a][0], 1500)
        self.assertEqual(medians["wg1: tile B's last blocks landed after wg0's tile A's"][0], 100)
        self.assertEqual(medians["wg1: maxima out"][0], 200)
        self.assertEqual(medians["wg1: wait for P_A"][0], 50)
        self.assertEqual(medians["wg1: P_B V_B[R] done, B + 2 copied"][0], 400)
        wait_b = "wg1: S over the first blocks, wait for the next tile B's last"
        self.assertEqual(medians[wait_b][0], 1400)

    def test_seesaw_lags_between_the_warps_of_a_warpgroup(self):
        # Warp r of warpgroup 0 (roles 0-3) reaches every event 30 r cycles
        # after warp 0, except "P_A out", where warp 3 is 500 behind.
        lines = []
        for g in range(6):
            for r in range(4):
                ev = [g * 4000 + 100 * e + 30 * r for e in range(8)]
                if r == 3:
                    ev[3] = g * 4000 + 300 + 500
                lines.append(f"mla_timeline tile {g} role {r}: " + " ".join(map(str, ev)))
        lags = dict(timeline.warp_offsets(timeline.parse(lines), 2, [0, 1, 2, 3],
                                          timeline.SEESAW_WG0_EVENTS))
        self.assertEqual(lags["S_A done"], [0, 30, 60, 90])
        self.assertEqual(lags["P_A out"], [0, 30, 60, 500])
        out = run_main(self, lines, ["--path", "seesaw"])
        self.assertIn("warpgroup 0, median cycles each warp is behind", out)
        self.assertIn("| P_A out | 0 | 30 | 60 | 500 |", out)

    def test_no_lines_is_an_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("nothing stamped here\n")
        self.addCleanup(os.unlink, f.name)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(timeline.main([f.name]), 1)
        self.assertIn("MLAJIT_TIMELINE", err.getvalue())


class TwoStageTimelineTest(unittest.TestCase):
    def test_steps_per_tile(self):
        # Warpgroup 0's events 0..6 at 0, 40, 1300, 1800, 1850, 1900, 2900
        # into a tile of 3000 cycles; warpgroup 1's at 20, 40, -, -, 1850,
        # 1880, 2950.
        lines = two_stage_tiles([t * 3000 for t in range(4)])
        medians = {name: (m, n) for name, m, n in
                   timeline.step_medians(timeline.parse(lines), 0, timeline.TWO_STAGE_STEPS)}
        self.assertEqual(medians["tile period (warpgroup 0, barrier (1) to the next's)"], (3000, 3))
        self.assertEqual(medians["wg0: S"], (1260, 4))
        self.assertEqual(medians["wg0: softmax, P and alpha out"][0], 500)
        self.assertEqual(medians["wg0: P V drained"][0], 1000)
        self.assertEqual(medians["wg0: P V done until the next tile's copies landed"], (100, 3))
        idle = "wg1: barrier (1) to barrier (2), under S and the softmax"
        self.assertEqual(medians[idle][0], 1810)
        self.assertEqual(medians["wg1: P V issued"][0], 30)
        self.assertEqual(medians["wg1: P V done after warpgroup 0's"][0], 50)
        out = run_main(self, lines, ["--path", "two-stage", "--skip", "0"])
        self.assertIn("| wg0: S | 1260 | 4 |", out)

    def test_work_items_start_and_epilogue(self):
        # Two items of two tiles: item 0 starts 500 cycles before its first
        # tile's barrier (1) at 540 and its stores are issued 300 after its
        # last tile's later P V (warpgroup 1's, at 500 + 3000 + 2950); item 1
        # the same, 7000 cycles later.
        lines = two_stage_tiles([500 + t * 3000 + (1000 if t >= 2 else 0) for t in range(4)])
        for i in range(2):
            base = 7000 * i
            lines.append(f"mla_timeline tile {i} role 8: {base + 40} {base + 6750}"
                         + " -1" * 6)
        rows = dict(timeline.rows_item_steps(timeline.parse(lines)))
        self.assertEqual(rows["item 0: start to end (2 tiles)"], 6710)
        self.assertEqual(rows["item 0: start to its first tile's barrier (1)"], 500)
        self.assertEqual(rows["item 0: its last tile's P V done to its stores"], 300)
        self.assertEqual(rows["item 1: start to its first tile's barrier (1)"], 500)
        out = run_main(self, lines, ["--path", "two-stage", "--skip", "0"])
        self.assertIn("| item 1: its last tile's P V done to its stores | 300 |", out)


class SeesawItemsTest(unittest.TestCase):
    def test_work_item_start_and_epilogue_around_its_pairs(self):
        # One item of two pairs 8000 cycles apart: tile A's last blocks land
        # 900 cycles after the item starts; the last pair is done at 8000 +
        # 7000 (warpgroup 1, 100 after warpgroup 0) and the stores follow
        # 400 later.
        lines = []
        for g in range(2):
            base = 1000 + 8000 * g
            for role, done in ((0, 6900), (4, 7000)):
                ev = [base + 10 * e for e in range(7)] + [base + done]
                lines.append(f"mla_timeline tile {g} role {role}: " + " ".join(map(str, ev)))
        lines.append("mla_timeline tile 0 role 8: 100 16400" + " -1" * 6)
        rows = dict(timeline.rows_item_steps(timeline.parse(lines), "seesaw"))
        self.assertEqual(rows["item 0: start to end (2 pairs)"], 16300)
        self.assertEqual(rows["item 0: start to its first pair's tile A landed"], 900)
        self.assertEqual(rows["item 0: its last pair's P V done to its stores"], 400)


class SwapAbTimelineTest(unittest.TestCase):
    def test_every_step_of_one_item_of_two_tiles(self):
        # CTA start at 0; item 0 starts at 100, Q at 600; tile 0 waited at
        # 1600 and its events 10, 400, 300, 200, 100 cycles apart; tile 1
        # waited 50 after tile 0's end; the epilogue 70, 30, 200, 60 apart.
        t0 = [1600, 1610, 2010, 2310, 2510, 2610]
        t1 = [2660, 2670, 3070, 3370, 3570, 3670]
        item = [100, 600, 3740, 3770, 3970, 4030]
        lines = [
            "mla_timeline tile 0 role 2: 0 -1 -1 -1 -1 -1 -1 -1",
            "mla_timeline tile 0 role 0: " + " ".join(map(str, t0)) + " -1 -1",
            "mla_timeline tile 1 role 0: " + " ".join(map(str, t1)) + " -1 -1",
            "mla_timeline tile 0 role 1: " + " ".join(map(str, item)) + " -1 -1",
        ]
        steps = dict(timeline.swap_ab_steps(timeline.parse(lines)))
        self.assertEqual(steps["item 0: since the CTA start or the last item"], 100)
        self.assertEqual(steps["item 0: Q converted, first tiles issued"], 500)
        self.assertEqual(steps["tile 0: wait for its copies"], 1000)
        self.assertEqual(steps["tile 0: barrier before S"], 10)
        self.assertEqual(steps["tile 0: S"], 400)
        self.assertEqual(steps["tile 0: softmax, P written"], 300)
        self.assertEqual(steps["tile 0: P V issued"], 200)
        self.assertEqual(steps["tile 0: P V drained"], 100)
        self.assertEqual(steps["tile 1: wait for its copies"], 50)
        self.assertEqual(steps["item 0: after its last tile"], 70)
        self.assertEqual(steps["item 0: row sums exchanged"], 30)
        self.assertEqual(steps["item 0: rows normalised and staged"], 200)
        self.assertEqual(steps["item 0: rows stored"], 60)
        self.assertEqual(steps["CTA start to the last item's stores"], 4030)


if __name__ == "__main__":
    unittest.main()
