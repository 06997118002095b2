"""Tensor interop: PyTorch tensors, ``__cuda_array_interface__`` and DLPack.

Nothing here imports torch or numpy: they are used only when the caller passes
one of their objects (and are then already imported).
"""

import ctypes
import math
import operator
import sys

# __cuda_array_interface__ typestr -> canonical dtype name. numpy has no bf16 or
# fp8 type: producers without them (CuPy, Numba) pass 16-bit and 8-bit bit
# patterns, which decode() accepts in the bf16 and fp8 slots.
_TYPESTR = {
    "|u1": "uint8",
    "<u1": "uint8",
    "|i1": "int8",
    "<i1": "int8",
    "|V1": "uint8",
    "<u2": "bf16_bits",
    "<i2": "bf16_bits",
    "<V2": "bf16_bits",
    "|V2": "bf16_bits",
    "<f2": "float16",
    "<f4": "float32",
    "<f8": "float64",
    "<i4": "int32",
    "<u4": "uint32",
    "<i8": "int64",
    "<u8": "uint64",
}

_ITEMSIZE = {
    "uint8": 1, "int8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "bfloat16": 2, "bf16_bits": 2, "float16": 2, "int16": 2,
    "float32": 4, "int32": 4, "uint32": 4,
    "float64": 8, "int64": 8, "uint64": 8,
}


def torch_module():
    """torch if it is already imported, else None (never imports it)."""
    return sys.modules.get("torch")


def is_torch_tensor(x):
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


class DeviceArray:
    """A device buffer seen through the fields decode() needs.

    Attributes:
      obj: the original object (kept alive by the caller).
      ptr: device address (int).
      shape: tuple of ints.
      dtype: canonical dtype name ("bfloat16", "uint8", "float32", ...).
      device: CUDA ordinal, or None when unknown (``__cuda_array_interface__``).
      contiguous: row-major contiguous.
      nbytes: size of the viewed elements in bytes.
    """

    __slots__ = ("obj", "ptr", "shape", "dtype", "device", "contiguous", "nbytes")

    def __init__(self, obj, ptr, shape, dtype, device, contiguous):
        self.obj = obj
        self.ptr = ptr
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.device = device
        self.contiguous = contiguous
        self.nbytes = math.prod(self.shape) * _ITEMSIZE.get(dtype, 0)


def _c_contiguous_strides(shape, itemsize):
    strides = []
    stride = itemsize
    for s in reversed(shape):
        strides.append(stride)
        stride *= max(int(s), 1)
    return tuple(reversed(strides))


def _from_torch(t, name):
    if t.device.type != "cuda":
        raise ValueError("%s is on device %s: expected a CUDA tensor" % (name, t.device))
    dtype = str(t.dtype).replace("torch.", "")
    return DeviceArray(t, t.data_ptr(), t.shape, dtype, t.device.index, t.is_contiguous())


def _from_cai(x, name):
    cai = x.__cuda_array_interface__
    shape = tuple(cai["shape"])
    typestr = cai["typestr"]
    dtype = _TYPESTR.get(typestr)
    if dtype is None:
        raise TypeError("%s has __cuda_array_interface__ typestr %r: not a type mlajit uses"
                        % (name, typestr))
    ptr = cai["data"][0] or 0
    strides = cai.get("strides")
    if cai.get("mask") is not None:
        raise TypeError("%s: masked __cuda_array_interface__ arrays are not supported" % name)
    contiguous = strides is None or tuple(strides) == _c_contiguous_strides(shape, _ITEMSIZE[dtype])
    # The interface does not carry the device; the library checks nothing either,
    # so a buffer on another device faults in the kernel.
    return DeviceArray(x, ptr, shape, dtype, None, contiguous)


def device_array(x, name):
    """Wraps a torch tensor, a ``__cuda_array_interface__`` object or a DLPack
    capsule producer (through torch.from_dlpack) as a :class:`DeviceArray`."""
    if is_torch_tensor(x):
        return _from_torch(x, name)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_cai(x, name)
    if hasattr(x, "__dlpack__"):
        torch = torch_module()
        if torch is None:
            try:
                import torch  # noqa: F811  (only for DLPack producers)
            except ImportError:
                torch = None
        if torch is not None:
            return _from_torch(torch.from_dlpack(x), name)
        raise TypeError("%s is a DLPack producer (%s) but torch is not installed to import it; "
                        "pass a torch tensor or an object with __cuda_array_interface__"
                        % (name, type(x).__name__))
    raise TypeError("%s has type %s: expected a torch.Tensor on a CUDA device or an object "
                    "with __cuda_array_interface__" % (name, type(x).__name__))


# ---- host int32 arrays (plan inputs) ---------------------------------------

_INT32_MIN = -(2 ** 31)
_INT32_MAX = 2 ** 31 - 1


def _check_range(values, name):
    for i, v in enumerate(values):
        if v < _INT32_MIN or v > _INT32_MAX:
            raise ValueError("%s[%d]=%d: does not fit in int32" % (name, i, v))


def host_int32(x, name):
    """Copies a 1-D integer sequence into contiguous host int32 memory.

    Accepts a torch tensor (a CUDA tensor is copied to the host, which
    synchronises with its stream), a numpy array, or any iterable of ints
    (list, tuple, range, array.array). Returns a ``ctypes.c_int32`` array.
    """
    torch = torch_module()
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dim() != 1:
            raise ValueError("%s has shape %s: expected a 1-D tensor" % (name, tuple(x.shape)))
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise TypeError("%s has dtype %s: expected an integer tensor (int32)" % (name, x.dtype))
        if x.device.type != "cpu":
            x = x.cpu()
        if x.dtype != torch.int32:
            values = [int(v) for v in x.tolist()]
            _check_range(values, name)
            return (ctypes.c_int32 * len(values))(*values)
        x = x.contiguous()
        out = (ctypes.c_int32 * x.numel())()
        if x.numel():
            ctypes.memmove(out, x.data_ptr(), 4 * x.numel())
        return out
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        if x.ndim != 1:
            raise ValueError("%s has shape %s: expected a 1-D array" % (name, x.shape))
        if x.dtype.kind not in "iu":
            raise TypeError("%s has dtype %s: expected an integer array (int32)" % (name, x.dtype))
        if x.dtype != np.int32:
            values = [int(v) for v in x.tolist()]
            _check_range(values, name)
            return (ctypes.c_int32 * len(values))(*values)
        x = np.ascontiguousarray(x)
        out = (ctypes.c_int32 * x.size)()
        if x.size:
            ctypes.memmove(out, x.ctypes.data, 4 * x.size)
        return out
    if hasattr(x, "__cuda_array_interface__"):
        raise TypeError("%s is a device array (%s): copy it to the host first (a list, numpy "
                        "array or CPU tensor)" % (name, type(x).__name__))
    if isinstance(x, (str, bytes)) or not hasattr(x, "__iter__"):
        raise TypeError("%s has type %s: expected a 1-D sequence of ints (list, numpy array, "
                        "torch tensor)" % (name, type(x).__name__))
    values = []
    for i, v in enumerate(x):
        if isinstance(v, bool):
            raise TypeError("%s[%d]=%r: expected an int" % (name, i, v))
        try:
            values.append(operator.index(v))
        except TypeError:
            raise TypeError("%s[%d]=%r (%s): expected an int" % (name, i, v, type(v).__name__)) from None
    _check_range(values, name)
    return (ctypes.c_int32 * len(values))(*values)


def stream_handle(stream):
    """A raw cudaStream_t (int) from None/int/torch.cuda.Stream/CuPy-like objects."""
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise TypeError("stream=%r: expected a stream object or a raw handle (int)" % (stream,))
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    if hasattr(stream, "__cuda_stream__"):  # CUDA stream protocol: (version, handle)
        return int(stream.__cuda_stream__()[1])
    raise TypeError("stream has type %s: expected torch.cuda.Stream, an int handle or an object "
                    "with .cuda_stream / .ptr / .handle" % type(stream).__name__)
