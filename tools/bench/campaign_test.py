"""Tests of campaign.py: the commands each stage plans, the errors for
malformed stages, and the summary of a run (with a stand-in for the
commands, so no GPU is needed)."""
import contextlib
import io
import json
import os
import re
import tempfile
import unittest

import campaign


def dry_run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = campaign.main(["--out", "/tmp/x", "--build-dir", "/b", "--scratch", "/s", "--dry-run"]
                           + list(argv))
    return rc, out.getvalue().splitlines()


def usage_error(test, *argv):
    """The exit status and message of a command line main() rejects."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), test.assertRaises(SystemExit) as cm:
        campaign.main(["--out", "/tmp/x"] + list(argv))
    return cm.exception.code, err.getvalue()


class PlanTest(unittest.TestCase):
    def test_timeline_stamps_one_launch_in_its_own_cache_and_reads_both_views(self):
        rc, lines = dry_run("timeline:32,4,1024,16,bf16@two-stage")
        self.assertEqual(rc, 0)
        self.assertEqual(len(lines), 3)
        self.assertIn("MLAJIT_TIMELINE=151", lines[0])
        # The stamped kernels' cache is scratch, not a result under --out.
        self.assertIn("MLAJIT_CACHE_DIR=/s/01-timeline-32-4-1024-16-bf16-two-stage-cache",
                      lines[0])
        self.assertIn("/b/tools/bench/mlajit_bench --case 32,4,1024,16,bf16 --no-check", lines[0])
        # A two-stage CTA runs few tiles: none is skipped.
        self.assertRegex(lines[1], r"timeline\.py \S+-run\.txt --path two-stage --skip 0 >")
        self.assertRegex(lines[2], r"grid_timeline\.py \S+-run\.txt >")

    def test_seesaw_timeline_keeps_the_readers_default_skip(self):
        _, lines = dry_run("timeline:4,4,8192,32,bf16@seesaw")
        self.assertIn("--path seesaw >", lines[1])

    def test_ncu_profiles_one_steady_launch_of_the_named_kernel(self):
        rc, lines = dry_run("ncu:4,4,8192,32,bf16@merge")
        self.assertEqual(rc, 0)
        self.assertEqual(len(lines), 4)
        self.assertRegex(lines[0], r"^\[ncu\] ncu --clock-control none --cache-control none --kernel-name "
                                   r"regex:mla_combine_kernel --launch-skip 50 --launch-count 1 ")
        self.assertIn("--section MemoryWorkloadAnalysis", lines[0])
        self.assertIn("--section ComputeWorkloadAnalysis", lines[0])
        self.assertIn("--metrics 'regex:^(smsp__average_warps_issue_stalled_.*_per_issue_active"
                      "\\.ratio|sm__(inst_executed_pipe_|pipe_).*\\.avg\\.pct_of_peak_sustained_active)$'",
                      lines[0])
        self.assertIn("/b/tools/bench/mlajit_bench --case 4,4,8192,32,bf16 --no-check", lines[0])
        self.assertIn("--section SourceCounters", lines[0])
        # The report, then its details, its per-instruction table, and that
        # table per warp role.
        self.assertRegex(lines[0], r" -f -o (\S+) /b/")
        report = re.search(r" -f -o (\S+) /b/", lines[0]).group(1) + ".ncu-rep"
        self.assertIn(f"ncu --import {report} --page details >", lines[1])
        self.assertIn(f"ncu --import {report} --page source --csv --print-source sass > ", lines[2])
        self.assertRegex(lines[3], r"ncu_source\.py \S+-source\.csv > \S+-roles\.txt")
        _, lines = dry_run("ncu:32,4,1024,16@decode")
        self.assertIn("regex:mla_decode_kernel ", lines[0])

    def test_ab_alternates_the_arms_for_each_round(self):
        _, lines = dry_run("--rounds", "3", "ab:MLAJIT_TILES=32,64,4,2,1@32,1,1024,32,bf16+"
                           "16,1,1024,32,bf16")
        self.assertEqual(len(lines), 6)
        for i, line in enumerate(lines):
            variant = i % 2 == 0
            self.assertEqual("MLAJIT_TILES=32,64,4,2,1 " in line, variant, line)
            self.assertIn("--case 32,1,1024,32,bf16 --case 16,1,1024,32,bf16", line)
            self.assertIn(f"-{'variant' if variant else 'default'}-{i // 2 + 1}.json", line)

    def test_ab_takes_several_settings(self):
        _, lines = dry_run("ab:MLAJIT_TILES=64,64,8,2,1;MLAJIT_TEMPLATE_DIR=/t@4,4,8192,32")
        self.assertIn("MLAJIT_TILES=64,64,8,2,1 MLAJIT_TEMPLATE_DIR=/t ", lines[0])

    def test_sweep_runs_one_default_and_each_value_every_round(self):
        _, lines = dry_run("--rounds", "2", "sweep:MLAJIT_KERNEL_DEFINES=MLA_P=1|MLA_P=2|MLA_P=3;"
                           "MLAJIT_TEMPLATE_DIR=/t@4,4,8192,32,bf16")
        self.assertEqual(len(lines), 8)  # (1 + 3) a round, not 2 x 3
        for r in range(2):
            arms = lines[4 * r:4 * r + 4]
            self.assertNotIn("MLAJIT_", arms[0].split("/b/tools")[0])
            self.assertIn(f"-default-{r + 1}.json", arms[0])
            for i, line in enumerate(arms[1:]):
                self.assertIn(f"MLAJIT_KERNEL_DEFINES=MLA_P={i + 1} MLAJIT_TEMPLATE_DIR=/t ", line)
                self.assertIn(f"-value{i + 1}-{r + 1}.json", line)
            for line in arms:
                self.assertIn("--case 4,4,8192,32,bf16 ", line)

    def test_ablate_times_both_arms_unchecked(self):
        _, lines = dry_run("ablate:MLAJIT_KERNEL_DEFINES=MLA_ABLATE_MERGE=1@32,4,1024,16,bf16")
        self.assertEqual(len(lines), 4)
        for line in lines:
            self.assertIn("--case 32,4,1024,16,bf16 --no-check", line)
        self.assertIn("MLAJIT_KERNEL_DEFINES=MLA_ABLATE_MERGE=1 ", lines[0])
        _, ab = dry_run("ab:X=1@32,4,1024,16,bf16")
        self.assertNotIn("--no-check", ab[0])

    def test_standing_writes_json_and_passes_runs(self):
        _, lines = dry_run("--runs", "300", "standing:default,bf16")
        self.assertRegex(lines[0], r"--suite default,bf16 --json 01-standing-default-bf16\.json "
                                   r"--runs 300 >")

    def test_power_windows_reach_every_timed_bench_run(self):
        _, lines = dry_run("--power-ms", "1000", "standing:default", "ab:X=1@4,4,8192,32,bf16")
        self.assertEqual(len(lines), 5)  # standing, then two rounds of two arms
        for line in lines:
            self.assertIn(" --power-ms 1000 ", line)
        _, lines = dry_run("standing:default")
        self.assertNotIn("--power-ms", lines[0])

    def test_build_and_tests(self):
        os.environ["MLAJIT_CMAKE_ARGS"] = "-DCMAKE_PREFIX_PATH=/opt/deps/usr"
        try:
            _, lines = dry_run("--test-jobs", "4", "build", "tests:Seesaw")
        finally:
            del os.environ["MLAJIT_CMAKE_ARGS"]
        self.assertIn("-B /b -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/opt/deps/usr",
                      lines[0])
        self.assertIn("cmake --build /b -j", lines[1])
        self.assertIn("ctest --test-dir /b -L gpu --output-on-failure --timeout 600 -j 4 -R Seesaw",
                      lines[2])


class ErrorTest(unittest.TestCase):
    def check(self, spec, expected):
        code, err = usage_error(self, spec)
        self.assertEqual(code, 2)
        self.assertIn(f"stage '{spec}'", err)
        self.assertIn(expected, err)

    def test_unknown_stage(self):
        self.check("bench:default", "unknown stage 'bench'")

    def test_ncu_without_a_known_kernel(self):
        self.check("ncu:4,4,8192,32", "expected ncu:CASE@KERNEL")
        self.check("ncu:4,4,8192,32@combine", "KERNEL one of decode, merge")
        self.check("ncu:4,4,x@merge", "4,4,x")

    def test_timeline_without_a_known_path(self):
        self.check("timeline:4,4,8192,32", "expected timeline:CASE@PATH")
        self.check("timeline:4,4,8192,32@pairs", "PATH one of ws, seesaw, two-stage, swap-ab")

    def test_case_that_is_not_a_shape(self):
        self.check("ab:X=1@4,4,bf16", "case '4,4,bf16' is not B,Q_LEN,KV_LEN,HEADS")

    def test_setting_that_is_not_an_assignment(self):
        self.check("ab:MLAJIT_TILES@4,4,8192,32", "setting 'MLAJIT_TILES' is not NAME=VALUE")

    def test_sweep_needs_exactly_one_setting_with_values(self):
        self.check("sweep:A=1;B=2@4,4,8192,32", "expected one setting with values separated by "
                   "'|', found 0")
        self.check("sweep:A=1|2;B=3|4@4,4,8192,32", "found 2")
        self.check("sweep:A=1||2@4,4,8192,32", "A has an empty value")
        self.check("sweep:A=1|2", "expected sweep:ENV=V1|V2")

    def test_standing_needs_suites(self):
        self.check("standing", "expected standing:SUITES")

    def test_bad_power_window(self):
        code, err = usage_error(self, "--power-ms", "50", "standing:default")
        self.assertEqual(code, 2)
        self.assertIn("--power-ms 50: expected 0 (none) or 100..60000", err)

    def test_bad_rounds(self):
        for flag in ("--rounds", "--test-jobs"):
            code, err = usage_error(self, flag, "0", "probes")
            self.assertEqual(code, 2)
            self.assertIn(f"{flag} 0", err)


def bench_json(medians, mhz, rel_err, passed=True, checked=True, joules=None):
    return json.dumps({"cases": [{"case": c, "median_us": us, "rel_err": rel_err,
                                  "passed": passed, "checked": checked,
                                  "clocks": {"sm_mhz_median": mhz},
                                  "power": None if joules is None else
                                  {"watts": 690.0, "joules_per_call": joules}}
                                 for c, us in medians.items()]})


class RunTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = self.dir.name
        self.calls = []

    def tearDown(self):
        self.dir.cleanup()

    def fake_runner(self, medians):
        """Writes each bench JSON the command names, with the variant's or
        the default's medians; fails the tests stage."""
        def run(argv, env, out_path, cwd, timeout):
            self.calls.append((argv, env, timeout))
            with open(out_path, "w") as f:
                f.write("output\n")
            if "--json" in argv:
                arm = "variant" if env else "default"
                with open(os.path.join(cwd, argv[argv.index("--json") + 1]), "w") as f:
                    if arm == "variant":  # faster, at a higher clock, one round wrong
                        f.write(bench_json(medians[arm], 1980, 2.5e-3, passed=len(self.calls) != 4))
                    else:
                        f.write(bench_json(medians[arm], 1890, 2.1e-3))
            return (1 if argv[0] == "ctest" else 0), 0.5
        return run

    def test_summary_has_each_step_and_the_ab_medians(self):
        os.environ["MLAJIT_PDL"] = "0"
        self.addCleanup(os.environ.pop, "MLAJIT_PDL")
        medians = {"variant": {"(32,1,1024,32) bf16": 22.0}, "default": {"(32,1,1024,32) bf16": 25.0}}
        rc = campaign.main(["--out", self.out, "tests", "ab:MLAJIT_TILES=32,64,4,2,1@32,1,1024,32,bf16"],
                           runner=self.fake_runner(medians))
        self.assertEqual(rc, 1)  # the tests stage failed; the A/B still ran
        self.assertEqual(len(self.calls), 5)
        with open(os.path.join(self.out, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual([s["stage"] for s in summary["stages"]], ["tests", "ab"])
        self.assertEqual(summary["stages"][0]["steps"][0]["status"], "failed (exit 1)")
        table = summary["stages"][1]["ab"]["table"]
        self.assertIn("| (32,1,1024,32) bf16 | 22.00 / 22.00 | 25.00 / 25.00 | -12.0 % "
                      "| 1980,1980 / 1890,1890 | 2.50e-03 FAILED / 2.10e-03 |", table)
        self.assertEqual(summary["settings"].get("MLAJIT_PDL"), "0")
        with open(os.path.join(self.out, "summary.md")) as f:
            md = f.read()
        self.assertIn("-12.0 %", md)
        self.assertRegex(md, r"\nsettings: (\S+ )*MLAJIT_PDL=0\b")
        self.assertIn("MLAJIT_TILES=32,64,4,2,1", md)

    def test_a_sweep_has_a_table_per_value_against_the_one_default(self):
        def run(argv, env, out_path, cwd, timeout):
            self.calls.append(argv)
            us = {"": 30.0, "MLA_P=1": 31.5, "MLA_P=2": 33.0}[env.get("MLAJIT_KERNEL_DEFINES", "")]
            with open(os.path.join(cwd, argv[argv.index("--json") + 1]), "w") as f:
                f.write(bench_json({"(4,4,8192,32) bf16": us}, 1980, 2.1e-3))
            return 0, 0.5
        rc = campaign.main(["--out", self.out, "sweep:MLAJIT_KERNEL_DEFINES=MLA_P=1|MLA_P=2"
                            "@4,4,8192,32,bf16"], runner=run)
        self.assertEqual(rc, 0)
        self.assertEqual(len(self.calls), 6)
        with open(os.path.join(self.out, "summary.json")) as f:
            tables = json.load(f)["stages"][0]["sweep"]["tables"]
        self.assertEqual([t["setting"] for t in tables],
                         ["MLAJIT_KERNEL_DEFINES=MLA_P=1", "MLAJIT_KERNEL_DEFINES=MLA_P=2"])
        self.assertIn("| (4,4,8192,32) bf16 | 31.50 / 31.50 | 30.00 / 30.00 | +5.0 % "
                      "| 1980,1980 / 1980,1980 | 2.10e-03 / 2.10e-03 |", tables[0]["table"])
        self.assertIn("+10.0 %", tables[1]["table"][2])
        with open(os.path.join(self.out, "summary.md")) as f:
            md = f.read()
        self.assertIn("`MLAJIT_KERNEL_DEFINES=MLA_P=2` against the default:", md)

    def test_unchecked_arms_say_so(self):
        # An ablation's arms run under --no-check: their bench JSON says
        # "checked": false, and the table says "unchecked", not FAILED.
        with open(os.path.join(self.out, "v.json"), "w") as f:
            f.write(bench_json({"(4,4,8192,32) bf16": 31.0}, 1980, 0, passed=False, checked=False))
        with open(os.path.join(self.out, "d.json"), "w") as f:
            f.write(bench_json({"(4,4,8192,32) bf16": 37.0}, 1980, 0, passed=False, checked=False))
        table = campaign.ab_table(self.out, [("variant", None, "v.json"), ("default", None, "d.json")])
        self.assertEqual(table[2], "| (4,4,8192,32) bf16 | 31.00 | 37.00 | -16.2 % | 1980 / 1980 "
                                   "| unchecked / unchecked |")

    def test_power_windows_add_joules_a_call_and_their_change(self):
        runs = []
        for r, (v_j, d_j) in enumerate([(0.1470, 0.1455), (0.1480, 0.1457)]):
            for arm, us, j in (("variant", 206.0, v_j), ("default", 205.0, d_j)):
                name = f"{arm}{r}.json"
                with open(os.path.join(self.out, name), "w") as f:
                    f.write(bench_json({"(64,1,8192,128) fp8_e4m3 a8": us}, 1485, 2e-3, joules=j))
                runs.append((arm, r + 1, name))
        table = campaign.ab_table(self.out, runs)
        self.assertIn("| mJ a call, variant / default | change |", table[0])
        self.assertEqual(table[2], "| (64,1,8192,128) fp8_e4m3 a8 | 206.00 / 206.00 "
                                   "| 205.00 / 205.00 | +0.5 % | 1485,1485 / 1485,1485 "
                                   "| 2.00e-03 / 2.00e-03 | 147.00 / 148.00 / 145.50 / 145.70 "
                                   "| +1.3 % |")

    def test_no_step_starts_once_the_budget_is_spent(self):
        rc = campaign.main(["--out", self.out, "--budget-s", "0.5", "probes", "tests"],
                           runner=self.fake_runner({}))
        self.assertEqual(rc, 0)
        self.assertEqual(self.calls, [])
        with open(os.path.join(self.out, "summary.json")) as f:
            steps = [s for st in json.load(f)["stages"] for s in st["steps"]]
        self.assertEqual([s["status"] for s in steps], ["skipped: budget spent"] * 2)

    def test_a_step_gets_at_most_what_is_left(self):
        campaign.main(["--out", self.out, "--budget-s", "100", "probes"],
                      runner=self.fake_runner({"default": {}, "variant": {}}))
        (_, _, timeout), = self.calls
        self.assertLessEqual(timeout, 100)
        self.assertGreater(timeout, 90)

    def test_a_command_past_its_time_is_killed(self):
        path = os.path.join(self.out, "slow.txt")
        rc, seconds = campaign.run_step(["sleep", "30"], {}, path, self.out, 0.5)
        self.assertEqual(rc, 124)
        self.assertLess(seconds, 10)
        with open(path) as f:
            self.assertIn("killed after", f.read())


if __name__ == "__main__":
    unittest.main()
