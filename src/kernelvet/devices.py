"""Device facts: which device, its peak rates, its L2 size. CPU and CUDA.

Peaks are dense vendor datasheet figures (FLOP/s, bytes/s): used as physical ceilings (an implied
rate above the fastest format the part has is math that did not happen) and for `pct_of_peak`.
"""

from __future__ import annotations

import dataclasses
import os

import torch

from .errors import UsageError

T = 1e12


@dataclasses.dataclass(frozen=True)
class Peaks:
    fp32: float
    tf32: float
    fp16: float
    bf16: float
    fp8: float | None
    bandwidth: float      # bytes/s, device memory
    l2_bytes: int

    @property
    def fastest(self) -> float:
        return max(x for x in (self.fp32, self.tf32, self.fp16, self.bf16, self.fp8) if x)

    def for_dtype(self, dtype: torch.dtype) -> float:
        return {torch.float16: self.fp16, torch.bfloat16: self.bf16}.get(dtype, self.fp32)


# Substring of the device name -> peaks. Order matters: the first match wins (a name that
# contains another entry's key comes before it: "GH200" before "H200", "H100 PCIe" before "H100").
# Where a datasheet leaves a figure open the higher reading is used: these are ceilings.
_TABLE: tuple[tuple[str, Peaks], ...] = (
    ("GB300", Peaks(80 * T, 1250 * T, 2500 * T, 2500 * T, 5000 * T, 8.0e12, 126 << 20)),
    ("B300", Peaks(80 * T, 1250 * T, 2500 * T, 2500 * T, 5000 * T, 8.0e12, 126 << 20)),
    ("GB200", Peaks(90 * T, 1250 * T, 2500 * T, 2500 * T, 5000 * T, 8.0e12, 126 << 20)),
    ("GH200", Peaks(67 * T, 495 * T, 989 * T, 989 * T, 1979 * T, 4.0e12, 60 << 20)),
    ("H200", Peaks(67 * T, 495 * T, 989 * T, 989 * T, 1979 * T, 4.8e12, 60 << 20)),
    ("H100 PCIe", Peaks(51 * T, 378 * T, 756 * T, 756 * T, 1513 * T, 2.0e12, 50 << 20)),
    ("H100", Peaks(67 * T, 495 * T, 989 * T, 989 * T, 1979 * T, 3.35e12, 50 << 20)),
    ("H20", Peaks(44 * T, 74 * T, 148 * T, 148 * T, 296 * T, 4.0e12, 60 << 20)),
    ("B200", Peaks(80 * T, 1100 * T, 2250 * T, 2250 * T, 4500 * T, 8.0e12, 126 << 20)),
    ("RTX PRO 6000", Peaks(126 * T, 252 * T, 504 * T, 504 * T, 1008 * T, 1.8e12, 128 << 20)),
    ("RTX 5090", Peaks(105 * T, 105 * T, 210 * T, 210 * T, 420 * T, 1.8e12, 96 << 20)),
    ("A100", Peaks(19.5 * T, 156 * T, 312 * T, 312 * T, None, 2.0e12, 40 << 20)),
    ("A10G", Peaks(31.2 * T, 62.5 * T, 125 * T, 125 * T, None, 0.6e12, 6 << 20)),
    ("L40S", Peaks(91.6 * T, 183 * T, 362 * T, 362 * T, 733 * T, 0.864e12, 96 << 20)),
    ("L4", Peaks(30.3 * T, 60 * T, 121 * T, 121 * T, 242 * T, 0.3e12, 48 << 20)),
    ("RTX 6000 Ada", Peaks(91.1 * T, 182 * T, 364 * T, 364 * T, 728 * T, 0.96e12, 96 << 20)),
    ("RTX 4090", Peaks(82.6 * T, 82.6 * T, 165 * T, 165 * T, 330 * T, 1.0e12, 72 << 20)),
    ("RTX 3090", Peaks(35.6 * T, 35.6 * T, 71 * T, 71 * T, None, 0.936e12, 6 << 20)),
    ("V100", Peaks(15.7 * T, 15.7 * T, 125 * T, 125 * T, None, 0.9e12, 6 << 20)),
    ("T4", Peaks(8.1 * T, 8.1 * T, 65 * T, 65 * T, None, 0.32e12, 4 << 20)),
    ("MI355X", Peaks(157 * T, 157 * T, 2517 * T, 2517 * T, 5033 * T, 8.0e12, 256 << 20)),
    ("MI350X", Peaks(144 * T, 144 * T, 2307 * T, 2307 * T, 4614 * T, 8.0e12, 256 << 20)),
    ("MI325X", Peaks(163 * T, 654 * T, 1307 * T, 1307 * T, 2615 * T, 6.0e12, 256 << 20)),
    ("MI300X", Peaks(163 * T, 654 * T, 1307 * T, 1307 * T, 2615 * T, 5.3e12, 256 << 20)),
    ("MI250", Peaks(47.9 * T, 47.9 * T, 383 * T, 383 * T, None, 3.2e12, 16 << 20)),
)


def _cuda_devices() -> int:
    """Visible CUDA devices, from NVML where it answers (`torch.cuda.device_count`), so that the
    judge never initialises CUDA itself: `torch.cuda.is_available()` runs cuInit, which took
    0.6-1.2 s of a cold `kernelvet check` on the H200's host, and a judge of a small problem
    needs no CUDA at all (its worker describes the device)."""
    return torch.cuda.device_count() if torch.backends.cuda.is_built() else 0


def resolve(device: str) -> torch.device:
    """`auto` | `cpu` | `cuda` | `cuda:N` to a torch.device, or a UsageError saying why not."""
    if device == "auto":
        return torch.device("cuda", 0) if _cuda_devices() else torch.device("cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise UsageError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise UsageError(f"--device {device!r}: only cpu and cuda devices are supported")
    count = _cuda_devices()
    if not count:
        raise UsageError(f"--device {device}: no CUDA device is available here (use --device cpu)")
    index = 0 if dev.index is None else dev.index
    if index >= count:
        raise UsageError(f"--device {device}: there are only {count} CUDA devices")
    return torch.device("cuda", index)


def describe(dev: torch.device) -> dict:
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        return {"type": "cuda", "index": dev.index, "name": p.name,
                "capability": f"{p.major}.{p.minor}", "memory_bytes": p.total_memory,
                "multiprocessors": p.multi_processor_count,
                "l2_bytes": getattr(p, "L2_cache_size", None)}
    return {"type": "cpu", "name": _cpu_name(), "cores": os.cpu_count()}


# do_bench's flush buffer: its zeroing also keeps the device busy while the host launches the next call
FLUSH_MIN_BYTES = 256 << 20
_DESCRIPTION = {"type": str, "index": (int, type(None)), "name": str, "capability": str, "memory_bytes": int,
                "multiprocessors": int, "l2_bytes": (int, type(None)), "cores": (int, type(None))}


def flush_bytes(info: dict, factor: float) -> int:
    """The L2 flush buffer between timed reps on a CUDA device: `factor` times its L2, at least
    FLUSH_MIN_BYTES (the worker sizes it from its own device's description)."""
    if info.get("type") != "cuda":
        return 0
    pk = peaks(info)
    l2 = info.get("l2_bytes") or (pk.l2_bytes if pk else 64 << 20)
    return max(int(factor * l2), FLUSH_MIN_BYTES)


def checked_description(info, dev: torch.device) -> dict:
    """A worker's `describe` of its device, as the judge takes it: the fields and types `describe`
    gives, for the device the judge asked for (a worker describes it before any candidate exists)."""
    if (not isinstance(info, dict) or not set(info) <= set(_DESCRIPTION) or info.get("type") != dev.type
            or not all(isinstance(v, _DESCRIPTION[k]) and type(v) is not bool for k, v in info.items())):
        raise ValueError(f"not a description of a {dev.type} device: {str(info)[:200]}")
    return info


def peaks(info: dict) -> Peaks | None:
    if info.get("type") == "cpu":
        # A generous host bound: every core issuing two 512-bit FMAs per cycle at 4 GHz, and 16x
        # that in half precision (matrix units such as AMX do ~1024 bf16 FLOP per cycle per core).
        cores = info.get("cores") or 1
        flops = cores * 4e9 * 2 * 16 * 2
        return Peaks(flops, flops, 16 * flops, 16 * flops, None, 400e9, 64 << 20)
    name = info.get("name", "")
    for key, pk in _TABLE:
        if key in name:
            l2 = info.get("l2_bytes") or pk.l2_bytes
            return dataclasses.replace(pk, l2_bytes=l2)
    return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"
