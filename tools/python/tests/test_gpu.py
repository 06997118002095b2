"""GPU tests of the Python bindings: decode against a float64 PyTorch reference.

Needs torch with CUDA, an NVIDIA GPU and the built library; skips when torch or
the GPU is missing (a missing library is an error). Run from the repository root:

    MLAJIT_LIBRARY=build/src/api/libmlajit.so python3 -m unittest discover \
        -s tools/python/tests -p test_gpu.py -v

Every case draws fresh random inputs (the seed is printed on failure), poisons
the outputs and the unused KV slots with NaN first, and checks
||out - ref|| / ||ref|| against DESIGN.md's bar (1e-2 for fp8 / MXFP4 paths,
5e-3 for bf16 KV with bf16 Q), no NaN, and lse within 1e-3 (relative norm, -inf
exactly where a row sees no token).
"""

import math
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)

try:
    import torch
except ImportError:
    torch = None

import mlajit  # noqa: E402

SM_SCALE = 1.0 / math.sqrt(192.0)
KV_LENS = [37, 0, 1, 64, 515, 2100]  # incl. an empty sequence and one shorter than q_len
RT = None


def setUpModule():
    global RT
    if torch is None:
        raise unittest.SkipTest("torch is not installed")
    if not torch.cuda.is_available():
        raise unittest.SkipTest("torch sees no CUDA device")
    # A library that cannot be loaded is a failure here, not a skip.
    RT = mlajit.Runtime()


def tearDownModule():
    if RT is not None:
        RT.close()


def _seed():
    return int.from_bytes(os.urandom(6), "little")


def _cumsum(values):
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


# ---- inputs -----------------------------------------------------------------

_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _make_kv(fmt, num_slots, gen, dev, kv_scale):
    """Random KV cache in `fmt`; returns (kv for decode, dequantised float64 [num_slots, 576])."""
    if fmt == "bf16":
        kv = torch.randn(num_slots, 576, generator=gen, device=dev).to(torch.bfloat16)
        return kv, kv.double()
    if fmt == "fp8_e4m3":
        x = torch.randn(num_slots, 576, generator=gen, device=dev)
        codes = (x / kv_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        return codes, codes.float().double() * kv_scale  # real = code * kv_scale
    if fmt == "mxfp4":
        nib = torch.randint(0, 16, (num_slots, 576), generator=gen, device=dev, dtype=torch.uint8)
        packed = nib[:, 0::2] | (nib[:, 1::2] << 4)  # low nibble = even element
        exps = torch.randint(124, 129, (num_slots, 18), generator=gen, device=dev,
                             dtype=torch.uint8)  # e8m0 scales 2^-3 .. 2^1
        kv = torch.cat([packed, exps], dim=1).contiguous()
        table = torch.tensor(_E2M1, dtype=torch.float64, device=dev)
        scale = torch.pow(2.0, exps.double() - 127.0).repeat_interleave(32, dim=1)
        return kv, table[nib.long()] * scale
    raise ValueError(fmt)


def _poison_kv(fmt, kv, unused):
    """NaN in every slot no sequence reads: it must never reach the output."""
    if not bool(unused.any()):
        return
    if fmt == "bf16":
        kv[unused] = float("nan")
    elif fmt == "fp8_e4m3":
        kv.view(torch.uint8)[unused] = 0x7F  # e4m3fn NaN
    else:
        kv[unused, 288:] = 0xFF  # e8m0 NaN scale


def _quantise_q_fp8(q):
    """q_mode='fp8': per-tensor scale amax/448, e4m3fn round to nearest, saturating."""
    qf = q.float()
    scale = qf.abs().amax() / 448.0
    codes = (qf / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return codes.float().double() * scale.double()


class Case:
    """One batch: layout, inputs, reference."""

    def __init__(self, fmt, heads, q_lens, kv_lens, page_size, q_mode="bf16", causal=True,
                 seed=None):
        self.fmt, self.heads, self.q_lens, self.kv_lens = fmt, heads, q_lens, kv_lens
        self.page_size, self.q_mode, self.causal = page_size, q_mode, causal
        self.seed = _seed() if seed is None else seed
        dev = torch.device("cuda", RT.device)
        gen = torch.Generator(device=dev)
        gen.manual_seed(self.seed)
        cpu_gen = torch.Generator()
        cpu_gen.manual_seed(self.seed)

        self.qo_indptr = _cumsum(q_lens)
        self.kv_scale = 0.03 if fmt == "fp8_e4m3" else 1.0
        if page_size == 0:
            self.kv_indptr = _cumsum(kv_lens)
            num_slots = self.kv_indptr[-1] + 5  # a poisoned tail
            self.slots = [torch.arange(self.kv_indptr[b], self.kv_indptr[b + 1], device=dev)
                          for b in range(len(kv_lens))]
            self.kv_indices = None
            self.plan_kv_lens = None
        else:
            pages = [(n + page_size - 1) // page_size for n in kv_lens]
            self.kv_indptr = _cumsum(pages)
            num_pages = self.kv_indptr[-1] + 3  # spare pages, poisoned
            ids = torch.randperm(num_pages, generator=cpu_gen)[: self.kv_indptr[-1]]
            self.kv_indices = ids.to(torch.int32).to(dev)
            self.slots = []
            for b, n in enumerate(kv_lens):
                i = torch.arange(n, device=dev)
                page = self.kv_indices[self.kv_indptr[b] + torch.div(i, page_size,
                                                                     rounding_mode="floor")]
                self.slots.append(page.long() * page_size + i % page_size)
            num_slots = num_pages * page_size
            self.plan_kv_lens = list(kv_lens)

        self.kv, self.kv_real = _make_kv(fmt, num_slots, gen, dev, self.kv_scale)
        used = torch.zeros(num_slots, dtype=torch.bool, device=dev)
        for s in self.slots:
            used[s] = True
        _poison_kv(fmt, self.kv, ~used)
        total_q = self.qo_indptr[-1]
        self.q = torch.randn(total_q, heads, 576, generator=gen, device=dev).to(torch.bfloat16)

    def __str__(self):
        return ("fmt=%s q_mode=%s heads=%d q_lens=%s kv_lens=%s page_size=%d causal=%s seed=%d"
                % (self.fmt, self.q_mode, self.heads, self.q_lens, self.kv_lens, self.page_size,
                   self.causal, self.seed))

    def plan(self, write_lse=True):
        return RT.plan(self.qo_indptr, self.kv_indptr, num_heads=self.heads, kv_format=self.fmt,
                       q_mode=self.q_mode, causal=self.causal, sm_scale=SM_SCALE,
                       page_size=self.page_size, kv_lens=self.plan_kv_lens, write_lse=write_lse)

    def reference(self, sm_scale, q=None):
        """float64 out [total_q, H, 512] and lse [total_q, H] (natural log)."""
        q = self.q if q is None else q
        qd = _quantise_q_fp8(q) if self.q_mode == "fp8" else q.double()
        total_q = qd.shape[0]
        out = torch.zeros(total_q, self.heads, 512, dtype=torch.float64, device=q.device)
        lse = torch.full((total_q, self.heads), -math.inf, dtype=torch.float64, device=q.device)
        for b, (ql, n) in enumerate(zip(self.q_lens, self.kv_lens)):
            if ql == 0 or n == 0:
                continue  # kv_len 0: out 0, lse -inf
            r0 = self.qo_indptr[b]
            k = self.kv_real[self.slots[b]]                              # [n, 576]
            s = torch.einsum("thd,jd->thj", qd[r0:r0 + ql], k) * sm_scale  # [ql, H, n]
            if self.causal:
                t = torch.arange(ql, device=q.device)[:, None]
                j = torch.arange(n, device=q.device)[None, :]
                s = s.masked_fill((j > n - ql + t)[:, None, :], -math.inf)
            row_lse = torch.logsumexp(s, dim=-1)                          # -inf: sees nothing
            p = torch.exp(s - row_lse[..., None])
            p = torch.where(torch.isfinite(row_lse)[..., None], p, torch.zeros_like(p))
            out[r0:r0 + ql] = p @ k[:, :512]
            lse[r0:r0 + ql] = row_lse
        return out, lse

    def tolerance(self):
        return 5e-3 if (self.fmt == "bf16" and self.q_mode == "bf16") else 1e-2


class GpuTestCase(unittest.TestCase):
    def check_output(self, case, out, ref, lse=None, ref_lse=None):
        msg = str(case)
        torch.cuda.synchronize()
        self.assertFalse(bool(torch.isnan(out).any()), "NaN in out: " + msg)
        err = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()
        self.assertLess(err, case.tolerance(), "||out-ref||/||ref||=%.3g: %s" % (err, msg))
        dead = torch.isinf(ref_lse) if ref_lse is not None else None
        if dead is not None and bool(dead.any()):
            self.assertEqual(out[dead].abs().max().item(), 0.0, "rows that see nothing: " + msg)
        if lse is not None:
            self.assertFalse(bool(torch.isnan(lse).any()), "NaN in lse: " + msg)
            self.assertTrue(bool(torch.equal(torch.isneginf(lse), dead)),
                            "lse is -inf exactly where a row sees nothing: " + msg)
            live = ~dead
            if bool(live.any()):
                a, b = lse[live].double(), ref_lse[live]
                lerr = ((a - b).norm() / b.norm().clamp_min(1e-300)).item()
                self.assertLess(lerr, 1e-3, "lse rel err %.3g: %s" % (lerr, msg))

    def run_case(self, case, write_lse=True, kv=None):
        with case.plan(write_lse=write_lse) as plan:
            tq = case.qo_indptr[-1]
            out = torch.full((tq, case.heads, 512), float("nan"), dtype=torch.bfloat16,
                             device=case.q.device)
            lse = torch.full((tq, case.heads), float("nan"), dtype=torch.float32,
                             device=case.q.device) if write_lse else None
            result = plan.decode(case.q, case.kv if kv is None else kv, kv_scale=case.kv_scale,
                                 kv_indices=case.kv_indices, out=out, lse=lse)
            if write_lse:
                self.assertIsInstance(result, tuple)
                self.assertIs(result[0], out)
                self.assertIs(result[1], lse)
            else:
                self.assertIs(result, out)
            ref, ref_lse = case.reference(plan.sm_scale)
            self.check_output(case, out, ref, lse, ref_lse)


class DecodeTest(GpuTestCase):
    def _matrix(self, fmt):
        for heads in (16, 128):
            for q_len in (1, 2):
                for page_size in (0, 64):
                    case = Case(fmt, heads, [q_len] * len(KV_LENS), KV_LENS, page_size)
                    with self.subTest(str(case)):
                        self.run_case(case)

    @unittest.skipUnless(torch is not None and hasattr(torch, "float8_e4m3fn"),
                         "torch has no float8_e4m3fn")
    def test_fp8_kv(self):
        self._matrix("fp8_e4m3")

    def test_bf16_kv(self):
        self._matrix("bf16")

    def test_mxfp4_kv(self):
        self._matrix("mxfp4")

    def test_fp8_kv_as_uint8_codes(self):
        case = Case("fp8_e4m3", 16, [1] * len(KV_LENS), KV_LENS, 64)
        self.run_case(case, kv=case.kv.view(torch.uint8))

    def test_q_mode_fp8(self):
        for fmt in ("fp8_e4m3", "bf16"):
            case = Case(fmt, 16, [2] * len(KV_LENS), KV_LENS, 0, q_mode="fp8")
            with self.subTest(str(case)):
                self.run_case(case)

    def test_mixed_q_lens_and_non_causal(self):
        q_lens = [2, 0, 1, 2, 1, 2]
        for causal in (True, False):
            case = Case("fp8_e4m3", 16, q_lens, KV_LENS, 0, causal=causal)
            with self.subTest(str(case)):
                self.run_case(case)

    def test_without_lse_and_allocated_outputs(self):
        case = Case("fp8_e4m3", 16, [1] * len(KV_LENS), KV_LENS, 64)
        self.run_case(case, write_lse=False)
        with case.plan(write_lse=True) as plan:
            out, lse = plan.decode(case.q, case.kv, kv_scale=case.kv_scale,
                                   kv_indices=case.kv_indices)
            self.assertEqual((out.dtype, tuple(out.shape)),
                             (torch.bfloat16, (len(KV_LENS), 16, 512)))
            self.assertEqual((lse.dtype, tuple(lse.shape)), (torch.float32, (len(KV_LENS), 16)))
            self.assertEqual(out.device, case.q.device)
            ref, ref_lse = case.reference(plan.sm_scale)
            self.check_output(case, out, ref, lse, ref_lse)

    def test_indptr_as_tensors(self):
        case = Case("bf16", 16, [1] * len(KV_LENS), KV_LENS, 64)
        dev = case.q.device
        plan = RT.plan(torch.tensor(case.qo_indptr, dtype=torch.int32, device=dev),
                       torch.tensor(case.kv_indptr, dtype=torch.int64),
                       num_heads=16, kv_format="bf16", sm_scale=SM_SCALE, page_size=64,
                       kv_lens=torch.tensor(case.kv_lens, dtype=torch.int32))
        out = plan.decode(case.q, case.kv, kv_indices=case.kv_indices)
        ref, ref_lse = case.reference(plan.sm_scale)
        self.check_output(case, out, ref, None, ref_lse)
        plan.close()

    def test_cuda_array_interface_inputs(self):
        class Cai:
            def __init__(self, t):
                self.__cuda_array_interface__ = t.__cuda_array_interface__
                self.t = t

        case = Case("fp8_e4m3", 16, [1] * len(KV_LENS), KV_LENS, 0)
        out = torch.full((len(KV_LENS), 16, 512), float("nan"), dtype=torch.bfloat16,
                         device=case.q.device)
        with case.plan(write_lse=False) as plan:
            plan.decode(Cai(case.q.view(torch.int16)), Cai(case.kv.view(torch.uint8)),
                        kv_scale=case.kv_scale, out=Cai(out.view(torch.int16)))
            ref, ref_lse = case.reference(plan.sm_scale)
        self.check_output(case, out, ref, None, ref_lse)

    def test_repeated_decodes_and_layout_changes(self):
        # One plan reused across "layers", then a plan for new lengths.
        case = Case("fp8_e4m3", 16, [1] * len(KV_LENS), KV_LENS, 64)
        with case.plan(write_lse=False) as plan:
            ref, ref_lse = case.reference(plan.sm_scale)
            for _ in range(3):
                out = plan.decode(case.q, case.kv, kv_scale=case.kv_scale,
                                  kv_indices=case.kv_indices)
                self.check_output(case, out, ref, None, ref_lse)
        other = Case("fp8_e4m3", 16, [1] * 3, [900, 5, 130], 64)
        self.run_case(other, write_lse=False)


def _delay_stream():
    """Keeps the current stream busy for a while (~0.2 s)."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(400_000_000)
        return
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(40):
        a = torch.nn.functional.normalize(a @ a, dim=1)


class StreamTest(GpuTestCase):
    """The decode must be ordered after earlier work on the stream it is given:
    q is written on a busy side stream just before the decode; a decode on any
    other stream would read the NaN q and fail the check."""

    def _setup(self):
        case = Case("fp8_e4m3", 16, [1] * len(KV_LENS), KV_LENS, 0)
        plan = case.plan(write_lse=False)
        q_src = case.q
        q = torch.full_like(q_src, float("nan"))
        out = torch.full((len(KV_LENS), 16, 512), float("nan"), dtype=torch.bfloat16,
                         device=q.device)
        torch.cuda.synchronize()
        return case, plan, q_src, q, out

    def test_uses_the_current_torch_stream(self):
        case, plan, q_src, q, out = self._setup()
        side = torch.cuda.Stream(device=q.device)
        with torch.cuda.stream(side):
            _delay_stream()
            q.copy_(q_src)
            plan.decode(q, case.kv, kv_scale=case.kv_scale, out=out)
        torch.cuda.current_stream().wait_stream(side)
        ref, ref_lse = case.reference(plan.sm_scale, q=q_src)
        self.check_output(case, out, ref, None, ref_lse)
        plan.close()

    def test_explicit_stream_argument(self):
        case, plan, q_src, q, out = self._setup()
        side = torch.cuda.Stream(device=q.device)
        with torch.cuda.stream(side):
            _delay_stream()
            q.copy_(q_src)
        plan.decode(q, case.kv, kv_scale=case.kv_scale, out=out, stream=side)
        torch.cuda.current_stream().wait_stream(side)
        ref, ref_lse = case.reference(plan.sm_scale, q=q_src)
        self.check_output(case, out, ref, None, ref_lse)
        plan.close()

    def test_control_a_decode_on_another_stream_reads_stale_q(self):
        # The two tests above are meaningful only if a decode that ignores the
        # stream would see the NaN q: run one on the legacy default stream.
        case, plan, q_src, q, out = self._setup()
        side = torch.cuda.Stream(device=q.device)
        with torch.cuda.stream(side):
            _delay_stream()
            q.copy_(q_src)
            plan.decode(q, case.kv, kv_scale=case.kv_scale, out=out, stream=0)
        torch.cuda.synchronize()
        self.assertTrue(bool(torch.isnan(out).any()),
                        "a decode on the default stream was ordered after the side stream's "
                        "work: the stream tests cannot tell streams apart")
        plan.close()


class DevicePlanGraphTest(GpuTestCase):
    """A device-built plan's update and decode captured with torch.cuda.graph,
    replayed with new lengths, page tables, padded slots and Q each time."""

    def test_captured_step_follows_new_layouts(self):
        fmt, heads, batch, q_len, page, max_len = "fp8_e4m3", 16, 6, 2, 16, 700
        dev = torch.device("cuda", RT.device)
        max_pages = batch * ((max_len + page - 1) // page) + 3  # + Case's spare pages
        plan = RT.device_plan(max_batch_size=batch, max_q_len=q_len, num_heads=heads,
                              sm_scale=SM_SCALE, kv_format=fmt, page_size=page, write_lse=True)
        # The static buffers a captured step reads: refilled in place per replay.
        qo = torch.zeros(batch + 1, dtype=torch.int32, device=dev)
        kv_indptr = torch.zeros(batch + 1, dtype=torch.int32, device=dev)
        kv_lens = torch.zeros(batch, dtype=torch.int32, device=dev)
        kv_indices = torch.full((max_pages,), -1, dtype=torch.int32, device=dev)
        kv = torch.zeros(max_pages * page, 576, dtype=torch.uint8, device=dev)
        q = torch.zeros(batch * q_len, heads, 576, dtype=torch.bfloat16, device=dev)
        out = torch.zeros(batch * q_len, heads, 512, dtype=torch.bfloat16, device=dev)
        lse = torch.zeros(batch * q_len, heads, dtype=torch.float32, device=dev)
        stream = torch.cuda.Stream(dev)

        def step():
            plan.update(qo, kv_indptr, kv_lens)
            plan.decode(q, kv, kv_scale=0.03, kv_indices=kv_indices, out=out, lse=lse)

        with torch.cuda.stream(stream):
            step()  # compiles and loads the kernel outside the capture
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step()

        gen = torch.Generator()
        gen.manual_seed(_seed())
        for replay in range(24):
            lens = torch.randint(0, max_len + 1, (batch,), generator=gen).tolist()
            lens[replay % batch] = 0
            case = Case(fmt, heads, [q_len] * batch, lens, page)
            # A padded slot: a live sequence whose page ids are all -1 reads
            # nothing and counts as empty.
            ids = case.kv_indices.clone()
            padded = (replay + 3) % batch
            if lens[padded] > 0:
                ids[case.kv_indptr[padded]:case.kv_indptr[padded + 1]] = -1
                case.kv_lens = list(lens)
                case.kv_lens[padded] = 0
            qo.copy_(torch.tensor(case.qo_indptr, dtype=torch.int32))
            kv_indptr.copy_(torch.tensor(case.kv_indptr, dtype=torch.int32))
            kv_lens.copy_(torch.tensor(lens, dtype=torch.int32))
            kv_indices.fill_(-1)
            kv_indices[:ids.numel()].copy_(ids)
            kv[:case.kv.shape[0]].copy_(case.kv.view(torch.uint8))
            q.copy_(case.q)
            out.fill_(float("nan"))
            lse.fill_(float("nan"))
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
            ref, ref_lse = case.reference(plan.sm_scale)
            with self.subTest(replay=replay, case=str(case)):
                self.check_output(case, out, ref, lse, ref_lse)
        plan.check_update(stream=stream)
        plan.close()


class TuneTest(unittest.TestCase):
    """Runtime.tune on a small fp8 layout; plans built afterwards use the record."""

    def test_tune_then_plans_use_the_chosen_shape(self):
        tmp = tempfile.mkdtemp(prefix="mlajit-tune-")
        self.addCleanup(shutil.rmtree, tmp, True)
        heads = 32
        qo = _cumsum([1] * 4)
        kv = _cumsum([1024] * 4)
        layout = dict(num_heads=heads, sm_scale=SM_SCALE, kv_format="fp8_e4m3")
        with mlajit.Runtime(RT.device, cache_dir=tmp) as rt:
            result = rt.tune(qo, kv, warmup_calls=2, timed_calls=5, **layout)
            self.assertIsInstance(result, dict)
            candidates = result["candidates"]
            self.assertGreaterEqual(len(candidates), 1, result)
            for i, c in enumerate(candidates):
                self.assertEqual(c["status"], "ok", "candidate %d (%s)" % (i, c["shape"]))
                self.assertGreater(c["median_us"], 0, c)
            self.assertTrue(0 <= result["chosen"] < len(candidates), result)
            chosen = candidates[result["chosen"]]
            self.assertTrue(result["persisted"], result)
            self.assertTrue(os.path.isfile(os.path.join(tmp, "tuning.jsonl")))
            with rt.plan(qo, kv, **layout) as plan:
                d = plan.describe()
            self.assertTrue(d["tuned"], d)
            self.assertEqual((d["block_m"], d["num_stages"]),
                             (chosen["block_m"], chosen["num_stages"]), (d, chosen))
            self.assertTrue(d["kernel"].startswith("mla_decode"), d)
        # A later runtime on that cache directory reads the record back.
        with mlajit.Runtime(RT.device, cache_dir=tmp) as rt:
            with rt.plan(qo, kv, **layout) as plan:
                d = plan.describe()
            self.assertTrue(d["tuned"], d)
            self.assertEqual((d["block_m"], d["num_stages"]),
                             (chosen["block_m"], chosen["num_stages"]), (d, chosen))
            plan = rt.plan(qo, kv, **layout)
        with self.assertRaisesRegex(ValueError, "the plan is closed"):
            plan.describe()  # closed with its runtime
        with self.assertRaisesRegex(ValueError, "the runtime is closed"):
            rt.tune(qo, kv, **layout)

    def test_library_rejects_a_layout_without_rows(self):
        with self.assertRaises(mlajit.MlajitError) as cm:
            RT.tune([0, 0], [0, 64], num_heads=16, sm_scale=SM_SCALE, timed_calls=1,
                    persist=False)
        self.assertEqual(cm.exception.code, mlajit.Status.INVALID_ARGUMENT)
        self.assertEqual(cm.exception.function, "mlajit_tune")
        self.assertIn("no query rows", cm.exception.message)


class RuntimeTest(unittest.TestCase):
    def test_default_device_and_arch(self):
        self.assertEqual(RT.device, torch.cuda.current_device())
        self.assertRegex(RT.arch, r"^(sm_\d+a?|gfx\w+)$")

    def test_tensor_checks(self):
        case = Case("fp8_e4m3", 16, [1] * 3, [10, 20, 30], 0)
        with case.plan(write_lse=False) as plan:
            with self.assertRaisesRegex(ValueError, "q is on device cpu"):
                plan.decode(case.q.cpu(), case.kv, kv_scale=case.kv_scale)
            with self.assertRaisesRegex(ValueError, "q is not contiguous"):
                q = torch.empty(3, 576, 16, dtype=torch.bfloat16, device=case.q.device)
                plan.decode(q.transpose(1, 2), case.kv, kv_scale=case.kv_scale)
            with self.assertRaisesRegex(TypeError, "kv has dtype float32"):
                plan.decode(case.q, case.kv.float(), kv_scale=case.kv_scale)

    def test_library_rejects_bad_layouts(self):
        with self.assertRaises(mlajit.MlajitError) as cm:
            RT.plan([0, 1, 0], [0, 5, 9], num_heads=16, sm_scale=SM_SCALE)
        self.assertEqual(cm.exception.code, mlajit.Status.INVALID_ARGUMENT)
        self.assertIn("qo_indptr[2]=0", cm.exception.message)
        with self.assertRaises(mlajit.MlajitError) as cm:
            RT.plan([0, 9], [0, 5], num_heads=16, sm_scale=SM_SCALE)
        self.assertEqual(cm.exception.code, mlajit.Status.INVALID_ARGUMENT)

    def test_describe(self):
        with RT.plan([0, 1, 2], [0, 300, 1000], num_heads=16, sm_scale=SM_SCALE) as plan:
            d = plan.describe()
        for key in ("block_m", "block_n", "num_warps", "num_stages", "num_ctas"):
            self.assertIsInstance(d[key], int, (key, d))
            self.assertGreater(d[key], 0, (key, d))
        self.assertIsInstance(d["min_split_cost"], int, d)
        self.assertIsInstance(d["tuned"], bool, d)
        self.assertTrue(d["kernel"].startswith("mla_decode"), d)

    def test_closing_the_runtime_closes_its_plans(self):
        rt = mlajit.Runtime()
        plan = rt.plan([0, 1], [0, 8], num_heads=16, sm_scale=SM_SCALE)
        rt.close()
        self.assertTrue(plan.closed)
        self.assertTrue(rt.closed)
        rt.close()


    def test_plans_outliving_their_runtime_in_a_cycle(self):
        import gc
        for _ in range(3):
            rt = mlajit.Runtime()
            plan = rt.plan([0, 1], [0, 8], num_heads=16, sm_scale=SM_SCALE)
            plan.cycle = [rt, plan]  # garbage collection finalises these in any order
            rt.cycle = plan
            del rt, plan
            gc.collect()
        case = Case("fp8_e4m3", 16, [1] * 3, [10, 20, 30], 0)
        self.run_case_plain(case)

    def run_case_plain(self, case):
        with case.plan(write_lse=False) as plan:
            out = plan.decode(case.q, case.kv, kv_scale=case.kv_scale)
            ref, _ = case.reference(plan.sm_scale)
        torch.cuda.synchronize()
        err = ((out.double() - ref).norm() / ref.norm()).item()
        self.assertLess(err, 1e-2, str(case))


if __name__ == "__main__":
    unittest.main()
