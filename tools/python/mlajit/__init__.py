"""mlajit: run-time compiled MLA decode kernels, from Python (ctypes over the C ABI).

Importing needs neither the library, a GPU nor torch; errors surface on use::

    import math, torch, mlajit

    rt = mlajit.Runtime()                         # current torch device
    plan = rt.plan([0, 1, 2], [0, 700, 1900],     # host indptrs, batch 2, q_len 1
                   num_heads=16, kv_format="fp8_e4m3", sm_scale=1 / math.sqrt(192))
    out = plan.decode(q, kv, kv_scale=0.02)       # q [2, 16, 576] bf16, kv [1900, 576] fp8
    # out: [2, 16, 512] bf16, enqueued on torch.cuda.current_stream()

The library is found through ``$MLAJIT_LIBRARY``, next to the package, the
repository's ``build/src/api``, then the system loader (see ``_lib.py``).
Failed calls raise :class:`MlajitError` with the C status and the library's
message; bad arguments are caught in Python first (ValueError / TypeError).
"""

import sys

from . import _lib
from ._cache import (Cache, WarmReport, cache_clear, cache_explain, cache_list, cache_options,
                     cache_prune, cache_show, cache_stats, cache_verify, cache_warm)
from ._lib import (KvFormat, LibraryNotFoundError, LogLevel, MlajitError, QMode, Status,
                   library_path)
from ._runtime import HEAD_DIM_QK, HEAD_DIM_V, KV_TOKEN_BYTES, Plan, Runtime

__all__ = [
    "Runtime", "Plan", "MlajitError", "LibraryNotFoundError", "Status", "KvFormat", "QMode",
    "LogLevel", "Cache", "WarmReport", "version", "library_path", "set_log_handler",
    "cache_list", "cache_show", "cache_stats", "cache_verify", "cache_explain", "cache_prune",
    "cache_clear", "cache_warm", "cache_options", "HEAD_DIM_QK", "HEAD_DIM_V", "KV_TOKEN_BYTES",
]

# The version of these bindings; version() reports the loaded library's.
__version__ = "0.1.0"


def version():
    """The loaded library's version, ``"MAJOR.MINOR.PATCH"``."""
    return _lib.lib().mlajit_version().decode()


# The C library stores the function pointer: the ctypes callback object must
# outlive every call into the library that may log.
_log_callback = None


def set_log_handler(handler):
    """Routes the library's log lines to ``handler(level, line)``.

    ``level`` is a :class:`LogLevel`, ``line`` a str (one event, no newline).
    The handler may be called from library threads (e.g. compile workers);
    exceptions it raises are printed to stderr and otherwise ignored, since they
    cannot unwind through C. ``None`` restores the default (stderr). Verbosity
    is set with ``$MLAJIT_LOG`` (error, warn, info, debug).
    """
    global _log_callback
    lib = _lib.lib()
    if handler is None:
        lib.mlajit_set_log_sink(_lib.LOG_SINK(), None)
        if _log_callback is not None:
            _retired_callbacks.append(_log_callback)
        _log_callback = None
        return
    if not callable(handler):
        raise TypeError("handler has type %s: expected a callable(level, line) or None"
                        % type(handler).__name__)

    def trampoline(level, line, user):
        try:
            try:
                lvl = LogLevel(level)
            except ValueError:
                lvl = level
            handler(lvl, (line or b"").decode("utf-8", "replace"))
        except BaseException as e:  # must not unwind through C
            try:
                sys.stderr.write("mlajit log handler raised %r\n" % (e,))
            except Exception:
                pass

    callback = _lib.LOG_SINK(trampoline)
    lib.mlajit_set_log_sink(callback, None)
    # Replaced only after the library points at the new callback; the old one
    # stays referenced by nothing but may still be mid-call on another thread,
    # so it is kept in a list of retired callbacks (a few bytes each).
    if _log_callback is not None:
        _retired_callbacks.append(_log_callback)
    _log_callback = callback


_retired_callbacks = []
