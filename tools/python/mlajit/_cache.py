"""The kernel cache calls (``mlajit_cache_*``): inspection, maintenance, warm-up.

Results are the library's JSON documents parsed into dicts (fields in
cache/README.md). The module functions open the cache, run one call and close it;
use :class:`Cache` for several calls on one handle.
"""

import ctypes
import json
import os
import sys

from . import _lib
from ._lib import MlajitError


class WarmReport:
    """One finished spec of :meth:`Cache.warm`, passed to its progress callback.

    Attributes: done, total, compiled, failed (counts so far), elapsed_s,
    spec_name, key_hex ("" when the spec failed before it had a key),
    status (:class:`mlajit.Status`), error ("" when status is OK).
    """

    __slots__ = ("done", "total", "compiled", "failed", "elapsed_s", "spec_name", "key_hex",
                 "status", "error")

    def __init__(self, p):
        self.done = p.done
        self.total = p.total
        self.compiled = p.compiled
        self.failed = p.failed
        self.elapsed_s = p.elapsed_s
        self.spec_name = (p.spec_name or b"").decode("utf-8", "replace")
        self.key_hex = (p.key_hex or b"").decode("utf-8", "replace")
        try:
            self.status = _lib.Status(p.status)
        except ValueError:
            self.status = p.status
        self.error = (p.error or b"").decode("utf-8", "replace")

    def __repr__(self):
        return ("WarmReport(done=%d/%d, compiled=%d, failed=%d, spec=%s, status=%s)"
                % (self.done, self.total, self.compiled, self.failed, self.spec_name,
                   getattr(self.status, "name", self.status)))


def _path(value, name):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, (str, os.PathLike)):
        return os.fsencode(value)
    raise TypeError("%s has type %s: expected a path (str, bytes or os.PathLike)"
                    % (name, type(value).__name__))


def cache_options(cache_dir=None, prebuilt_dir=None, memory_only=None, disable_jit=None,
                  save_source=None, trust_cache_dir=None, max_bytes=None, record_manifest=None):
    """An ``mlajit_cache_options_t``, or None when every argument is None
    (the library then uses its defaults and the environment)."""
    given = [cache_dir, prebuilt_dir, memory_only, disable_jit, save_source, trust_cache_dir,
             max_bytes, record_manifest]
    if all(v is None for v in given):
        return None
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError("max_bytes=%r: expected an int >= 0 (0: the default cap)" % (max_bytes,))
    o = _lib.CacheOptions(
        cache_dir=_path(cache_dir, "cache_dir"),
        prebuilt_dir=_path(prebuilt_dir, "prebuilt_dir"),
        memory_only=1 if memory_only else 0,
        disable_jit=1 if disable_jit else 0,
        save_source=1 if save_source else 0,
        trust_cache_dir=1 if trust_cache_dir else 0,
        max_bytes=max_bytes or 0,
        record_manifest=_path(record_manifest, "record_manifest"))
    return o


def _take_json(ptr):
    """Parses a library-allocated JSON string and frees it."""
    if not ptr.value:
        return None
    try:
        text = ctypes.string_at(ptr.value).decode("utf-8", "replace")
    finally:
        _lib.lib().mlajit_free(ptr.value)
    return json.loads(text)


def json_call(function, *args):
    """Calls ``function(*args, char** json)`` and returns the parsed JSON,
    raising MlajitError (and freeing any output) when it fails."""
    out = ctypes.c_void_p()
    status = getattr(_lib.lib(), function)(*args, ctypes.byref(out))
    try:
        _lib.check(status, function)
    except MlajitError:
        if out.value:
            _lib.lib().mlajit_free(out.value)
        raise
    return _take_json(out)


class Cache:
    """A kernel cache opened for inspection, maintenance and warm-up
    (``mlajit_cache_t``; thread-safe). Context manager; :meth:`close` frees it.

    Args: as :func:`cache_options`; all None: ``$MLAJIT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/mlajit``, else ``~/.cache/mlajit``.
    """

    _handle = None

    def __init__(self, cache_dir=None, *, prebuilt_dir=None, memory_only=None, disable_jit=None,
                 save_source=None, trust_cache_dir=None, max_bytes=None, record_manifest=None):
        opts = cache_options(cache_dir=cache_dir, prebuilt_dir=prebuilt_dir,
                             memory_only=memory_only, disable_jit=disable_jit,
                             save_source=save_source, trust_cache_dir=trust_cache_dir,
                             max_bytes=max_bytes, record_manifest=record_manifest)
        lib = _lib.lib()
        handle = ctypes.c_void_p()
        _lib.check(lib.mlajit_cache_open(ctypes.byref(opts) if opts is not None else None,
                                         ctypes.byref(handle)), "mlajit_cache_open")
        self._handle = handle.value
        self._close = lib.mlajit_cache_close

    def close(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            self._close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self._handle is not None and not sys.is_finalizing():
            self.close()

    def _h(self):
        if self._handle is None:
            raise ValueError("the cache is closed")
        return self._handle

    def _json_call(self, name, *args):
        return json_call(name, self._h(), *args)

    def list(self):
        """{"cache_dir": ..., "entries": [{"key", "template", "arch", "spec", ...}]}"""
        return self._json_call("mlajit_cache_list_json")

    def show(self, key_hex):
        """One entry by key (32 hex digits). MlajitError NOT_FOUND when absent."""
        return self._json_call("mlajit_cache_show_json", _key(key_hex, "key_hex"))

    def verify(self):
        """Checks every entry file; returns (num_bad, report dict)."""
        bad = ctypes.c_int(0)
        report = self._json_call("mlajit_cache_verify_json", ctypes.byref(bad))
        return bad.value, report

    def stats(self):
        """Entries, bytes, hits, misses, compiles; entries/bytes by arch and template."""
        return self._json_call("mlajit_cache_stats_json")

    def explain(self, key_a, key_b):
        """Which key fields and spec fields differ between two entries."""
        return self._json_call("mlajit_cache_explain_json", _key(key_a, "key_a"),
                               _key(key_b, "key_b"))

    def prune(self, *, max_bytes=None, older_than_s=None, stale=False):
        """Removes stale entries, then entries unused for older_than_s seconds,
        then least recently used ones down to max_bytes (at least one must be set).
        Returns {"removed", "stale", "older_than", "max_bytes"}."""
        o = _lib.CachePruneOptions(max_bytes=-1 if max_bytes is None else int(max_bytes),
                                   older_than_s=-1 if older_than_s is None else int(older_than_s),
                                   stale=1 if stale else 0)
        return self._json_call("mlajit_cache_prune_json", ctypes.byref(o))

    def clear(self):
        """Removes every entry; returns the number removed."""
        removed = ctypes.c_uint64(0)
        _lib.check(_lib.lib().mlajit_cache_clear(self._h(), ctypes.byref(removed)),
                   "mlajit_cache_clear")
        return removed.value

    def warm(self, manifest, arch=None, jobs=0, progress=None):
        """Compiles every spec of a manifest into the cache (no GPU needed).

        Args:
          manifest: path of a JSONL manifest (one KernelSpec per line).
          arch: target override, e.g. ``"sm_90a"``; None keeps each spec's.
          jobs: compile threads (<= 0: one per core).
          progress: optional callable(WarmReport), called once per finished
            spec from a worker thread (never concurrently). An exception it
            raises is re-raised after the warm-up ends.

        Returns: {"total", "compiled", "cached", "failed", "elapsed_s"}.

        Raises: MlajitError with the first failure's status; its message counts
        all failures.
        """
        errors = []

        def trampoline(p, user):
            if errors:
                return
            try:
                progress(WarmReport(p.contents))
            except BaseException as e:  # must not unwind through C
                errors.append(e)

        callback = _lib.WARM_CALLBACK(trampoline) if progress is not None else _lib.WARM_CALLBACK()
        arch_b = arch.encode() if isinstance(arch, str) else arch
        result = self._json_call("mlajit_cache_warm", _path(manifest, "manifest"), arch_b,
                                 int(jobs), callback, None)
        if errors:
            raise errors[0]
        return result


def _key(value, name):
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes):
        return value
    raise TypeError("%s has type %s: expected a hex string" % (name, type(value).__name__))


def cache_list(cache_dir=None, **options):
    """:meth:`Cache.list` on a cache opened for this call."""
    with Cache(cache_dir, **options) as c:
        return c.list()


def cache_show(key_hex, cache_dir=None, **options):
    """:meth:`Cache.show` on a cache opened for this call."""
    with Cache(cache_dir, **options) as c:
        return c.show(key_hex)


def cache_stats(cache_dir=None, **options):
    """:meth:`Cache.stats` on a cache opened for this call."""
    with Cache(cache_dir, **options) as c:
        return c.stats()


def cache_verify(cache_dir=None, **options):
    """:meth:`Cache.verify` on a cache opened for this call: (num_bad, report)."""
    with Cache(cache_dir, **options) as c:
        return c.verify()


def cache_explain(key_a, key_b, cache_dir=None, **options):
    """:meth:`Cache.explain` on a cache opened for this call."""
    with Cache(cache_dir, **options) as c:
        return c.explain(key_a, key_b)


def cache_prune(cache_dir=None, *, max_bytes=None, older_than_s=None, stale=False, **options):
    """:meth:`Cache.prune` on a cache opened for this call."""
    with Cache(cache_dir, **options) as c:
        return c.prune(max_bytes=max_bytes, older_than_s=older_than_s, stale=stale)


def cache_clear(cache_dir=None, **options):
    """:meth:`Cache.clear` on a cache opened for this call."""
    with Cache(cache_dir, **options) as c:
        return c.clear()


def cache_warm(manifest, arch=None, jobs=0, cache_dir=None, progress=None, **options):
    """:meth:`Cache.warm` on a cache opened for this call."""
    with Cache(cache_dir, **options) as c:
        return c.warm(manifest, arch=arch, jobs=jobs, progress=progress)

