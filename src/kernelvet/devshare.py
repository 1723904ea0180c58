"""Big tensors between judge and worker on one CUDA device, without a trip through the host.

The judge lends its worker device buffers by CUDA IPC, inside one request: the request's input
tensors copied into buffers of their own, and empty "rooms" the worker copies its reply's outputs
into. The judge is always the one that allocates and frees. A worker only ever maps buffers made
for the request it is answering, so it cannot see a set before the request that carries it (a
pool reused across requests would let a mapping kept from an earlier request read the next set
as the judge fills it). Each buffer is its own allocation, rounded to whole 2 MiB pages and
zeroed past its data, so a mapping exposes nothing of the judge but what was put there. A buffer
is freed once the reply is in: the worker's mapping, if it keeps one, pins those pages (the
driver frees an allocation when its last mapping goes), so they cannot come back as judge memory
it could read (`tests/test_gpu_devshare.py` checks this on the device).

Through the CUDA runtime that torch itself loaded (ctypes): where that cannot be found, or the
worker cannot map a probe buffer, every tensor travels through the host as before (protocol.py).
"""

from __future__ import annotations

import ctypes
import math
import warnings

import torch

from . import crossing

PAGE = 2 << 20          # the device's allocation granularity: buffers are whole pages
LEND_MIN_BYTES = 2 << 20   # smaller tensors are cheaper through the host than an IPC mapping
_LAZY_PEER = 1          # cudaIpcMemLazyEnablePeerAccess


class DeviceShareError(RuntimeError):
    """CUDA IPC is not available here, or a call of it failed."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]   # bytes, NULs included (c_char would stop at one)

    @classmethod
    def of(cls, raw: bytes) -> "_Handle":
        h = cls()
        ctypes.memmove(ctypes.addressof(h), raw, 64)
        return h

    def raw(self) -> bytes:
        return ctypes.string_at(ctypes.addressof(self), 64)


_RT: list = []   # [the runtime library, or None]: looked up once per process


def _runtime():
    if not _RT:
        _RT.append(_load_runtime())
    if _RT[0] is None:
        raise DeviceShareError("the CUDA runtime torch loaded was not found")
    return _RT[0]


def _load_runtime():
    """torch's own libcudart (the same device state as torch's), found among the mapped files."""
    if not torch.cuda.is_available():
        return None
    torch.cuda.init()
    try:
        with open("/proc/self/maps") as fh:
            paths = [line.split()[-1] for line in fh if "libcudart" in line and "/" in line]
    except OSError:
        return None
    if not paths:
        return None
    lib = ctypes.CDLL(paths[0])
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    for name, args in (("cudaMalloc", [ctypes.POINTER(vp), sz]), ("cudaFree", [vp]),
                       ("cudaIpcGetMemHandle", [ctypes.POINTER(_Handle), vp]),
                       ("cudaIpcOpenMemHandle", [ctypes.POINTER(vp), _Handle, ctypes.c_uint]),
                       ("cudaIpcCloseMemHandle", [vp]), ("cudaGetErrorString", [ctypes.c_int])):
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_char_p if name == "cudaGetErrorString" else ctypes.c_int
    return lib


def available() -> bool:
    try:
        _runtime()
        return True
    except (DeviceShareError, OSError, AttributeError):
        return False


def _check(rt, code: int, what: str) -> None:
    if code:
        raise DeviceShareError(f"{what}: {rt.cudaGetErrorString(code).decode(errors='replace')}")


class _Raw:
    """`nbytes` of device memory at `ptr`, as torch.as_tensor reads them (no ownership)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2, "strides": None}


def _bytes_at(ptr: int, nbytes: int, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(_Raw(ptr, nbytes), device=device)


def typed(raw: torch.Tensor, dtype: torch.dtype, shape) -> torch.Tensor:
    """The first bytes of `raw` (uint8) as a tensor of `dtype` and `shape`, no copy."""
    return raw[:math.prod(shape) * dtype.itemsize].view(dtype).reshape(tuple(shape))


class Lent:
    """A device buffer of the judge's, for one request: `handle` (hex) is what the worker maps."""

    def __init__(self, nbytes: int, device: torch.device):
        rt = _runtime()
        self.device, self.nbytes = device, int(nbytes)
        self.size = max(PAGE, -(-self.nbytes // PAGE) * PAGE)
        ptr = ctypes.c_void_p()
        with torch.cuda.device(device):
            _check(rt, rt.cudaMalloc(ctypes.byref(ptr), self.size), f"allocating {self.size} bytes to lend")
            self.ptr = ptr.value
            try:
                handle = _Handle()
                _check(rt, rt.cudaIpcGetMemHandle(ctypes.byref(handle), ctypes.c_void_p(self.ptr)),
                       "exporting a buffer")
            except BaseException:
                self.close()
                raise
        self.handle = handle.raw().hex()
        self.raw = _bytes_at(self.ptr, self.size, device)

    def fill(self, data) -> None:
        """The buffer holds `data` (bytes of the host, or a tensor), zeros after it."""
        if isinstance(data, torch.Tensor):
            src = data.reshape(-1).view(torch.uint8)
        elif len(data):
            with warnings.catch_warnings():   # read only: torch.frombuffer warns of writes nobody makes
                warnings.simplefilter("ignore", UserWarning)
                src = torch.frombuffer(memoryview(data).cast("B"), dtype=torch.uint8)
        else:
            src = torch.empty(0, dtype=torch.uint8)
        self.raw[:src.numel()].copy_(src)
        self.raw[src.numel():].zero_()

    def tensor(self, dtype: torch.dtype, shape) -> torch.Tensor:
        """A copy of the buffer's first bytes, as a tensor of the judge's own memory."""
        return typed(self.raw, dtype, shape).clone()

    def host_tensor(self, dtype: torch.dtype, shape) -> torch.Tensor:
        """The same copy in fresh host memory, a slice at a time through a pinned stage."""
        return crossing.moved_home(typed(self.raw, dtype, shape))

    def spec(self) -> dict:
        return {"handle": self.handle, "nbytes": self.size}

    def close(self) -> None:
        if getattr(self, "ptr", None):
            self.raw = None
            rt = _runtime()
            with torch.cuda.device(self.device):
                rt.cudaFree(ctypes.c_void_p(self.ptr))
            self.ptr = None


class Mapped:
    """A buffer the judge lent, mapped into this process (the worker) until `close`."""

    def __init__(self, spec: dict, device: torch.device):
        rt = _runtime()
        handle_hex, nbytes = spec.get("handle"), spec.get("nbytes")
        if not isinstance(handle_hex, str) or len(handle_hex) != 128 or type(nbytes) is not int or nbytes <= 0:
            raise DeviceShareError("a lent buffer's spec is not a handle and a size")
        self.device, self.nbytes = device, nbytes
        ptr = ctypes.c_void_p()
        with torch.cuda.device(device):
            _check(rt, rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), _Handle.of(bytes.fromhex(handle_hex)), _LAZY_PEER),
                   "mapping a lent buffer")
        self.ptr = ptr.value
        self.raw = _bytes_at(self.ptr, nbytes, device)

    def close(self) -> None:
        if self.ptr:
            self.raw = None
            rt = _runtime()
            with torch.cuda.device(self.device):
                rt.cudaIpcCloseMemHandle(ctypes.c_void_p(self.ptr))
            self.ptr = None

