"""Loading libmlajit and the ctypes mirror of include/mlajit/mlajit.h.

The library is loaded lazily, on the first call that needs it, so that
``import mlajit`` works on machines without the library, a GPU or torch.

Search order (the first that loads wins):

1. ``$MLAJIT_LIBRARY``: a path to ``libmlajit.so*``. When set, it is the only
   candidate: a wrong path is reported instead of silently loading another copy.
2. Next to the package: ``<package>/libmlajit.so.0``, ``<package>/libmlajit.so``
   (a bundled copy), then the development build of the repository,
   ``<repo>/build/src/api/libmlajit.so.0`` (this file is
   ``<repo>/tools/python/mlajit/_lib.py``).
3. The system loader: ``libmlajit.so.0``, ``libmlajit.so``
   (``LD_LIBRARY_PATH``, ``ldconfig``, rpath of the process).

Every struct below mirrors the C declaration field by field (ctypes applies the
same natural alignment as the C compiler); enums are C ``int``.
``tests/test_cpu.py`` compiles a small C program against the header and compares
sizes and field offsets with these mirrors.
"""

import ctypes
import enum
import os
import threading

__all__ = [
    "Status",
    "KvFormat",
    "QMode",
    "LogLevel",
    "MlajitError",
    "LibraryNotFoundError",
    "CacheOptions",
    "CachePruneOptions",
    "WarmProgress",
    "RuntimeOptions",
    "PlanConfig",
    "DecodeArgs",
    "TuneOptions",
    "LOG_SINK",
    "WARM_CALLBACK",
    "lib",
    "library_path",
    "check",
    "last_error",
]


class Status(enum.IntEnum):
    """``mlajit_status_t``; the values equal absl::StatusCode's."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class KvFormat(enum.IntEnum):
    """``mlajit_kv_format_t``."""

    BF16 = 0
    FP8_E4M3 = 1
    MXFP4 = 2


class QMode(enum.IntEnum):
    """``mlajit_q_mode_t``."""

    BF16 = 0
    FP8 = 1


class LogLevel(enum.IntEnum):
    """``mlajit_log_level_t``."""

    ERROR = 0
    WARN = 1
    INFO = 2
    DEBUG = 3


class MlajitError(RuntimeError):
    """A failed mlajit call.

    Attributes:
      code: the :class:`Status` returned by the C function (an int for codes
        this module does not know).
      status: the status name, e.g. ``"FAILED_PRECONDITION"``.
      message: ``mlajit_last_error()`` of the failed call (names the argument,
        the value and what was expected).
      function: the C function that failed, or ``None``.
    """

    def __init__(self, code, message, function=None):
        try:
            code = Status(code)
            name = code.name
        except ValueError:
            name = "STATUS_%d" % int(code)
        self.code = code
        self.status = name
        self.message = message
        self.function = function
        # Messages of the cache calls already start with the function's name.
        prefix = "%s: " % function if function and not message.startswith(function) else ""
        super().__init__("%s%s: %s" % (prefix, name, message))

    def __reduce__(self):
        return (MlajitError, (int(self.code), self.message, self.function))


class LibraryNotFoundError(OSError):
    """libmlajit could not be loaded; the message lists every path tried."""


# ---- struct mirrors --------------------------------------------------------

_c_int = ctypes.c_int  # C enums are int-sized on every ABI mlajit supports.


class CacheOptions(ctypes.Structure):
    """``mlajit_cache_options_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("cache_dir", ctypes.c_char_p),
        ("prebuilt_dir", ctypes.c_char_p),
        ("memory_only", ctypes.c_int),
        ("disable_jit", ctypes.c_int),
        ("save_source", ctypes.c_int),
        ("trust_cache_dir", ctypes.c_int),
        ("max_bytes", ctypes.c_uint64),
        ("record_manifest", ctypes.c_char_p),
        ("pins_file", ctypes.c_char_p),
    ]

    def __init__(self, **kwargs):
        # MLAJIT_CACHE_OPTIONS_INIT
        super().__init__(struct_size=ctypes.sizeof(CacheOptions), **kwargs)


class CachePruneOptions(ctypes.Structure):
    """``mlajit_cache_prune_options_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("max_bytes", ctypes.c_int64),
        ("older_than_s", ctypes.c_int64),
        ("stale", ctypes.c_int),
    ]

    def __init__(self, **kwargs):
        # MLAJIT_CACHE_PRUNE_OPTIONS_INIT
        values = dict(max_bytes=-1, older_than_s=-1, stale=0)
        values.update(kwargs)
        super().__init__(struct_size=ctypes.sizeof(CachePruneOptions), **values)


class WarmProgress(ctypes.Structure):
    """``mlajit_warm_progress_t`` (read only: the library fills it)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("done", ctypes.c_int),
        ("total", ctypes.c_int),
        ("compiled", ctypes.c_int),
        ("failed", ctypes.c_int),
        ("elapsed_s", ctypes.c_double),
        ("spec_name", ctypes.c_char_p),
        ("key_hex", ctypes.c_char_p),
        ("status", _c_int),
        ("error", ctypes.c_char_p),
    ]


class RuntimeOptions(ctypes.Structure):
    """``mlajit_runtime_options_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device_index", ctypes.c_int),
        ("cache", ctypes.POINTER(CacheOptions)),
    ]

    def __init__(self, **kwargs):
        # MLAJIT_RUNTIME_OPTIONS_INIT
        super().__init__(struct_size=ctypes.sizeof(RuntimeOptions), **kwargs)


class PlanConfig(ctypes.Structure):
    """``mlajit_plan_config_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("num_heads", ctypes.c_int),
        ("kv_format", _c_int),
        ("q_mode", _c_int),
        ("causal", ctypes.c_int),
        ("sm_scale", ctypes.c_float),
        ("page_size", ctypes.c_int),
        ("write_lse", ctypes.c_int),
    ]

    def __init__(self, **kwargs):
        # MLAJIT_PLAN_CONFIG_INIT
        values = dict(num_heads=0, kv_format=int(KvFormat.FP8_E4M3), q_mode=int(QMode.BF16),
                      causal=1, sm_scale=0.0, page_size=0, write_lse=0)
        values.update(kwargs)
        super().__init__(struct_size=ctypes.sizeof(PlanConfig), **values)


class PlanLimits(ctypes.Structure):
    """``mlajit_plan_limits_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("max_batch_size", ctypes.c_int),
        ("max_q_len", ctypes.c_int),
        ("kv_len_hint", ctypes.c_int),
    ]

    def __init__(self, **kwargs):
        # MLAJIT_PLAN_LIMITS_INIT
        values = dict(max_batch_size=0, max_q_len=1, kv_len_hint=0)
        values.update(kwargs)
        super().__init__(struct_size=ctypes.sizeof(PlanLimits), **values)


class DecodeArgs(ctypes.Structure):
    """``mlajit_decode_args_t`` (pointers as integers)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("q", ctypes.c_void_p),
        ("kv", ctypes.c_void_p),
        ("kv_bytes", ctypes.c_uint64),
        ("kv_scale", ctypes.c_float),
        ("kv_indices", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
    ]

    def __init__(self, **kwargs):
        # MLAJIT_DECODE_ARGS_INIT
        values = dict(kv_scale=1.0)
        values.update(kwargs)
        super().__init__(struct_size=ctypes.sizeof(DecodeArgs), **values)


class TuneOptions(ctypes.Structure):
    """``mlajit_tune_options_t``."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("warmup_calls", ctypes.c_int),
        ("timed_calls", ctypes.c_int),
        ("persist", ctypes.c_int),
        ("device_plans", ctypes.c_int),
    ]

    def __init__(self, **kwargs):
        # MLAJIT_TUNE_OPTIONS_INIT
        values = dict(warmup_calls=5, timed_calls=100, persist=1, device_plans=0)
        values.update(kwargs)
        super().__init__(struct_size=ctypes.sizeof(TuneOptions), **values)


# void (*)(mlajit_log_level_t level, const char* line, void* user)
LOG_SINK = ctypes.CFUNCTYPE(None, _c_int, ctypes.c_char_p, ctypes.c_void_p)
# void (*)(const mlajit_warm_progress_t* progress, void* user)
WARM_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.POINTER(WarmProgress), ctypes.c_void_p)

_status = _c_int
_handle = ctypes.c_void_p
_out_str = ctypes.POINTER(ctypes.c_void_p)  # char**: kept as void* so mlajit_free gets the pointer

# name -> (restype, argtypes)
_PROTOTYPES = {
    "mlajit_version": (ctypes.c_char_p, []),
    "mlajit_last_error": (ctypes.c_char_p, []),
    "mlajit_set_log_sink": (None, [LOG_SINK, ctypes.c_void_p]),
    "mlajit_free": (None, [ctypes.c_void_p]),
    "mlajit_cache_open": (_status, [ctypes.POINTER(CacheOptions), ctypes.POINTER(_handle)]),
    "mlajit_cache_close": (None, [_handle]),
    "mlajit_cache_list_json": (_status, [_handle, _out_str]),
    "mlajit_cache_show_json": (_status, [_handle, ctypes.c_char_p, _out_str]),
    "mlajit_cache_verify_json": (_status, [_handle, ctypes.POINTER(ctypes.c_int), _out_str]),
    "mlajit_cache_stats_json": (_status, [_handle, _out_str]),
    "mlajit_cache_explain_json": (_status, [_handle, ctypes.c_char_p, ctypes.c_char_p, _out_str]),
    "mlajit_cache_prune_json": (_status, [_handle, ctypes.POINTER(CachePruneOptions), _out_str]),
    "mlajit_cache_clear": (_status, [_handle, ctypes.POINTER(ctypes.c_uint64)]),
    "mlajit_cache_warm": (_status, [_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                    WARM_CALLBACK, ctypes.c_void_p, _out_str]),
    "mlajit_runtime_create": (_status, [ctypes.POINTER(RuntimeOptions), ctypes.POINTER(_handle)]),
    "mlajit_runtime_free": (None, [_handle]),
    "mlajit_runtime_arch": (ctypes.c_char_p, [_handle]),
    "mlajit_plan_create": (_status, [_handle, ctypes.POINTER(PlanConfig), ctypes.c_int,
                                     ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32),
                                     ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(_handle)]),
    "mlajit_plan_free": (None, [_handle]),
    "mlajit_plan_describe_json": (_status, [_handle, _out_str]),
    "mlajit_plan_create_device": (_status, [_handle, ctypes.POINTER(PlanConfig),
                                            ctypes.POINTER(PlanLimits), ctypes.POINTER(_handle)]),
    "mlajit_plan_update_async": (_status, [_handle, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_void_p, ctypes.c_void_p]),
    "mlajit_plan_check_update": (_status, [_handle, ctypes.c_void_p]),
    "mlajit_decode": (_status, [_handle, ctypes.POINTER(DecodeArgs), ctypes.c_void_p]),
    "mlajit_tune": (_status, [_handle, ctypes.POINTER(PlanConfig), ctypes.c_int,
                              ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32),
                              ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(TuneOptions),
                              _out_str]),
}

# Without these the library is not usable at all; a library older than these
# bindings may lack others, which then fail when called.
_CORE = ("mlajit_version", "mlajit_last_error", "mlajit_free", "mlajit_runtime_create",
         "mlajit_runtime_free", "mlajit_plan_create", "mlajit_plan_free", "mlajit_decode")

_LIB_NAMES = ("libmlajit.so.0", "libmlajit.so")


def _missing_symbol(name, path):
    def call(*args):
        raise MlajitError(Status.UNIMPLEMENTED,
                          "%s is not exported by %s (a library older than these bindings)"
                          % (name, path), name)
    return call

_lock = threading.Lock()
_lib = None
_lib_path = None


def _candidates():
    """Yields (description, path-or-name) in search order."""
    env = os.environ.get("MLAJIT_LIBRARY")
    if env:
        yield ("$MLAJIT_LIBRARY", env)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _LIB_NAMES:
        yield ("next to the package", os.path.join(here, name))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    for name in _LIB_NAMES:
        yield ("repository build", os.path.join(repo, "build", "src", "api", name))
    for name in _LIB_NAMES:
        yield ("system loader", name)


def _load():
    tried = []
    for where, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append("  %s (%s): no such file" % (path, where))
            continue
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append("  %s (%s): %s" % (path, where, e))
            continue
        missing = [n for n in _PROTOTYPES if not hasattr(handle, n)]
        core = [n for n in missing if n in _CORE]
        if core:
            tried.append("  %s (%s): loaded but lacks %s (not libmlajit, or too old)"
                         % (path, where, ", ".join(core)))
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            if name in missing:
                setattr(handle, name, _missing_symbol(name, path))
                continue
            fn = getattr(handle, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return handle, path
    raise LibraryNotFoundError(
        "cannot load libmlajit; tried:\n" + "\n".join(tried) +
        "\nbuild it (tools/dev build) and set MLAJIT_LIBRARY to "
        "<build>/src/api/libmlajit.so, or install it where the system loader finds it")


def lib():
    """The loaded library (a ``ctypes.CDLL`` with prototypes set).

    Raises:
      LibraryNotFoundError: no candidate loaded; the message lists them all.
    """
    global _lib, _lib_path
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib, _lib_path = _load()
    return _lib


def library_path():
    """Path (or loader name) of the loaded library; loads it if needed."""
    lib()
    return _lib_path


def last_error():
    """``mlajit_last_error()`` of this thread, decoded."""
    raw = lib().mlajit_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def check(status, function):
    """Raises MlajitError for a non-OK status, with this thread's last error."""
    if status != 0:
        raise MlajitError(status, last_error(), function)
