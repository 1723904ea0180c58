"""The CLI judge's CUDA context, made through the driver API while the process still imports torch.

`kernelvet check` pays `import torch` (seconds) and then the judge's CUDA start-up (0.5-0.9 s on
the H200's host in session 13), one after the other; and the first worker is asked to prepare
only once the judge knows its device. The driver does not need torch: on a thread, `cuInit` and
the device's primary context (the one the CUDA runtime, and so torch, uses) are made beside the
import. ctypes drops the GIL for each foreign call, so the import goes on meanwhile. torch then
finds the context made and only attaches to it.

Nothing here decides anything: a missing driver, a bad device name or an error just leaves the
work to torch, which reports it as before.
"""

from __future__ import annotations

import ctypes
import threading
import time


def _index(device: str) -> int | None:
    """The CUDA device index a `--device` value names (auto: 0, if there is one), else None."""
    if device in ("auto", "cuda"):
        return 0
    if device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    return None


class DriverContext(threading.Thread):
    """Started at once; once ended, `ended` (time.monotonic()) and `why` (None: the context is made)."""

    def __init__(self, device: str):
        super().__init__(daemon=True, name="kernelvet-driver-context")
        self.index, self.ended, self.why = _index(device), None, None
        self.start()

    def run(self):
        try:
            self._make()
        finally:
            self.ended = time.monotonic()

    def _make(self):
        if self.index is None:
            self.why = "not a CUDA device"
            return
        try:
            cuda = ctypes.CDLL("libcuda.so.1")
        except OSError:
            self.why = "no CUDA driver (libcuda.so.1)"
            return
        count, dev, ctx = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_void_p()
        for name, call in (("cuInit", lambda: cuda.cuInit(0)),
                           ("cuDeviceGetCount", lambda: cuda.cuDeviceGetCount(ctypes.byref(count))),
                           ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(dev), self.index)
                            if self.index < count.value else 101),   # CUDA_ERROR_INVALID_DEVICE
                           ("cuDevicePrimaryCtxRetain", lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))):
            rc = call()
            if rc != 0:
                self.why = f"{name} returned CUDA error {rc}"
                return
        # Retained for the life of the process, as torch's own use of it would be.
