"""Runtime and Plan: the decode path of the C ABI."""

import ctypes
import math
import operator
import sys
import threading
import weakref

from . import _lib
from ._cache import json_call
from ._lib import KvFormat, MlajitError, QMode
from ._tensors import device_array, host_int32, stream_handle, torch_module

HEAD_DIM_QK = 576
HEAD_DIM_V = 512
MAX_HEADS = 128
PAGE_SIZES = (0, 1, 16, 32, 64, 128)

_KV_FORMATS = {
    "bf16": KvFormat.BF16,
    "bfloat16": KvFormat.BF16,
    "fp8_e4m3": KvFormat.FP8_E4M3,
    "fp8": KvFormat.FP8_E4M3,
    "mxfp4": KvFormat.MXFP4,
}
_Q_MODES = {"bf16": QMode.BF16, "bfloat16": QMode.BF16, "fp8": QMode.FP8}

# Bytes per KV token and the dtypes accepted for each format: dtype -> elements per token.
KV_TOKEN_BYTES = {KvFormat.BF16: 1152, KvFormat.FP8_E4M3: 576, KvFormat.MXFP4: 306}
_KV_DTYPES = {
    KvFormat.BF16: {"bfloat16": 576, "bf16_bits": 576, "uint8": 1152},
    KvFormat.FP8_E4M3: {"float8_e4m3fn": 576, "uint8": 576, "int8": 576},
    KvFormat.MXFP4: {"uint8": 306, "int8": 306},
}
_BF16 = ("bfloat16", "bf16_bits")


def _enum_arg(value, table, enum_type, name):
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str) and value.lower() in table:
        return table[value.lower()]
    choices = ", ".join(repr(k) for k in table)
    raise ValueError("%s=%r: expected one of %s" % (name, value, choices))


def _int_arg(value, name):
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError("%s=%r (%s): expected an int" % (name, value, type(value).__name__))


def default_device():
    """Current torch CUDA device when torch is imported and CUDA is available, else 0."""
    torch = torch_module()
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return torch.cuda.current_device()
        except Exception:  # a broken CUDA install: leave the choice to the library
            pass
    return 0


def _device_index(device):
    if device is None:
        return default_device()
    if isinstance(device, str):
        text = device.strip()
        if text == "cuda":
            return default_device()
        if text.startswith("cuda:") and text[5:].isdigit():
            return int(text[5:])
        raise ValueError("device=%r: expected an int, 'cuda', 'cuda:N' or a torch.device" % device)
    torch = torch_module()
    if torch is not None and isinstance(device, torch.device):
        if device.type != "cuda":
            raise ValueError("device=%s: expected a CUDA device" % device)
        return device.index if device.index is not None else default_device()
    return _int_arg(device, "device")


def prepare_plan(qo_indptr, kv_indptr, num_heads, kv_format, q_mode, causal, sm_scale,
                 page_size, kv_lens, write_lse):
    """Validates plan() arguments in Python and builds the C inputs.

    Returns (PlanConfig, batch_size, qo, kv, lens) with the arrays as ctypes
    int32 arrays (lens may be None). Raises ValueError / TypeError naming the
    argument, the value and what was expected. The layout's contents
    (monotonic indptrs, q_len <= 8, kv_lens within the pages) are checked by the
    library, which reports INVALID_ARGUMENT.
    """
    fmt = _enum_arg(kv_format, _KV_FORMATS, KvFormat, "kv_format")
    mode = _enum_arg(q_mode, _Q_MODES, QMode, "q_mode")
    num_heads = _int_arg(num_heads, "num_heads")
    if not 1 <= num_heads <= MAX_HEADS:
        raise ValueError("num_heads=%d: expected 1..%d" % (num_heads, MAX_HEADS))
    page_size = _int_arg(page_size, "page_size")
    if page_size not in PAGE_SIZES:
        raise ValueError("page_size=%d: expected 0 (flat), 1, 16, 32, 64 or 128" % page_size)
    if sm_scale is None:
        raise TypeError("sm_scale is required: the softmax scale, e.g. 1/sqrt(192) for DeepSeek-V3")
    try:
        scale = float(sm_scale)
    except (TypeError, ValueError):
        raise TypeError("sm_scale=%r: expected a float" % (sm_scale,)) from None
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError("sm_scale=%r: expected a finite value > 0" % (sm_scale,))
    qo = host_int32(qo_indptr, "qo_indptr")
    kv = host_int32(kv_indptr, "kv_indptr")
    if len(qo) < 1:
        raise ValueError("qo_indptr is empty: expected batch_size + 1 entries (starting with 0)")
    if len(kv) != len(qo):
        raise ValueError("kv_indptr has %d entries: expected %d (batch_size + 1, as qo_indptr)"
                         % (len(kv), len(qo)))
    batch = len(qo) - 1
    lens = None
    if kv_lens is not None:
        if page_size == 0:
            raise ValueError("kv_lens given with page_size=0: a flat layout takes its lengths "
                             "from kv_indptr")
        lens = host_int32(kv_lens, "kv_lens")
        if len(lens) != batch:
            raise ValueError("kv_lens has %d entries: expected batch_size=%d (len(qo_indptr) - 1)"
                             % (len(lens), batch))
    config = _lib.PlanConfig(num_heads=num_heads, kv_format=int(fmt), q_mode=int(mode),
                             causal=1 if causal else 0, sm_scale=scale, page_size=page_size,
                             write_lse=1 if write_lse else 0)
    return config, batch, qo, kv, lens


def prepare_tune_options(warmup_calls, timed_calls, persist, device_plans=False):
    """Validates tune() options in Python and builds the ``mlajit_tune_options_t``.

    Raises ValueError / TypeError naming the argument, the value and the range
    the library accepts.
    """
    warmup_calls = _int_arg(warmup_calls, "warmup_calls")
    timed_calls = _int_arg(timed_calls, "timed_calls")
    if not 0 <= warmup_calls <= 1000:
        raise ValueError("warmup_calls=%d: expected 0..1000" % warmup_calls)
    if not 1 <= timed_calls <= 10000:
        raise ValueError("timed_calls=%d: expected 1..10000" % timed_calls)
    return _lib.TuneOptions(warmup_calls=warmup_calls, timed_calls=timed_calls,
                            persist=1 if persist else 0, device_plans=1 if device_plans else 0)


class _RuntimeHandle:
    """Owns an ``mlajit_runtime_t``; frees it once released *and* no plan built
    from it is open (a C plan points into its runtime).

    Garbage collection may finalise a Runtime, its plans and this object in any
    order (e.g. in a reference cycle); counting open plans here keeps the
    runtime alive until the last plan is freed, whatever that order.
    """

    def __init__(self, ptr, free):
        self.ptr = ptr
        self._free = free
        self._lock = threading.Lock()
        self._open_plans = 0
        self.released = False

    def plan_opened(self):
        with self._lock:
            self._open_plans += 1

    def plan_closed(self):
        with self._lock:
            self._open_plans -= 1
        self._maybe_free()

    def release(self):
        with self._lock:
            self.released = True
        self._maybe_free()

    def _maybe_free(self):
        with self._lock:
            if not self.released or self._open_plans > 0 or self.ptr is None:
                return
            ptr, self.ptr = self.ptr, None
        self._free(ptr)

    def __del__(self):
        if not sys.is_finalizing():
            self.release()


class Runtime:
    """One mlajit runtime per GPU (``mlajit_runtime_t``); thread-safe.

    Args:
      device: CUDA ordinal, ``"cuda:N"`` or a ``torch.device``. Default: the
        current torch device when torch is imported and CUDA is available,
        else 0.
      cache_dir, prebuilt_dir, disable_jit, memory_only, save_source,
      max_bytes, record_manifest: kernel cache options (see README.md); None
        keeps the environment's value.

    Raises:
      MlajitError: FAILED_PRECONDITION without a GPU or driver,
        INVALID_ARGUMENT for a device index out of range.

    Use as a context manager or call :meth:`close`; closing frees the plans
    built from this runtime.
    """

    _rh = None  # class default: a Runtime whose creation failed is closed

    def __init__(self, device=None, *, cache_dir=None, prebuilt_dir=None, disable_jit=None,
                 memory_only=None, save_source=None, max_bytes=None, record_manifest=None):
        from ._cache import cache_options

        self._plans = weakref.WeakSet()
        self._lock = threading.Lock()
        self.device = _device_index(device)
        opts = cache_options(cache_dir=cache_dir, prebuilt_dir=prebuilt_dir,
                             disable_jit=disable_jit, memory_only=memory_only,
                             save_source=save_source, max_bytes=max_bytes,
                             record_manifest=record_manifest)
        ro = _lib.RuntimeOptions(device_index=self.device,
                                 cache=ctypes.pointer(opts) if opts is not None else None)
        lib = _lib.lib()
        handle = ctypes.c_void_p()
        _lib.check(lib.mlajit_runtime_create(ctypes.byref(ro), ctypes.byref(handle)),
                   "mlajit_runtime_create")
        self._rh = _RuntimeHandle(handle.value, lib.mlajit_runtime_free)

    @property
    def _handle(self):
        rh = self._rh
        return None if rh is None or rh.released else rh.ptr

    @property
    def closed(self):
        return self._handle is None

    @property
    def arch(self):
        """Architecture of the device, e.g. ``"sm_90a"``."""
        self._check_open()
        return _lib.lib().mlajit_runtime_arch(self._handle).decode()

    def _check_open(self):
        if self._handle is None:
            raise ValueError("the runtime is closed")

    def plan(self, qo_indptr, kv_indptr, *, num_heads, sm_scale, kv_format="fp8_e4m3",
             q_mode="bf16", causal=True, page_size=0, kv_lens=None, write_lse=False):
        """Builds a decode plan for one batch layout (``mlajit_plan_create``).

        Args:
          qo_indptr: [batch + 1] int32: query rows of sequence b are
            ``[qo_indptr[b], qo_indptr[b+1])``, q_len 0..8.
          kv_indptr: [batch + 1] int32: flat: token range of sequence b in kv;
            paged: range of sequence b in kv_indices (in pages).
            Both: torch CPU tensors, numpy arrays or lists of ints, copied to
            host int32. A CUDA tensor is copied to the host, which synchronises.
          num_heads: query heads, 1..128.
          sm_scale: softmax scale, finite and > 0 (1/sqrt(192) for DeepSeek-V3).
          kv_format: ``'fp8_e4m3'`` (per-tensor scale), ``'bf16'`` or ``'mxfp4'``.
          q_mode: ``'bf16'`` or ``'fp8'`` (Q quantised per tensor on the fly).
          causal: row t of a sequence sees kv tokens j <= kv_len - q_len + t.
          page_size: 0 (flat) or 1, 16, 32, 64, 128 (paged).
          kv_lens: paged only, [batch] int32 tokens per sequence (None: full pages).
          write_lse: decode also returns lse [total_q, num_heads] fp32.

        The plan depends on the *contents* of the arrays: build a new one when
        the lengths change. Compiles the kernel on first use of its shape.

        Raises:
          ValueError, TypeError: bad arguments, checked before calling C.
          MlajitError: the library rejected the layout (INVALID_ARGUMENT) or
            could not compile or load the kernel.
        """
        prepared = prepare_plan(qo_indptr, kv_indptr, num_heads, kv_format, q_mode, causal,
                                sm_scale, page_size, kv_lens, write_lse)
        self._check_open()
        plan = Plan(self, *prepared)
        with self._lock:
            self._plans.add(plan)
        return plan

    def tune(self, qo_indptr, kv_indptr, *, num_heads, sm_scale, kv_format="fp8_e4m3",
             q_mode="bf16", causal=True, page_size=0, kv_lens=None, write_lse=False,
             warmup_calls=5, timed_calls=100, persist=True, device_plans=False):
        """Times the kernel shapes the library can run for this config and
        batch layout and records the fastest for the batch's class
        (``mlajit_tune``).

        The class is the device model, kv_format, q_mode, page_size, max q_len x
        heads and the batch's work within a factor of two. Plans built
        afterwards for that class use the recorded shape: on this runtime and,
        with ``persist``, in later processes that open the same cache directory
        (``<cache_dir>/tuning.jsonl``), until the library version changes.

        Synchronous and slow (compiles every candidate, then times each on
        synthetic inputs on its own stream): not for the hot path. A candidate
        whose output disagrees with the default shape's is reported and never
        chosen; one must beat the default by 2 % to replace it.

        Args:
          qo_indptr, kv_indptr, num_heads, sm_scale, kv_format, q_mode, causal,
            page_size, kv_lens, write_lse: as for :meth:`plan`, with the same checks.
          warmup_calls: untimed calls per candidate, 0..1000.
          timed_calls: timed calls per candidate (the median is kept), 1..10000.
          persist: write the record to the runtime's cache directory.
          device_plans: record the choice also for :meth:`device_plan` plans of
            this config whose max_q_len is the layout's longest q_len.

        Returns:
          The parsed result: ``{"class": str, "chosen": int, "persisted": bool,
          "candidates": [{"shape", "block_m", "block_n", "num_warps",
          "num_stages", "ctas_per_sm", "min_split_cost", "median_us",
          "rel_diff", "status"}]}``; candidate 0 is the default shape,
          ``"status"`` is ``"ok"`` or why the candidate was skipped.

        Raises:
          ValueError, TypeError: bad arguments, checked before calling C.
          MlajitError: the library rejected the layout (INVALID_ARGUMENT, e.g.
            no query rows) or could not compile or run the default shape.
        """
        prepared = prepare_plan(qo_indptr, kv_indptr, num_heads, kv_format, q_mode, causal,
                                sm_scale, page_size, kv_lens, write_lse)
        options = prepare_tune_options(warmup_calls, timed_calls, persist, device_plans)
        self._check_open()
        config, batch, qo, kv, lens = prepared
        return json_call("mlajit_tune", self._handle, ctypes.byref(config), batch, qo, kv, lens,
                          ctypes.byref(options))

    def device_plan(self, *, max_batch_size, max_q_len=1, num_heads, sm_scale,
                    kv_format="fp8_e4m3", q_mode="bf16", causal=True, page_size=0,
                    write_lse=False, kv_len_hint=0):
        """A plan whose schedule the GPU rebuilds on every :meth:`Plan.update`
        (``mlajit_plan_create_device``), for CUDA graphs.

        The plan's buffers are sized once from the limits; ``update`` reads the
        layout from device tensors and, like ``decode``, only enqueues work
        (no allocation, no synchronisation), so both can be captured with
        ``torch.cuda.graph`` and replayed while the layout tensors change in
        place. Padded slots: a sequence of length 0, or in a paged layout one
        whose first page id is -1, reads nothing and gets zeros (lse -inf).

        Args:
          max_batch_size: 1..1048576, the largest batch of an update.
          max_q_len: 1..8, the longest q_len of a sequence in an update.
          kv_len_hint: 0 (none), or the longest kv_len the caller expects: the
            plan then takes the tiles a plan of its largest batch would take
            (faster on small batches). A hint: longer sequences still decode
            exactly.
          Other arguments as for :meth:`plan`.
        """
        max_batch_size = _int_arg(max_batch_size, "max_batch_size")
        max_q_len = _int_arg(max_q_len, "max_q_len")
        kv_len_hint = _int_arg(kv_len_hint, "kv_len_hint")
        if not 1 <= max_batch_size <= (1 << 20):
            raise ValueError("max_batch_size=%d: expected 1..1048576" % max_batch_size)
        if not 1 <= max_q_len <= 8:
            raise ValueError("max_q_len=%d: expected 1..8" % max_q_len)
        if not 0 <= kv_len_hint <= 0x7FFFFFFF:
            raise ValueError("kv_len_hint=%d: expected 0 (no hint) or a length in tokens"
                             % kv_len_hint)
        config, _, _, _, _ = prepare_plan([0], [0], num_heads, kv_format, q_mode, causal,
                                          sm_scale, page_size, None, write_lse)
        self._check_open()
        limits = _lib.PlanLimits(max_batch_size=max_batch_size, max_q_len=max_q_len,
                                 kv_len_hint=kv_len_hint)
        plan = Plan(self, config, 0, None, None, None, limits=limits)
        with self._lock:
            self._plans.add(plan)
        return plan

    def close(self):
        """Frees the plans built from this runtime, then the runtime. Idempotent."""
        if self._handle is None:
            return
        with self._lock:
            plans = list(self._plans)
            self._plans = weakref.WeakSet()
        for p in plans:
            p.close()
        self._rh.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Plans still open (only possible in a collected cycle) keep the C runtime.
        if self._rh is not None and not sys.is_finalizing():
            self._rh.release()

    def __repr__(self):
        if self._handle is None:
            return "<mlajit.Runtime closed>"
        return "<mlajit.Runtime device=%d arch=%s>" % (self.device, self.arch)


class Plan:
    """A decode plan (``mlajit_plan_t``): built by :meth:`Runtime.plan`.

    Decodes that share one plan must run on one stream (the plan owns its
    split-KV workspace); use one plan per stream for concurrent decodes.
    """

    _handle = None
    device_planned = False  # class defaults: set per plan in __init__
    max_rows = None

    def __init__(self, runtime, config, batch, qo, kv, lens, limits=None):
        lib = _lib.lib()
        handle = ctypes.c_void_p()
        if limits is None:
            _lib.check(lib.mlajit_plan_create(runtime._handle, ctypes.byref(config), batch, qo, kv,
                                              lens, ctypes.byref(handle)),
                       "mlajit_plan_create")
        else:
            _lib.check(lib.mlajit_plan_create_device(runtime._handle, ctypes.byref(config),
                                                     ctypes.byref(limits), ctypes.byref(handle)),
                       "mlajit_plan_create_device")
        self._handle = handle.value
        self._free = lib.mlajit_plan_free
        self._rh = runtime._rh  # the C plan points into its runtime: keep it alive
        self._rh.plan_opened()
        self.runtime = runtime
        self.batch_size = batch
        self.num_heads = config.num_heads
        self.kv_format = KvFormat(config.kv_format)
        self.q_mode = QMode(config.q_mode)
        self.causal = bool(config.causal)
        self.sm_scale = config.sm_scale
        self.page_size = config.page_size
        self.write_lse = bool(config.write_lse)
        # Device-built plans: the layout lives on the device, so q / out may hold
        # any number of rows up to the limits and kv is not bounds-checked here.
        self.device_planned = limits is not None
        self.max_batch_size = limits.max_batch_size if limits is not None else batch
        self.max_rows = limits.max_batch_size * limits.max_q_len if limits is not None else None
        self.total_q = qo[batch] if limits is None else None
        # Flat: tokens addressed in kv; paged: entries of kv_indices used.
        self.kv_extent = kv[batch] if limits is None else 0

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Frees the plan. Idempotent."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            self._free(handle)
            rh = getattr(self, "_rh", None)
            if rh is not None:
                rh.plan_closed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self._handle is not None and not sys.is_finalizing():
            self.close()

    def __repr__(self):
        state = "closed " if self._handle is None else ""
        if self.device_planned:
            return ("<mlajit.Plan %sdevice-built max_batch=%d max_rows=%d heads=%d kv_format=%s "
                    "page_size=%d>" % (state, self.max_batch_size, self.max_rows, self.num_heads,
                                       self.kv_format.name.lower(), self.page_size))
        return ("<mlajit.Plan %sbatch=%d total_q=%d heads=%d kv_format=%s page_size=%d>"
                % (state, self.batch_size, self.total_q, self.num_heads,
                   self.kv_format.name.lower(), self.page_size))

    def describe(self):
        """What the plan runs (``mlajit_plan_describe_json``), for logs and
        debugging: ``{"kernel": str, "block_m", "block_n", "num_warps",
        "num_stages", "num_ctas", "min_split_cost": int, "tuned": bool}``;
        ``"tuned"``: the shape came from a :meth:`Runtime.tune` record."""
        if self._handle is None:
            raise ValueError("the plan is closed")
        return json_call("mlajit_plan_describe_json", self._handle)

    # ---- device-built plans -------------------------------------------------

    def _stream(self, stream):
        handle = stream_handle(stream)
        if handle is None:
            torch = torch_module()
            if torch is not None and torch.cuda.is_available():
                handle = torch.cuda.current_stream(self.runtime.device).cuda_stream
        return handle or None

    def _layout_array(self, value, name, length):
        arr = device_array(value, name)
        if arr.dtype != "int32":
            raise TypeError("%s has dtype %s: expected int32 on the device" % (name, arr.dtype))
        if len(arr.shape) != 1 or arr.shape[0] != length:
            raise ValueError("%s has shape %s: expected [%d]" % (name, arr.shape, length))
        if not arr.contiguous:
            raise ValueError("%s is not contiguous" % name)
        self._check_device(arr, name)
        return arr.ptr

    def update(self, qo_indptr, kv_indptr, kv_lens=None, *, stream=None):
        """Enqueues the rebuild of a device-built plan's schedule
        (``mlajit_plan_update_async``) from device int32 tensors laid out as
        for :meth:`Runtime.plan`: qo_indptr and kv_indptr [batch + 1], kv_lens
        [batch] (paged only; None: full pages). Read when the update runs, so
        a captured update follows later in-place changes. Capture-safe.
        """
        if self._handle is None:
            raise ValueError("the plan is closed")
        if not self.device_planned:
            raise ValueError("update() needs a plan from Runtime.device_plan(); this one was "
                             "built from host arrays")
        qa = device_array(qo_indptr, "qo_indptr")
        if len(qa.shape) != 1 or qa.shape[0] < 1:
            raise ValueError("qo_indptr has shape %s: expected [batch + 1]" % (qa.shape,))
        batch = qa.shape[0] - 1
        if batch > self.max_batch_size:
            raise ValueError("batch %d (len(qo_indptr) - 1) exceeds max_batch_size=%d"
                             % (batch, self.max_batch_size))
        qo = self._layout_array(qo_indptr, "qo_indptr", batch + 1)
        kv = self._layout_array(kv_indptr, "kv_indptr", batch + 1)
        lens = None
        if kv_lens is not None:
            if self.page_size == 0:
                raise ValueError("kv_lens given for a flat plan (page_size=0)")
            lens = self._layout_array(kv_lens, "kv_lens", batch)
        _lib.check(_lib.lib().mlajit_plan_update_async(self._handle, batch, qo, kv, lens,
                                                       self._stream(stream)),
                   "mlajit_plan_update_async")

    def check_update(self, *, stream=None):
        """Waits for the stream and raises MlajitError (INVALID_ARGUMENT) if
        the last update's layout was rejected on the device. Not capture-safe."""
        if self._handle is None:
            raise ValueError("the plan is closed")
        _lib.check(_lib.lib().mlajit_plan_check_update(self._handle, self._stream(stream)),
                   "mlajit_plan_check_update")

    # ---- decode ------------------------------------------------------------

    def _check_device(self, arr, name):
        if arr.device is not None and arr.device != self.runtime.device:
            raise ValueError("%s is on cuda:%d: expected cuda:%d (the runtime's device)"
                             % (name, arr.device, self.runtime.device))

    def _check(self, arr, name, dtypes, shape, what):
        if arr.dtype not in dtypes:
            raise TypeError("%s has dtype %s: expected %s" % (name, arr.dtype, what))
        if arr.shape != shape:
            raise ValueError("%s has shape %s: expected %s (%s)" % (name, arr.shape, shape, what))
        if not arr.contiguous:
            raise ValueError("%s is not contiguous: expected a row-major contiguous %s" % (name, what))
        self._check_device(arr, name)

    def _check_kv(self, kv):
        fmt = self.kv_format
        accepted = _KV_DTYPES[fmt]
        fmt_name = fmt.name.lower()
        if kv.dtype not in accepted:
            raise TypeError("kv has dtype %s: expected %s for kv_format=%s"
                            % (kv.dtype, " or ".join(sorted(accepted)), fmt_name))
        width = accepted[kv.dtype]
        shape = kv.shape
        if self.page_size > 0 and len(shape) == 3:
            if shape[1] != self.page_size or shape[2] != width:
                raise ValueError("kv has shape %s: expected [num_pages, %d, %d] (%s, page_size=%d)"
                                 % (shape, self.page_size, width, kv.dtype, self.page_size))
        elif len(shape) != 2 or shape[1] != width:
            layout = "[num_slots, %d] or [num_pages, %d, %d]" % (width, self.page_size, width) \
                if self.page_size else "[num_tokens, %d]" % width
            raise ValueError("kv has shape %s: expected %s for kv_format=%s as %s"
                             % (shape, layout, fmt_name, kv.dtype))
        if not kv.contiguous:
            raise ValueError("kv is not contiguous: expected a row-major contiguous KV cache")
        self._check_device(kv, "kv")
        if self.page_size == 0:
            tokens = shape[0]
            if tokens < self.kv_extent:
                raise ValueError("kv has %d tokens: the plan addresses %d (kv_indptr[-1])"
                                 % (tokens, self.kv_extent))

    def _alloc(self, shape, dtype_name, name):
        torch = torch_module()
        if torch is None:
            try:
                import torch
            except ImportError:
                raise ValueError("%s was not given and torch is not installed to allocate it: "
                                 "pass a device array %s" % (name, shape)) from None
        dtype = getattr(torch, dtype_name)
        return torch.empty(shape, dtype=dtype, device="cuda:%d" % self.runtime.device)

    def decode(self, q, kv, *, kv_scale=1.0, kv_indices=None, out=None, lse=None, stream=None):
        """Enqueues the decode (``mlajit_decode``) and returns its output.

        Args:
          q: [total_q, num_heads, 576] bfloat16, contiguous, on the runtime's device.
          kv: the KV cache, contiguous, on the runtime's device:
            bf16: [N, 576] bfloat16 (or [N, 1152] uint8);
            fp8_e4m3: [N, 576] float8_e4m3fn or uint8 codes, real = code * kv_scale;
            mxfp4: [N, 306] uint8 (288 bytes of e2m1 pairs, low nibble = even
            element, then 18 e8m0 scales). Paged plans also accept
            [num_pages, page_size, width]; N = num_pages * page_size slots.
          kv_scale: fp8 dequantisation scale (finite, > 0); ignored otherwise.
          kv_indices: paged plans only: [>= kv_indptr[-1]] int32 page ids on the device.
          out: [total_q, num_heads, 512] bfloat16; allocated with torch when None.
          lse: [total_q, num_heads] float32, only for plans built with
            write_lse=True; allocated with torch when None.
          stream: a torch.cuda.Stream, a raw cudaStream_t (int) or an object with
            ``.cuda_stream`` / ``.ptr``. Default: torch's current stream on the
            runtime's device when torch is imported, else the default stream.

        Torch tensors are checked for device; ``__cuda_array_interface__``
        objects carry no device, so they must be on the runtime's device. bf16
        slots accept 16-bit bit patterns (uint16 / int16) from producers without
        a bf16 type. The call is asynchronous: inputs must stay alive until the
        stream reaches the kernel (as for any torch op on that stream).

        Returns:
          out, or (out, lse) when the plan writes lse.

        Raises:
          TypeError, ValueError: bad arguments (named, with the value and the
            expectation), checked before calling C.
          MlajitError: the library rejected the call.
        """
        if self._handle is None:
            raise ValueError("the plan is closed")
        if self.runtime.closed:
            raise ValueError("the plan's runtime is closed")
        h = self.num_heads
        tq = self.total_q
        qa = device_array(q, "q")
        if self.device_planned:
            # Any row count up to the limits: the device layout says which are used.
            tq = qa.shape[0] if len(qa.shape) == 3 else -1
            if not 0 <= tq <= self.max_rows:
                raise ValueError("q has shape %s: expected [rows, %d, 576] with rows <= %d "
                                 "(max_batch_size * max_q_len)" % (qa.shape, h, self.max_rows))
        self._check(qa, "q", _BF16, (tq, h, HEAD_DIM_QK), "[total_q, num_heads, 576] bfloat16")
        kva = device_array(kv, "kv")
        self._check_kv(kva)
        try:
            scale = float(kv_scale)
        except (TypeError, ValueError):
            raise TypeError("kv_scale=%r: expected a float" % (kv_scale,)) from None
        if self.kv_format == KvFormat.FP8_E4M3 and not (scale > 0 and math.isfinite(scale)):
            raise ValueError("kv_scale=%r: expected a finite value > 0 for fp8 KV" % (kv_scale,))
        idx_ptr = None
        if self.page_size > 0:
            if kv_indices is None:
                raise ValueError("kv_indices is None but the plan is paged (page_size=%d): expected "
                                 "[>= %d] int32 page ids on the device" % (self.page_size, self.kv_extent))
            ia = device_array(kv_indices, "kv_indices")
            if ia.dtype != "int32":
                raise TypeError("kv_indices has dtype %s: expected int32 page ids" % ia.dtype)
            if len(ia.shape) != 1 or ia.shape[0] < max(self.kv_extent, 1):
                raise ValueError("kv_indices has shape %s: expected 1-D with >= %d entries "
                                 "(kv_indptr[-1])" % (ia.shape, self.kv_extent))
            if not ia.contiguous:
                raise ValueError("kv_indices is not contiguous")
            self._check_device(ia, "kv_indices")
            idx_ptr = ia.ptr
        elif kv_indices is not None:
            raise ValueError("kv_indices is given but the plan is flat (page_size=0)")
        if out is None:
            out = self._alloc((tq, h, HEAD_DIM_V), "bfloat16", "out")
        oa = device_array(out, "out")
        self._check(oa, "out", _BF16, (tq, h, HEAD_DIM_V), "[total_q, num_heads, 512] bfloat16")
        lse_ptr = None
        if self.write_lse:
            if lse is None:
                lse = self._alloc((tq, h), "float32", "lse")
            la = device_array(lse, "lse")
            self._check(la, "lse", ("float32",), (tq, h), "[total_q, num_heads] float32")
            lse_ptr = la.ptr
        elif lse is not None:
            raise ValueError("lse is given but the plan was built with write_lse=False")

        handle = self._stream(stream)
        args = _lib.DecodeArgs(q=qa.ptr or None, kv=kva.ptr or None, kv_bytes=kva.nbytes,
                               kv_scale=scale, kv_indices=idx_ptr or None, out=oa.ptr or None,
                               lse=lse_ptr or None)
        _lib.check(_lib.lib().mlajit_decode(self._handle, ctypes.byref(args), handle or None),
                   "mlajit_decode")
        return (out, lse) if self.write_lse else out

    __call__ = decode


__all__ = ["Runtime", "Plan", "MlajitError", "default_device"]
