"""Tests of energy_model.py on made-up bench JSON: the products each case's
name implies, the model's terms, the energy split, the target's energy, and a
JSON without the power windows refused with a reason."""
import contextlib
import io
import json
import os
import tempfile
import unittest

import energy_model


def doc(cases, with_power=True):
    d = {"ceilings": {"read_bytes_per_s": {"value": 4e12}, "fp8_flops": {"value": 1e15},
                      "bf16_flops": {"value": 5e14}},
         "cases": cases}
    if with_power:
        d["power"] = {"waiting": {"watts": 100.0}, "read": {"watts": 400.0},
                      "fp8": {"watts": 700.0}, "bf16": {"watts": 700.0}}
    return d


def case(name, flops, nbytes, median_us, watts=700.0, us=100.0):
    return {"case": name, "flops": flops, "bytes": nbytes, "median_us": median_us,
            "power": {"watts": watts, "us_per_call": us, "sm_mhz_median": 1500,
                      "joules_per_call": watts * us * 1e-6}}


class ModelTest(unittest.TestCase):
    def test_products_by_mode_and_format(self):
        s, pv = 576.0, 512.0
        self.assertEqual(energy_model.product_flops("(1,1,1,1) fp8_e4m3 a8", 1088.0), (s, pv))
        self.assertEqual(energy_model.product_flops("(1,1,1,1) fp8_e4m3", 1088.0), (2 * s, pv))
        self.assertEqual(energy_model.product_flops("(1,1,1,1) mxfp4", 1088.0), (2 * s, pv))
        self.assertEqual(energy_model.product_flops("(1,1,1,1) bf16", 1088.0), (0.0, s + pv))

    def test_terms_split_and_target(self):
        # 1.088e11 FLOPs a8: S 5.76e10 at 1e15 = 57.6 µs, P V 5.12e10 at 5e14 = 102.4 µs;
        # 4e8 bytes at 4e12 = 100 µs, times (400 - 100) / (700 - 100) = 0.5: 50 µs.
        share, rows = energy_model.model(
            doc([case("(8,1,8192,16) fp8_e4m3 a8", 1.088e11, 4e8, 200.0)]), 750)
        self.assertAlmostEqual(share, 0.5)
        r = rows[0]
        self.assertAlmostEqual(r["products_us"], 160.0)
        self.assertAlmostEqual(r["bytes_us"], 50.0)
        self.assertAlmostEqual(r["model_us"], 210.0)
        self.assertAlmostEqual(r["mj"], 70.0)  # 700 W for 100 µs
        # waiting 100 W x 100 µs = 10 mJ; bytes 4e8 x 300 / 4e12 = 30 mJ;
        # products 5.76e10 x 600 / 1e15 + 5.12e10 x 600 / 5e14 = 34.56 + 61.44 mJ
        self.assertAlmostEqual(r["waiting_share"], 10 / 70)
        self.assertAlmostEqual(r["bytes_share"], 30 / 70)
        self.assertAlmostEqual(r["products_share"], 96 / 70)
        self.assertAlmostEqual(r["target_us"], 1.088e11 / 750e12 * 1e6)
        self.assertAlmostEqual(r["target_mj"], 700 * r["target_us"] * 1e-3)

    def test_cases_without_a_window_are_left_out(self):
        c = case("(1,1,64,16) fp8_e4m3", 1e6, 1e5, 9.0)
        c["power"] = None
        _, rows = energy_model.model(doc([c]))
        self.assertEqual(rows, [])

    def test_a_json_without_power_windows_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.json")
            with open(path, "w") as f:
                json.dump(doc([], with_power=False), f)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                rc = energy_model.main([path])
        self.assertEqual(rc, 2)
        self.assertIn("no power window for waiting, read, fp8, bf16", err.getvalue())

    def test_the_table(self):
        share, rows = energy_model.model(
            doc([case("(8,1,8192,16) fp8_e4m3 a8", 1.088e11, 4e8, 200.0)]), 750)
        text = energy_model.table(share, rows)
        self.assertIn("| (8,1,8192,16) fp8_e4m3 a8 | 700 | 1500 | 70.00 | 160.0 | 50.0 | 210.0 "
                      "| 200.00 | 1.05 | 14 / 43 / 137 % |", text)


if __name__ == "__main__":
    unittest.main()
