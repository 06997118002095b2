"""CPU tests of the Python bindings: no GPU, torch or numpy needed.

Run from the repository root:

    MLAJIT_LIBRARY=build/src/api/libmlajit.so python3 -m unittest discover \
        -s tools/python/tests -p test_cpu.py

Tests that need the library skip with a reason when it cannot be loaded;
ctest (python_binding_cpu) points MLAJIT_LIBRARY at the build, so there they run.
Parts specific to torch or numpy skip when those are not installed.
"""

import array
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)                       # tools/python
REPO = os.path.dirname(os.path.dirname(PACKAGE_ROOT))      # repository root
if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)

import mlajit  # noqa: E402
from mlajit import _lib, _runtime, _tensors  # noqa: E402


def _have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


HAVE_NUMPY = _have("numpy")
HAVE_TORCH = _have("torch")


def _library_problem():
    try:
        mlajit.library_path()
        return None
    except mlajit.LibraryNotFoundError as e:
        return str(e)


LIBRARY_PROBLEM = _library_problem()
needs_library = unittest.skipIf(LIBRARY_PROBLEM is not None,
                                "libmlajit not loadable (set MLAJIT_LIBRARY): %s" % LIBRARY_PROBLEM)


def _project_version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*mlajit\s+VERSION\s+([0-9.]+)", f.read())
    return m.group(1) if m else None


class _TempCacheEnv(unittest.TestCase):
    """Points the default kernel cache at a fresh temp dir for each test."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mlajit-py-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        old = os.environ.get("MLAJIT_CACHE_DIR")
        os.environ["MLAJIT_CACHE_DIR"] = os.path.join(self.tmp, "default-cache")

        def restore():
            if old is None:
                os.environ.pop("MLAJIT_CACHE_DIR", None)
            else:
                os.environ["MLAJIT_CACHE_DIR"] = old
        self.addCleanup(restore)


class ImportTest(unittest.TestCase):
    def _run(self, code, env_extra):
        env = dict(os.environ)
        env.update(env_extra)
        env["PYTHONPATH"] = PACKAGE_ROOT
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                              capture_output=True, text=True, timeout=120)

    def test_import_needs_no_library_torch_or_numpy(self):
        missing = os.path.join(tempfile.gettempdir(), "no-such-dir", "libmlajit.so")
        r = self._run("""
            import sys
            import mlajit
            assert "torch" not in sys.modules and "numpy" not in sys.modules, "imported torch/numpy"
            try:
                mlajit.version()
            except mlajit.LibraryNotFoundError as e:
                print("ERROR:", e)
            else:
                raise SystemExit("version() worked without a library")
        """, {"MLAJIT_LIBRARY": missing})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ERROR: cannot load libmlajit", r.stdout)
        self.assertIn(missing, r.stdout)          # names the path tried
        self.assertIn("MLAJIT_LIBRARY", r.stdout)  # and how to fix it

    def test_search_order_lists_every_candidate(self):
        saved = os.environ.pop("MLAJIT_LIBRARY", None)
        try:
            tried = [path for _, path in _lib._candidates()]
        finally:
            if saved is not None:
                os.environ["MLAJIT_LIBRARY"] = saved
        pkg = os.path.join(PACKAGE_ROOT, "mlajit")
        self.assertEqual(tried[0], os.path.join(pkg, "libmlajit.so.0"))
        self.assertIn(os.path.join(REPO, "build", "src", "api", "libmlajit.so.0"), tried)
        self.assertEqual(tried[-2:], ["libmlajit.so.0", "libmlajit.so"])

    def test_env_var_is_the_only_candidate_when_set(self):
        saved = os.environ.get("MLAJIT_LIBRARY")
        os.environ["MLAJIT_LIBRARY"] = "/x/libmlajit.so"
        try:
            self.assertEqual([p for _, p in _lib._candidates()], ["/x/libmlajit.so"])
        finally:
            if saved is None:
                os.environ.pop("MLAJIT_LIBRARY")
            else:
                os.environ["MLAJIT_LIBRARY"] = saved


class ErrorTest(unittest.TestCase):
    def test_error_carries_status_and_message(self):
        e = mlajit.MlajitError(9, "no GPU", "mlajit_runtime_create")
        self.assertIs(e.code, mlajit.Status.FAILED_PRECONDITION)
        self.assertEqual(e.status, "FAILED_PRECONDITION")
        self.assertEqual(e.message, "no GPU")
        self.assertEqual(str(e), "mlajit_runtime_create: FAILED_PRECONDITION: no GPU")
        self.assertEqual(mlajit.MlajitError(99, "x").status, "STATUS_99")

    def test_status_values_match_the_header(self):
        with open(os.path.join(REPO, "include", "mlajit", "mlajit.h")) as f:
            header = f.read()
        found = dict(re.findall(r"MLAJIT_STATUS_([A-Z_]+) = (\d+)", header))
        self.assertEqual({s.name: s.value for s in mlajit.Status},
                         {k: int(v) for k, v in found.items()})
        for enum_type, prefix in ((mlajit.KvFormat, "KV_FORMAT"), (mlajit.QMode, "Q_MODE"),
                                  (mlajit.LogLevel, "LOG_LEVEL")):
            found = dict(re.findall(r"MLAJIT_%s_([A-Z0-9_]+) = (\d+)" % prefix, header))
            self.assertEqual({s.name: s.value for s in enum_type},
                             {k: int(v) for k, v in found.items()}, prefix)


# ---- struct layout against the C compiler ----------------------------------

_STRUCTS = {
    "mlajit_cache_options_t": _lib.CacheOptions,
    "mlajit_cache_prune_options_t": _lib.CachePruneOptions,
    "mlajit_warm_progress_t": _lib.WarmProgress,
    "mlajit_runtime_options_t": _lib.RuntimeOptions,
    "mlajit_plan_config_t": _lib.PlanConfig,
    "mlajit_plan_limits_t": _lib.PlanLimits,
    "mlajit_decode_args_t": _lib.DecodeArgs,
    "mlajit_tune_options_t": _lib.TuneOptions,
}


def _layout_program():
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "mlajit/mlajit.h"',
             "int main(void) {"]
    for cname, py in _STRUCTS.items():
        lines.append('  printf("%s sizeof %%zu\\n", sizeof(%s));' % (cname, cname))
        for field, _ in py._fields_:
            lines.append('  printf("%s %s %%zu\\n", offsetof(%s, %s));'
                         % (cname, field, cname, field))
    # The _INIT macros: the mirrors' constructors must give the same defaults.
    lines += [
        "  { mlajit_plan_config_t c = MLAJIT_PLAN_CONFIG_INIT;",
        '    printf("init plan_config %u %d %d %d %d %g %d %d\\n", c.struct_size, c.num_heads,',
        "           (int)c.kv_format, (int)c.q_mode, c.causal, c.sm_scale, c.page_size, c.write_lse); }",
        "  { mlajit_decode_args_t a = MLAJIT_DECODE_ARGS_INIT;",
        '    printf("init decode_args %u %g %d\\n", a.struct_size, a.kv_scale,',
        "           a.q == NULL && a.kv == NULL && a.out == NULL && a.lse == NULL && a.kv_bytes == 0); }",
        "  { mlajit_cache_prune_options_t p = MLAJIT_CACHE_PRUNE_OPTIONS_INIT;",
        '    printf("init prune %u %lld %lld %d\\n", p.struct_size, (long long)p.max_bytes,',
        "           (long long)p.older_than_s, p.stale); }",
        "  { mlajit_runtime_options_t r = MLAJIT_RUNTIME_OPTIONS_INIT;",
        '    printf("init runtime %u %d\\n", r.struct_size, r.device_index); }',
        "  { mlajit_plan_limits_t l = MLAJIT_PLAN_LIMITS_INIT;",
        '    printf("init limits %u %d %d %d\\n", l.struct_size, l.max_batch_size, l.max_q_len,',
        "           l.kv_len_hint); }",
        "  { mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;",
        '    printf("init cache %u\\n", o.struct_size); }',
        "  { mlajit_tune_options_t t = MLAJIT_TUNE_OPTIONS_INIT;",
        '    printf("init tune %u %d %d %d %d\\n", t.struct_size, t.warmup_calls, t.timed_calls,',
        "           t.persist, t.device_plans); }",
        "  return 0;", "}"]
    return "\n".join(lines) + "\n"


class StructLayoutTest(unittest.TestCase):
    """Compiles a C program against include/mlajit/mlajit.h and compares every
    struct's size and field offsets with the ctypes mirrors."""

    @classmethod
    def setUpClass(cls):
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            raise unittest.SkipTest("no C compiler (cc, gcc, clang) to check the struct layout")
        tmp = tempfile.mkdtemp(prefix="mlajit-layout-")
        try:
            src = os.path.join(tmp, "layout.c")
            exe = os.path.join(tmp, "layout")
            with open(src, "w") as f:
                f.write(_layout_program())
            r = subprocess.run([cc, "-std=c99", "-Wall", "-I", os.path.join(REPO, "include"),
                                src, "-o", exe], capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                raise AssertionError("compiling the layout probe failed:\n" + r.stderr)
            out = subprocess.run([exe], capture_output=True, text=True, check=True,
                                 timeout=60).stdout
        finally:
            shutil.rmtree(tmp, True)
        cls.values = {}
        cls.inits = {}
        for line in out.splitlines():
            parts = line.split()
            if parts[0] == "init":
                cls.inits[parts[1]] = parts[2:]
            else:
                cls.values[(parts[0], parts[1])] = int(parts[2])

    def test_sizes(self):
        for cname, py in _STRUCTS.items():
            self.assertEqual(ctypes.sizeof(py), self.values[(cname, "sizeof")], cname)

    def test_field_offsets(self):
        for cname, py in _STRUCTS.items():
            for field, _ in py._fields_:
                self.assertEqual(getattr(py, field).offset, self.values[(cname, field)],
                                 "%s.%s" % (cname, field))

    def test_defaults_match_the_init_macros(self):
        c = _lib.PlanConfig()
        self.assertEqual(self.inits["plan_config"],
                         [str(c.struct_size), str(c.num_heads), str(c.kv_format), str(c.q_mode),
                          str(c.causal), "%g" % c.sm_scale, str(c.page_size), str(c.write_lse)])
        a = _lib.DecodeArgs()
        self.assertEqual(self.inits["decode_args"], [str(a.struct_size), "%g" % a.kv_scale, "1"])
        self.assertTrue(a.q is None and a.kv is None and a.out is None and a.lse is None)
        p = _lib.CachePruneOptions()
        self.assertEqual(self.inits["prune"],
                         [str(p.struct_size), str(p.max_bytes), str(p.older_than_s), str(p.stale)])
        r = _lib.RuntimeOptions()
        self.assertEqual(self.inits["runtime"], [str(r.struct_size), str(r.device_index)])
        self.assertEqual(self.inits["cache"], [str(_lib.CacheOptions().struct_size)])
        lim = _lib.PlanLimits()
        self.assertEqual(self.inits["limits"],
                         [str(lim.struct_size), str(lim.max_batch_size), str(lim.max_q_len),
                          str(lim.kv_len_hint)])
        t = _lib.TuneOptions()
        self.assertEqual(self.inits["tune"], [str(t.struct_size), str(t.warmup_calls),
                                              str(t.timed_calls), str(t.persist),
                                              str(t.device_plans)])


# ---- the library ------------------------------------------------------------

@needs_library
class LibraryTest(_TempCacheEnv):
    def test_version(self):
        v = mlajit.version()
        self.assertRegex(v, r"^\d+\.\d+\.\d+$")
        expected = _project_version()
        if expected:
            self.assertEqual(v, expected)

    def test_runtime_without_gpu_fails_precondition(self):
        try:
            rt = mlajit.Runtime()
        except mlajit.MlajitError as e:
            self.assertEqual(e.code, mlajit.Status.FAILED_PRECONDITION, str(e))
            self.assertEqual(e.status, "FAILED_PRECONDITION")
            self.assertEqual(e.function, "mlajit_runtime_create")
            self.assertTrue(e.message.strip(), "empty message")
            self.assertIn("FAILED_PRECONDITION", str(e))
        else:
            rt.close()
            self.skipTest("a GPU is present: Runtime() succeeded on %s" % rt.device)

    def test_c_errors_raise_with_the_last_error(self):
        # mlajit_plan_create rejects a null runtime before touching anything else.
        lib = _lib.lib()
        handle = ctypes.c_void_p()
        cfg = _lib.PlanConfig(num_heads=16, sm_scale=0.07)
        qo = (ctypes.c_int32 * 2)(0, 1)
        status = lib.mlajit_plan_create(None, ctypes.byref(cfg), 1, qo, qo, None,
                                        ctypes.byref(handle))
        with self.assertRaises(mlajit.MlajitError) as cm:
            _lib.check(status, "mlajit_plan_create")
        self.assertEqual(cm.exception.code, mlajit.Status.INVALID_ARGUMENT)
        self.assertIn("runtime is null", cm.exception.message)
        self.assertIsNone(handle.value)

    def test_tune_and_describe_errors_raise_with_the_last_error(self):
        # Both reject a null handle before touching anything else; the JSON
        # helper raises through _lib.check with the function's name.
        cfg = _lib.PlanConfig(num_heads=16, sm_scale=0.07)
        qo = (ctypes.c_int32 * 2)(0, 1)
        opts = _lib.TuneOptions()
        with self.assertRaises(mlajit.MlajitError) as cm:
            _runtime.json_call("mlajit_tune", None, ctypes.byref(cfg), 1, qo, qo, None,
                                ctypes.byref(opts))
        self.assertEqual(cm.exception.code, mlajit.Status.INVALID_ARGUMENT)
        self.assertEqual(cm.exception.function, "mlajit_tune")
        self.assertIn("runtime is null", cm.exception.message)
        with self.assertRaises(mlajit.MlajitError) as cm:
            _runtime.json_call("mlajit_plan_describe_json", None)
        self.assertEqual(cm.exception.code, mlajit.Status.INVALID_ARGUMENT)
        self.assertEqual(cm.exception.function, "mlajit_plan_describe_json")
        self.assertIn("plan is null", cm.exception.message)

    def test_cache_stats_on_an_empty_dir(self):
        stats = mlajit.cache_stats(self.tmp)
        self.assertIsInstance(stats, dict)
        self.assertEqual(stats["entries"], 0)
        self.assertEqual(stats["bytes"], 0)
        self.assertEqual(os.path.realpath(stats["cache_dir"]), os.path.realpath(self.tmp))
        # A path-like works too.
        import pathlib
        self.assertEqual(mlajit.cache_stats(pathlib.Path(self.tmp))["entries"], 0)

    def test_cache_handle_calls(self):
        with mlajit.Cache(self.tmp) as c:
            self.assertEqual(c.list()["entries"], [])
            bad, report = c.verify()
            self.assertEqual(bad, 0)
            self.assertIsInstance(report, dict)
            self.assertEqual(c.prune(stale=True)["removed"], 0)
            self.assertEqual(c.clear(), 0)
            with self.assertRaises(mlajit.MlajitError) as cm:
                c.show("0" * 32)
            self.assertEqual(cm.exception.code, mlajit.Status.NOT_FOUND)
            with self.assertRaises(mlajit.MlajitError) as cm:
                c.show("xyz")
            self.assertEqual(cm.exception.code, mlajit.Status.INVALID_ARGUMENT)
            self.assertIn("xyz", cm.exception.message)
        with self.assertRaises(ValueError):
            c.stats()  # closed

    def test_cache_prune_needs_a_criterion(self):
        with self.assertRaises(mlajit.MlajitError) as cm:
            mlajit.cache_prune(self.tmp)
        self.assertEqual(cm.exception.code, mlajit.Status.INVALID_ARGUMENT)

    def test_cache_warm_empty_and_missing_manifest(self):
        manifest = os.path.join(self.tmp, "empty.jsonl")
        open(manifest, "w").close()
        summary = mlajit.cache_warm(manifest, "sm_90a", jobs=1, cache_dir=self.tmp)
        self.assertEqual((summary["total"], summary["failed"]), (0, 0))
        with self.assertRaises(mlajit.MlajitError) as cm:
            mlajit.cache_warm(os.path.join(self.tmp, "missing.jsonl"), "sm_90a",
                              cache_dir=self.tmp)
        self.assertEqual(cm.exception.code, mlajit.Status.NOT_FOUND)
        self.assertIn("missing.jsonl", cm.exception.message)

    def test_log_handler_receives_lines(self):
        # A malformed boolean in the environment makes opening a cache warn.
        code = textwrap.dedent("""
            import json, sys, mlajit
            lines = []
            mlajit.set_log_handler(lambda level, line: lines.append([level.name, line]))
            mlajit.cache_stats(sys.argv[1])
            mlajit.set_log_handler(None)
            print(json.dumps(lines))
        """)
        env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT, MLAJIT_SAVE_SOURCE="maybe")
        env["MLAJIT_LIBRARY"] = mlajit.library_path()
        r = subprocess.run([sys.executable, "-c", code, self.tmp], env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertTrue(any(level == "WARN" and "MLAJIT_SAVE_SOURCE" in line
                            for level, line in lines), lines)
        self.assertNotIn("MLAJIT_SAVE_SOURCE", r.stderr)  # routed to the handler instead

    def test_log_handler_rejects_non_callables(self):
        with self.assertRaises(TypeError):
            mlajit.set_log_handler(42)


# ---- Python-side validation (no library call) --------------------------------

def _closed_runtime():
    """A Runtime object without a handle: plan() validates, then reports it closed."""
    return mlajit.Runtime.__new__(mlajit.Runtime)


_GOOD = dict(num_heads=16, sm_scale=0.0721688)


class PlanValidationTest(unittest.TestCase):
    def assertRaisesWith(self, exc, fragments, fn, *args, **kwargs):
        with self.assertRaises(exc) as cm:
            fn(*args, **kwargs)
        for f in fragments:
            self.assertIn(f, str(cm.exception))
        return cm.exception

    def test_bad_kv_format(self):
        self.assertRaisesWith(ValueError, ["kv_format='fp16'", "'fp8_e4m3'", "'mxfp4'", "'bf16'"],
                              _closed_runtime().plan, [0, 1], [0, 5], kv_format="fp16", **_GOOD)

    def test_bad_q_mode(self):
        self.assertRaisesWith(ValueError, ["q_mode='int8'"], _closed_runtime().plan, [0, 1],
                              [0, 5], q_mode="int8", **_GOOD)

    def test_indptr_lengths(self):
        self.assertRaisesWith(ValueError, ["kv_indptr has 2 entries", "expected 3"],
                              _closed_runtime().plan, [0, 1, 2], [0, 5], **_GOOD)
        self.assertRaisesWith(ValueError, ["qo_indptr is empty"], _closed_runtime().plan, [], [],
                              **_GOOD)

    def test_kv_lens(self):
        self.assertRaisesWith(ValueError, ["kv_lens has 1 entries", "batch_size=2"],
                              _closed_runtime().plan, [0, 1, 2], [0, 1, 2], page_size=64,
                              kv_lens=[3], **_GOOD)
        self.assertRaisesWith(ValueError, ["kv_lens given with page_size=0"],
                              _closed_runtime().plan, [0, 1], [0, 5], kv_lens=[5], **_GOOD)

    def test_scalars(self):
        rt = _closed_runtime()
        self.assertRaisesWith(ValueError, ["num_heads=0", "1..128"], rt.plan, [0, 1], [0, 5],
                              num_heads=0, sm_scale=0.1)
        self.assertRaisesWith(ValueError, ["num_heads=129"], rt.plan, [0, 1], [0, 5],
                              num_heads=129, sm_scale=0.1)
        self.assertRaisesWith(TypeError, ["num_heads=16.0"], rt.plan, [0, 1], [0, 5],
                              num_heads=16.0, sm_scale=0.1)
        self.assertRaisesWith(ValueError, ["sm_scale=0"], rt.plan, [0, 1], [0, 5], num_heads=16,
                              sm_scale=0)
        self.assertRaisesWith(ValueError, ["sm_scale=nan"], rt.plan, [0, 1], [0, 5],
                              num_heads=16, sm_scale=float("nan"))
        self.assertRaisesWith(ValueError, ["page_size=8"], rt.plan, [0, 1], [0, 5], page_size=8,
                              **_GOOD)
        with self.assertRaises(TypeError):  # sm_scale is a required keyword
            rt.plan([0, 1], [0, 5], num_heads=16)

    def test_indptr_values(self):
        rt = _closed_runtime()
        self.assertRaisesWith(TypeError, ["qo_indptr[1]=1.5", "expected an int"], rt.plan,
                              [0, 1.5], [0, 5], **_GOOD)
        self.assertRaisesWith(ValueError, ["kv_indptr[1]=4294967296", "int32"], rt.plan,
                              [0, 1], [0, 2 ** 32], **_GOOD)
        self.assertRaisesWith(TypeError, ["qo_indptr has type str"], rt.plan, "01", [0, 5],
                              **_GOOD)
        self.assertRaisesWith(TypeError, ["qo_indptr[0]=True"], rt.plan, [True, 1], [0, 5],
                              **_GOOD)

    def test_valid_arguments_reach_the_runtime_check(self):
        rt = _closed_runtime()
        for qo, kv in (([0, 1, 3], [0, 100, 250]), ((0, 1), range(0, 10, 9)),
                       (array.array("i", [0, 2]), array.array("q", [0, 7]))):
            self.assertRaisesWith(ValueError, ["runtime is closed"], rt.plan, qo, kv, **_GOOD)
        rt.close()  # idempotent on a closed runtime
        self.assertEqual(repr(rt), "<mlajit.Runtime closed>")

    def test_prepared_config(self):
        cfg, batch, qo, kv, lens = _runtime.prepare_plan(
            [0, 1, 3], [0, 2, 3], 128, "mxfp4", "fp8", False, 0.5, 64, [100, 30], True)
        self.assertEqual(batch, 2)
        self.assertEqual(list(qo), [0, 1, 3])
        self.assertEqual(list(kv), [0, 2, 3])
        self.assertEqual(list(lens), [100, 30])
        self.assertEqual((cfg.struct_size, cfg.num_heads, cfg.kv_format, cfg.q_mode, cfg.causal,
                          cfg.sm_scale, cfg.page_size, cfg.write_lse),
                         (ctypes.sizeof(_lib.PlanConfig), 128, 2, 1, 0, 0.5, 64, 1))
        cfg = _runtime.prepare_plan([0], [0], 1, mlajit.KvFormat.BF16, "bf16", True, 1.0, 0,
                                    None, False)[0]
        self.assertEqual((cfg.kv_format, cfg.q_mode, cfg.causal), (0, 0, 1))

    @unittest.skipUnless(HAVE_NUMPY, "numpy is not installed")
    def test_numpy_indptr(self):
        import numpy as np
        qo = _tensors.host_int32(np.array([0, 1, 2], dtype=np.int64), "qo_indptr")
        self.assertEqual(list(qo), [0, 1, 2])
        kv = _tensors.host_int32(np.arange(0, 30, 10, dtype=np.int32)[::1], "kv_indptr")
        self.assertEqual(list(kv), [0, 10, 20])
        strided = _tensors.host_int32(np.arange(6, dtype=np.int32)[::2], "kv_indptr")
        self.assertEqual(list(strided), [0, 2, 4])
        with self.assertRaises(TypeError):
            _tensors.host_int32(np.zeros(3, dtype=np.float32), "qo_indptr")
        with self.assertRaises(ValueError):
            _tensors.host_int32(np.zeros((2, 2), dtype=np.int32), "qo_indptr")

    @unittest.skipUnless(HAVE_TORCH, "torch is not installed")
    def test_torch_indptr(self):
        import torch
        self.assertEqual(list(_tensors.host_int32(torch.tensor([0, 3, 9], dtype=torch.int32),
                                                  "qo_indptr")), [0, 3, 9])
        self.assertEqual(list(_tensors.host_int32(torch.tensor([0, 3, 9]), "qo_indptr")),
                         [0, 3, 9])
        t = torch.arange(8, dtype=torch.int32)[::2]
        self.assertEqual(list(_tensors.host_int32(t, "kv_indptr")), [0, 2, 4, 6])
        with self.assertRaises(TypeError):
            _tensors.host_int32(torch.zeros(3), "qo_indptr")
        with self.assertRaises(ValueError):
            _tensors.host_int32(torch.zeros(2, 2, dtype=torch.int32), "qo_indptr")


class TuneValidationTest(unittest.TestCase):
    """Runtime.tune checks its layout arguments as plan() does, then its options."""

    def check(self, exc, fragments, *args, **kwargs):
        with self.assertRaises(exc) as cm:
            _closed_runtime().tune(*args, **kwargs)
        for f in fragments:
            self.assertIn(f, str(cm.exception))

    def test_plan_arguments(self):
        self.check(ValueError, ["kv_format='fp16'", "'fp8_e4m3'"], [0, 1], [0, 5],
                   kv_format="fp16", **_GOOD)
        self.check(ValueError, ["q_mode='int8'"], [0, 1], [0, 5], q_mode="int8", **_GOOD)
        self.check(ValueError, ["kv_indptr has 2 entries", "expected 3"], [0, 1, 2], [0, 5],
                   **_GOOD)
        self.check(ValueError, ["qo_indptr is empty"], [], [], **_GOOD)
        self.check(ValueError, ["kv_lens has 1 entries", "batch_size=2"], [0, 1, 2], [0, 1, 2],
                   page_size=64, kv_lens=[3], **_GOOD)
        self.check(ValueError, ["kv_lens given with page_size=0"], [0, 1], [0, 5], kv_lens=[5],
                   **_GOOD)
        self.check(ValueError, ["num_heads=129", "1..128"], [0, 1], [0, 5], num_heads=129,
                   sm_scale=0.1)
        self.check(ValueError, ["sm_scale=nan"], [0, 1], [0, 5], num_heads=16,
                   sm_scale=float("nan"))
        self.check(ValueError, ["page_size=8"], [0, 1], [0, 5], page_size=8, **_GOOD)
        self.check(TypeError, ["qo_indptr[1]=1.5", "expected an int"], [0, 1.5], [0, 5], **_GOOD)
        with self.assertRaises(TypeError):  # sm_scale is a required keyword
            _closed_runtime().tune([0, 1], [0, 5], num_heads=16)

    def test_options(self):
        self.check(ValueError, ["warmup_calls=-1", "0..1000"], [0, 1], [0, 5], warmup_calls=-1,
                   **_GOOD)
        self.check(ValueError, ["warmup_calls=1001"], [0, 1], [0, 5], warmup_calls=1001, **_GOOD)
        self.check(ValueError, ["timed_calls=0", "1..10000"], [0, 1], [0, 5], timed_calls=0,
                   **_GOOD)
        self.check(ValueError, ["timed_calls=10001"], [0, 1], [0, 5], timed_calls=10001,
                   **_GOOD)
        self.check(TypeError, ["timed_calls=2.5", "expected an int"], [0, 1], [0, 5],
                   timed_calls=2.5, **_GOOD)
        self.check(TypeError, ["warmup_calls=True"], [0, 1], [0, 5], warmup_calls=True, **_GOOD)

    def test_valid_arguments_reach_the_runtime_check(self):
        self.check(ValueError, ["runtime is closed"], [0, 1, 3], [0, 100, 250], warmup_calls=0,
                   timed_calls=1, persist=False, **_GOOD)
        self.check(ValueError, ["runtime is closed"], [0, 1], [0, 2], page_size=64, kv_lens=[100],
                   **_GOOD)

    def test_prepared_options(self):
        o = _runtime.prepare_tune_options(0, 7, False)
        self.assertEqual((o.struct_size, o.warmup_calls, o.timed_calls, o.persist),
                         (ctypes.sizeof(_lib.TuneOptions), 0, 7, 0))
        o = _runtime.prepare_tune_options(5, 50, True)
        self.assertEqual((o.warmup_calls, o.timed_calls, o.persist, o.device_plans), (5, 50, 1, 0))
        o = _runtime.prepare_tune_options(5, 50, True, device_plans=True)
        self.assertEqual(o.device_plans, 1)


class _FakeDeviceArray:
    """Just enough of __cuda_array_interface__ for the validation paths."""

    def __init__(self, shape, typestr, strides=None, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "strides": strides, "version": 3}


class _FakeRuntime:
    closed = False
    device = 0


def _fake_plan(num_heads=16, total_q=3, kv_format=mlajit.KvFormat.FP8_E4M3, page_size=0,
               kv_extent=100, write_lse=False):
    """A Plan whose handle is never passed to C: every call below fails validation."""
    p = mlajit.Plan.__new__(mlajit.Plan)
    p._handle = object()
    p._free = lambda handle: None
    p.runtime = _FakeRuntime()
    p.batch_size = 2
    p.num_heads = num_heads
    p.kv_format = kv_format
    p.q_mode = mlajit.QMode.BF16
    p.causal = True
    p.sm_scale = 0.07
    p.page_size = page_size
    p.write_lse = write_lse
    p.total_q = total_q
    p.kv_extent = kv_extent
    return p


class DecodeValidationTest(unittest.TestCase):
    def setUp(self):
        self.q = _FakeDeviceArray((3, 16, 576), "<u2")
        self.kv = _FakeDeviceArray((100, 576), "|u1")
        self.out = _FakeDeviceArray((3, 16, 512), "<u2")

    def check(self, exc, fragments, plan, *args, **kwargs):
        with self.assertRaises(exc) as cm:
            plan.decode(*args, **kwargs)
        for f in fragments:
            self.assertIn(f, str(cm.exception))

    def test_q(self):
        p = _fake_plan()
        self.check(ValueError, ["q has shape (3, 8, 576)", "[total_q, num_heads, 576]"], p,
                   _FakeDeviceArray((3, 8, 576), "<u2"), self.kv, out=self.out)
        self.check(TypeError, ["q has dtype float32", "bfloat16"], p,
                   _FakeDeviceArray((3, 16, 576), "<f4"), self.kv, out=self.out)
        self.check(ValueError, ["q is not contiguous"], p,
                   _FakeDeviceArray((3, 16, 576), "<u2", strides=(2, 6 * 576, 2)), self.kv,
                   out=self.out)
        self.check(TypeError, ["q has type list"], p, [1, 2], self.kv, out=self.out)

    def test_kv(self):
        p = _fake_plan()
        self.check(ValueError, ["kv has 99 tokens", "addresses 100"], p, self.q,
                   _FakeDeviceArray((99, 576), "|u1"), out=self.out)
        self.check(ValueError, ["kv has shape (100, 306)", "[num_tokens, 576]"], p, self.q,
                   _FakeDeviceArray((100, 306), "|u1"), out=self.out)
        self.check(TypeError, ["kv has dtype float32", "kv_format=fp8_e4m3"], p, self.q,
                   _FakeDeviceArray((100, 576), "<f4"), out=self.out)
        mx = _fake_plan(kv_format=mlajit.KvFormat.MXFP4)
        self.check(ValueError, ["kv has shape (100, 576)", "306"], mx, self.q, self.kv,
                   out=self.out)
        bf = _fake_plan(kv_format=mlajit.KvFormat.BF16)
        self.check(ValueError, ["kv has shape (100, 576)", "1152"], bf, self.q, self.kv,
                   out=self.out)

    def test_kv_scale(self):
        p = _fake_plan()
        self.check(ValueError, ["kv_scale=0", "fp8"], p, self.q, self.kv, kv_scale=0.0,
                   out=self.out)
        self.check(ValueError, ["kv_scale=inf"], p, self.q, self.kv, kv_scale=float("inf"),
                   out=self.out)

    def test_paged(self):
        p = _fake_plan(page_size=64, kv_extent=4)
        kv = _FakeDeviceArray((8, 64, 576), "|u1")
        self.check(ValueError, ["kv_indices is None", "page_size=64"], p, self.q, kv,
                   out=self.out)
        self.check(TypeError, ["kv_indices has dtype int64"], p, self.q, kv,
                   kv_indices=_FakeDeviceArray((4,), "<i8"), out=self.out)
        self.check(ValueError, ["kv_indices has shape (3,)", ">= 4"], p, self.q, kv,
                   kv_indices=_FakeDeviceArray((3,), "<i4"), out=self.out)
        self.check(ValueError, ["kv has shape (8, 32, 576)", "[num_pages, 64, 576]"], p, self.q,
                   _FakeDeviceArray((8, 32, 576), "|u1"),
                   kv_indices=_FakeDeviceArray((4,), "<i4"), out=self.out)
        flat = _fake_plan()
        self.check(ValueError, ["kv_indices is given but the plan is flat"], flat, self.q,
                   self.kv, kv_indices=_FakeDeviceArray((4,), "<i4"), out=self.out)

    def test_out_and_lse(self):
        p = _fake_plan()
        self.check(ValueError, ["out has shape (3, 16, 576)", "512"], p, self.q, self.kv,
                   out=_FakeDeviceArray((3, 16, 576), "<u2"))
        self.check(ValueError, ["lse is given but the plan was built with write_lse=False"], p,
                   self.q, self.kv, out=self.out, lse=_FakeDeviceArray((3, 16), "<f4"))
        lp = _fake_plan(write_lse=True)
        self.check(TypeError, ["lse has dtype bf16_bits", "float32"], lp, self.q, self.kv,
                   out=self.out, lse=_FakeDeviceArray((3, 16), "<u2"))
        self.check(ValueError, ["lse has shape (16, 3)"], lp, self.q, self.kv,
                   out=self.out, lse=_FakeDeviceArray((16, 3), "<f4"))

    def test_closed_plan(self):
        p = _fake_plan()
        p._handle = None
        self.check(ValueError, ["the plan is closed"], p, self.q, self.kv, out=self.out)
        with self.assertRaisesRegex(ValueError, "the plan is closed"):
            p.describe()
        p.close()  # idempotent


class RuntimeHandleTest(unittest.TestCase):
    """The C runtime is freed once released and no plan of it is open, in any order."""

    def test_release_after_plans(self):
        freed = []
        rh = _runtime._RuntimeHandle(123, freed.append)
        rh.plan_opened()
        rh.plan_opened()
        rh.plan_closed()
        rh.release()
        self.assertEqual(freed, [])  # a plan is still open
        rh.plan_closed()
        self.assertEqual(freed, [123])
        rh.release()
        del rh
        self.assertEqual(freed, [123])  # never twice

    def test_release_first_when_no_plan(self):
        freed = []
        rh = _runtime._RuntimeHandle(7, freed.append)
        rh.release()
        self.assertEqual(freed, [7])

    def test_collected_without_release(self):
        freed = []
        rh = _runtime._RuntimeHandle(9, freed.append)
        del rh
        self.assertEqual(freed, [9])


class StreamHandleTest(unittest.TestCase):
    def test_forms(self):
        class TorchLike:
            cuda_stream = 1234

        class CupyLike:
            ptr = 99

        self.assertIsNone(_tensors.stream_handle(None))
        self.assertEqual(_tensors.stream_handle(7), 7)
        self.assertEqual(_tensors.stream_handle(TorchLike()), 1234)
        self.assertEqual(_tensors.stream_handle(CupyLike()), 99)
        with self.assertRaises(TypeError):
            _tensors.stream_handle(True)
        with self.assertRaises(TypeError):
            _tensors.stream_handle("default")


if __name__ == "__main__":
    unittest.main()
