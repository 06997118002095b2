#!/usr/bin/env python3
"""One GPU measurement run, in stages, into one folder.

RESULTS.md's numbers come from runs like this one: build, the GPU tests, a
standing run of the suites, timelines of chosen cases, the probes, and A/B
comparisons of an environment setting (a tile shape, a template folder)
against the default. Each stage writes its output to its own file in the
output folder; summary.json and summary.md record the commit, the GPU, each
stage's command, exit status and seconds, and the A/B medians side by side.
A stage that fails does not stop the next. Commands run in the output
folder, so a setting that names a path (MLAJIT_TEMPLATE_DIR) needs an
absolute one. With --budget-s, a stage gets at
most what is left of the budget and none starts once it is spent, so a run
with a hard time limit still leaves its summary.

    tools/bench/campaign.py --out /tmp/run --budget-s 560 \\
        build tests standing:default,bf16 \\
        timeline:4,4,8192,32,bf16@seesaw timeline:32,4,1024,16,bf16@two-stage \\
        probes 'ab:MLAJIT_TILES=32,64,4,2,1@32,1,1024,32,bf16+16,1,1024,32,bf16'

Stages (ARGS after the first colon):
  build                 configure (CMake, Release; $MLAJIT_CMAKE_ARGS added)
                        and build into --build-dir
  tests[:REGEX]         ctest -L gpu (only tests matching REGEX), --test-jobs at once
  standing:SUITES       mlajit_bench --suite SUITES, table and JSON
  timeline:CASE@PATH    one stamped run of CASE (MLAJIT_TIMELINE=151, its own
                        cache under --scratch), read by grid_timeline.py and by timeline.py
                        --path PATH (ws, seesaw, two-stage, swap-ab)
  probes                the launch floor, chain floors and SM fill probes
  ab:ENV=V[;ENV=V]@CASE[+CASE]
                        the cases with and without the settings, alternating,
                        --rounds times each; medians side by side (and, with
                        --power-ms, joules a call: the sharper figure for
                        calls at the power limit, RESULTS.md v84-v85)
  sweep:ENV=V1|V2[|..][;ENV=V]@CASE[+CASE]
                        one A/B per value of the setting with alternatives,
                        all against one default arm: each round runs the
                        default, then each value (the other settings in every
                        value's arm); n + 1 runs a round instead of 2 n
  ablate:ENV=V[;..]@CASE[+CASE]
                        as ab, both arms unchecked: for settings that remove a
                        step (MLAJIT_KERNEL_DEFINES=MLA_ABLATE_...), whose
                        results are wrong by design
  schedule:SUITES       the host schedules and per-SM bounds (no GPU)
  ncu:CASE@KERNEL       Nsight Compute on one steady-state launch of CASE's
                        decode or merge kernel (KERNEL: decode, merge): speed
                        of light, memory, pipes, occupancy, warp stalls ($NCU, else
                        ncu on the PATH; clocks and caches left alone); the
                        report, its details, its per-instruction table and
                        that table per warp role (ncu_source.py)
Standard library only.
"""
import argparse
import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
TIMELINE_PATHS = ("ws", "seesaw", "two-stage", "swap-ab")
TIMELINE_LAUNCH = "151"  # the stamped launch: past the bench's warm-up calls
NCU_KERNELS = {"decode": "mla_decode_kernel", "merge": "mla_combine_kernel"}
# (ComputeWorkloadAnalysis and InstructionStats: the issue slots and the
# instruction mix, v69.)
NCU_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis",
                "InstructionStats", "Occupancy", "WarpStateStats", "SchedulerStats",
                "LaunchStats", "SourceCounters")
NCU_LAUNCH_SKIP = "50"  # a launch of the timed calls, past the first call's compile
# Every stall reason, as warps stalled per issued instruction (the sections
# name only the top one, and "no_instruction" (fetch, instruction-cache
# misses) is what tells a cold kernel's code from its data, RESULTS.md v57),
# and each pipe's busy share and share of the issued instructions (ALU, FMA,
# FMA heavy, FP16, LSU, XU, uniform, tensor; the sections give only the
# busiest pipe, v69). One regular expression, as ncu splits --metrics at
# commas.
NCU_METRICS = (r"regex:^(smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
               r"|sm__(inst_executed_pipe_|pipe_).*\.avg\.pct_of_peak_sustained_active)$")


class SpecError(ValueError):
    """A stage argument that cannot be run; the message names it."""


class Stage:
    """One step of the run: the commands it runs, in order, with their extra
    environment, and where each one's output goes."""

    def __init__(self, name, slug):
        self.name, self.slug = name, slug
        self.steps = []  # (argv, env, output file name, json file name or None)
        self.ab = None  # for an A/B stage: (settings, cases, [(arm, round, json)])
        self.sweep = None  # for a sweep stage: [(arm, its settings as text)] beside ab

    def add(self, argv, env=None, out=None, json_out=None):
        self.steps.append((argv, env or {}, out or self.slug + ".txt", json_out))


def slug_of(text):
    keep = "".join(c if c.isalnum() else "-" for c in text)
    return "-".join(p for p in keep.split("-") if p)[:60].rstrip("-")


def parse_settings(text, spec):
    settings = {}
    for item in text.split(";"):
        name, eq, value = item.partition("=")
        if not eq or not name or not name.replace("_", "").isalnum() or name[0].isdigit():
            raise SpecError(f"stage '{spec}': setting '{item}' is not NAME=VALUE")
        settings[name] = value
    return settings


def parse_cases(text, spec):
    cases = [c for c in text.split("+") if c]
    for c in cases:
        fields = c.split(",")
        if len(fields) < 4 or not all(f.isdigit() for f in fields[:4]):
            raise SpecError(f"stage '{spec}': case '{c}' is not B,Q_LEN,KV_LEN,HEADS[,...]")
    if not cases:
        raise SpecError(f"stage '{spec}': no case after '@'")
    return cases


def case_at(rest, spec, kind, what, choices):
    """(CASE, choice) of a stage's CASE@CHOICE argument; SpecError unless
    the case parses and the choice is one of `choices`."""
    case, at, choice = rest.partition("@")
    if not at or choice not in choices:
        raise SpecError(f"stage '{spec}': expected {kind}:CASE@{what}, {what} one of "
                        + ", ".join(choices))
    parse_cases(case, spec)
    return case, choice


def plan_stage(index, spec, args):
    """The Stage for one positional argument; SpecError if it is malformed."""
    kind, _, rest = spec.partition(":")
    bench = os.path.join(args.build_dir, "tools", "bench", "mlajit_bench")
    stage = Stage(kind, f"{index:02d}-{slug_of(spec)}")
    runs = ["--runs", str(args.runs)] if args.runs else []
    if args.power_ms:  # the bench's power windows (power.h) on every timed stage
        runs += ["--power-ms", f"{args.power_ms:g}"]
    if kind == "build":
        if rest:
            raise SpecError(f"stage '{spec}': build takes no arguments")
        extra = shlex.split(os.environ.get("MLAJIT_CMAKE_ARGS", ""))
        stage.add(["cmake", "-S", ROOT, "-B", args.build_dir, "-DCMAKE_BUILD_TYPE=Release"] + extra)
        stage.add(["cmake", "--build", args.build_dir, "-j", str(os.cpu_count() or 2)],
                  out=stage.slug + "-make.txt")
    elif kind == "tests":
        argv = ["ctest", "--test-dir", args.build_dir, "-L", "gpu", "--output-on-failure",
                "--timeout", "600", "-j", str(args.test_jobs)]
        stage.add(argv + (["-R", rest] if rest else []))
    elif kind in ("standing", "schedule"):
        if not rest:
            raise SpecError(f"stage '{spec}': expected {kind}:SUITES, e.g. {kind}:default,bf16")
        if kind == "standing":
            stage.add([bench, "--suite", rest, "--json", stage.slug + ".json"] + runs,
                      json_out=stage.slug + ".json")
        else:
            stage.add([bench, "--schedule", "sm_90a:132", "--suite", rest])
    elif kind == "timeline":
        case, path = case_at(rest, spec, kind, "PATH", TIMELINE_PATHS)
        run = stage.slug + "-run.txt"
        env = {"MLAJIT_TIMELINE": TIMELINE_LAUNCH,
               "MLAJIT_CACHE_DIR": os.path.join(args.scratch, stage.slug + "-cache")}
        stage.add([bench, "--case", case, "--no-check", "--runs", "20"], env=env, out=run)
        skip = ["--skip", "0"] if path in ("two-stage", "swap-ab") else []
        stage.add([sys.executable, os.path.join(BENCH_DIR, "timeline.py"), run, "--path", path]
                  + skip, out=stage.slug + "-cta.txt")
        stage.add([sys.executable, os.path.join(BENCH_DIR, "grid_timeline.py"), run],
                  out=stage.slug + "-grid.txt")
    elif kind == "probes":
        if rest:
            raise SpecError(f"stage '{spec}': probes takes no arguments")
        stage.add([bench, "--launch-floor", "--sm-fill", "--case", "4,1,64,16", "--json",
                   stage.slug + ".json"], json_out=stage.slug + ".json")
    elif kind in ("ab", "ablate"):
        settings_text, at, cases_text = rest.partition("@")
        if not at:
            raise SpecError(f"stage '{spec}': expected {kind}:ENV=VALUE[;ENV=VALUE]@CASE[+CASE]")
        settings = parse_settings(settings_text, spec)
        cases = parse_cases(cases_text, spec)
        case_args = [a for c in cases for a in ("--case", c)]
        if kind == "ablate":  # wrong results by design: both arms timed unchecked
            case_args.append("--no-check")
        stage.ab = (settings, cases, [])
        for r in range(args.rounds):
            for arm, env in (("variant", settings), ("default", {})):
                name = f"{stage.slug}-{arm}-{r + 1}"
                stage.add([bench] + case_args + runs + ["--json", name + ".json"], env=env,
                          out=name + ".txt", json_out=name + ".json")
                stage.ab[2].append((arm, r + 1, name + ".json"))
    elif kind == "sweep":
        settings_text, at, cases_text = rest.partition("@")
        if not at:
            raise SpecError(f"stage '{spec}': expected sweep:ENV=V1|V2[|..][;ENV=V]@CASE[+CASE]")
        settings = parse_settings(settings_text, spec)
        swept = [name for name, value in settings.items() if "|" in value]
        if len(swept) != 1:
            raise SpecError(f"stage '{spec}': expected one setting with values separated by '|', "
                            f"found {len(swept)}")
        name = swept[0]
        values = settings[name].split("|")
        if not all(values):
            raise SpecError(f"stage '{spec}': {name} has an empty value")
        cases = parse_cases(cases_text, spec)
        case_args = [a for c in cases for a in ("--case", c)]
        arms = [("default", {})] + [(f"value{i + 1}", dict(settings, **{name: v}))
                                    for i, v in enumerate(values)]
        stage.ab = (settings, cases, [])
        stage.sweep = [(arm, f"{name}={v}") for (arm, _), v in zip(arms[1:], values)]
        for r in range(args.rounds):
            for arm, env in arms:
                run = f"{stage.slug}-{arm}-{r + 1}"
                stage.add([bench] + case_args + runs + ["--json", run + ".json"], env=env,
                          out=run + ".txt", json_out=run + ".json")
                stage.ab[2].append((arm, r + 1, run + ".json"))
    elif kind == "ncu":
        case, which = case_at(rest, spec, kind, "KERNEL", NCU_KERNELS)
        sections = [a for name in NCU_SECTIONS for a in ("--section", name)]
        # Caches are left as the launch before left them: the merge reads
        # partials the decode has just written into L2, and ncu's default
        # flush before each pass would serve them from DRAM instead.
        ncu = os.environ.get("NCU", "ncu")
        stage.add([ncu, "--clock-control", "none", "--cache-control",
                   "none", "--kernel-name",
                   "regex:" + NCU_KERNELS[which], "--launch-skip", NCU_LAUNCH_SKIP,
                   "--launch-count", "1"] + sections + ["--metrics", NCU_METRICS]
                  + ["-f", "-o", stage.slug]
                  + [bench, "--case", case, "--no-check", "--runs", "100"])
        report = stage.slug + ".ncu-rep"
        stage.add([ncu, "--import", report, "--page", "details"], out=stage.slug + "-details.txt")
        # Per instruction: which warp role issues and stalls where (v64).
        stage.add([ncu, "--import", report, "--page", "source", "--csv", "--print-source", "sass"],
                  out=stage.slug + "-source.csv")
        stage.add([sys.executable, os.path.join(BENCH_DIR, "ncu_source.py"),
                   stage.slug + "-source.csv"], out=stage.slug + "-roles.txt")
    else:
        raise SpecError(f"stage '{spec}': unknown stage '{kind}' (build, tests, standing, "
                        "timeline, probes, ab, sweep, ablate, schedule, ncu)")
    return stage


def run_step(argv, env, out_path, cwd, timeout):
    """Runs one command, its output to out_path; (exit status, seconds).
    Past the timeout the whole process group is killed (status 124)."""
    start = time.monotonic()
    with open(out_path, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env=dict(os.environ, **env), start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = 124
            out.write(f"\n[campaign] killed after {timeout:.0f} s (the budget)\n")
    return rc, time.monotonic() - start


def cases_of(path):
    """{case name: (median µs, median SM MHz or None, rel. error, passed,
    mJ a call or None)} from one bench JSON; rel. error and passed are None
    for a case timed unchecked (--no-check), mJ where no power window ran."""
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for c in doc.get("cases", []):
        clocks = c.get("clocks") or {}
        power = c.get("power") or {}
        checked = c.get("checked", True)
        joules = power.get("joules_per_call")
        out[c["case"]] = (c["median_us"], clocks.get("sm_mhz_median"),
                          c.get("rel_err") if checked else None,
                          c.get("passed", True) if checked else None,
                          1e3 * joules if joules is not None else None)
    return out


def ab_table(out_dir, runs, variant="variant"):
    """Markdown rows: each case's medians per round for the arm `variant` and
    the default, the change of the variant's mean against the default's, each
    arm's SM clock (a change of clock between the arms is not the kernel's)
    and its largest relative error against the CPU reference; where the runs
    had power windows, each round's mJ a call and the change of their mean."""
    per = {}  # case -> arm -> [(median, MHz, rel. error, passed) per round]
    for arm, _, name in runs:
        path = os.path.join(out_dir, name)
        if not os.path.exists(path):
            continue
        for case, result in cases_of(path).items():
            per.setdefault(case, {}).setdefault(arm, []).append(result)
    energy = any(r[4] is not None for arms in per.values() for rs in arms.values() for r in rs)
    rows = ["| case | variant (µs, each round) | default | change | MHz, variant / default "
            "| rel. error, variant / default |" + (" mJ a call, variant / default | change |"
                                                    if energy else ""),
            "|---|---|---|---:|---|---|" + ("---|---:|" if energy else "")]
    for case, arms in per.items():
        v, d = arms.get(variant, []), arms.get("default", [])
        mean = lambda xs, i=0: sum(x[i] for x in xs) / len(xs)
        change = f"{100 * (mean(v) / mean(d) - 1):+.1f} %" if v and d else "-"
        fmt = lambda xs: " / ".join(f"{x[0]:.2f}" for x in xs) or "-"
        mhz = lambda xs: ",".join(str(x[1]) for x in xs if x[1] is not None) or "-"

        def err(xs):
            if xs and all(x[3] is None for x in xs):
                return "unchecked"
            errors = [x[2] for x in xs if x[2] is not None]
            failed = " FAILED" if any(x[3] is False for x in xs) else ""
            return (f"{max(errors):.2e}" if errors else "-") + failed

        row = (f"| {case} | {fmt(v)} | {fmt(d)} | {change} | {mhz(v)} / {mhz(d)} "
               f"| {err(v)} / {err(d)} |")
        if energy:
            mj = lambda xs: " / ".join(f"{x[4]:.2f}" for x in xs if x[4] is not None) or "-"
            with_mj = lambda xs: [x for x in xs if x[4] is not None]
            ev, ed = with_mj(v), with_mj(d)
            mj_change = (f"{100 * (mean(ev, 4) / mean(ed, 4) - 1):+.1f} %" if ev and ed else "-")
            row += f" {mj(v)} / {mj(d)} | {mj_change} |"
        rows.append(row)
    return rows


def describe_machine():
    """The commit and the GPU, as far as this machine can tell."""
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    commit = os.environ.get("MLAJIT_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = ""
    info["commit"] = commit or "unknown (set MLAJIT_COMMIT)"
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        gpu = ""
    info["gpu"] = gpu or "none found"
    # The library's own settings in force for every stage (a stage's A/B
    # settings are recorded with its commands).
    info["settings"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("MLAJIT_")}
    return info


def main(argv=None, runner=run_step):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("stages", nargs="+", help="stages, in order (below)")
    ap.add_argument("--out", required=True, help="folder for every output and the summary")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "mlajit-campaign"),
                    help="for what is not a result, such as the stamped kernels' cache")
    ap.add_argument("--budget-s", type=float, default=0, help="wall-clock budget (0: none)")
    ap.add_argument("--rounds", type=int, default=2, help="A/B rounds per arm (2)")
    ap.add_argument("--runs", type=int, default=0, help="timed calls per case (bench default)")
    ap.add_argument("--power-ms", type=float, default=0,
                    help="also each case's power window of MS ms (mlajit_bench --power-ms; "
                         "0: none)")
    ap.add_argument("--test-jobs", type=int, default=1,
                    help="GPU tests run at once (1); their kernel compiles are most of their time")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.test_jobs < 1 or args.runs < 0 or args.budget_s < 0:
        ap.error(f"--rounds {args.rounds} / --test-jobs {args.test_jobs} / --runs {args.runs} / "
                 f"--budget-s {args.budget_s}: expected rounds and test jobs >= 1 and no "
                 "negative value")
    if args.power_ms and not 100 <= args.power_ms <= 60000:
        ap.error(f"--power-ms {args.power_ms:g}: expected 0 (none) or 100..60000")
    args.out = os.path.abspath(args.out)
    args.build_dir = os.path.abspath(args.build_dir)
    args.scratch = os.path.abspath(args.scratch)
    try:
        stages = [plan_stage(i + 1, s, args) for i, s in enumerate(args.stages)]
    except SpecError as e:
        ap.error(str(e))

    if args.dry_run:
        for st in stages:
            for argv_, env, out, _ in st.steps:
                prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
                print(f"[{st.name}] {prefix + ' ' if prefix else ''}{shlex.join(argv_)} > {out}")
        return 0

    os.makedirs(args.out, exist_ok=True)
    summary = describe_machine()
    summary["stages"] = []
    start = time.monotonic()
    failed = False
    for st in stages:
        record = {"stage": st.name, "slug": st.slug, "steps": []}
        for argv_, env, out, json_out in st.steps:
            left = args.budget_s - (time.monotonic() - start) if args.budget_s else None
            step = {"argv": argv_, "env": env, "output": out, "json": json_out}
            if left is not None and left <= 1:
                step["status"] = "skipped: budget spent"
                record["steps"].append(step)
                continue
            rc, seconds = runner(argv_, env, os.path.join(args.out, out), args.out, left)
            step.update(rc=rc, seconds=round(seconds, 1),
                        status="passed" if rc == 0 else f"failed (exit {rc})")
            failed |= rc != 0
            record["steps"].append(step)
        if st.sweep:
            record["sweep"] = {"settings": st.ab[0], "cases": st.ab[1],
                               "tables": [{"arm": arm, "setting": setting,
                                           "table": ab_table(args.out, st.ab[2], arm)}
                                          for arm, setting in st.sweep]}
        elif st.ab:
            record["ab"] = {"settings": st.ab[0], "cases": st.ab[1],
                            "table": ab_table(args.out, st.ab[2])}
        summary["stages"].append(record)
        write_summary(args.out, summary)  # after each stage: a killed run keeps what it has
    return 1 if failed else 0


def write_summary(out_dir, summary):
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    lines = [f"# Measurement run, {summary['date']}", "",
             f"commit {summary['commit']}; GPU: {summary['gpu']}",
             "settings: " + (" ".join(f"{k}={v}" for k, v in summary["settings"].items()) or "none"),
             ""]
    for st in summary["stages"]:
        lines.append(f"## {st['slug']}")
        for step in st["steps"]:
            env = " ".join(f"{k}={v}" for k, v in step["env"].items())
            took = f", {step['seconds']} s" if "seconds" in step else ""
            lines.append(f"- `{(env + ' ') if env else ''}{shlex.join(step['argv'])}`: "
                         f"{step['status']}{took} -> {step['output']}")
        if "ab" in st:
            lines += [""] + st["ab"]["table"]
        for t in st.get("sweep", {}).get("tables", []):
            lines += ["", f"`{t['setting']}` against the default:", ""] + t["table"]
        lines.append("")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
