"""`output-type`: a plain torch.Tensor (not a subclass, not a wrapper), with real storage, on the
requested device, with the reference's dtype and shape. Decided from what the worker saw with
`type(out)` (no method of the object called), and from the bytes the judge rebuilt. Timed reps
are held to it too, by the worker's count of those that returned anything else (a claim: a worker
that says so to keep an output from the judge fails here, one that keeps it silently `caching`)."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import dtype_name, not_reached


def evaluate(ev) -> Finding:
    observed = [c for c in ev.calls if c.meta]
    if not observed:
        return not_reached(CheckId.OUTPUT_TYPE)
    problems = []
    for c in observed:
        m = c.meta
        if not m.get("exact_tensor"):
            problems.append(f"{c.phase}: returned {m.get('type')}, not exactly torch.Tensor")
            continue
        if c.output is not None and c.output.numel() and not m.get("storage_ptr"):
            problems.append(f"{c.phase}: tensor with no storage (data_ptr 0)")
        if m.get("device") != _device_text(ev.device):
            problems.append(f"{c.phase}: output on {m.get('device')}, expected {_device_text(ev.device)}")
        if c.output is not None and c.output.dtype != ev.dtype:
            problems.append(f"{c.phase}: dtype {dtype_name(c.output.dtype)}, expected {dtype_name(ev.dtype)}")
        if c.output is not None and tuple(c.output.shape) != ev.shape:
            problems.append(f"{c.phase}: shape {tuple(c.output.shape)}, expected {ev.shape}")
    timed = int((ev.timing or {}).get("non_tensor") or 0)
    if timed:
        problems.append(f"timed: {timed} reps returned something other than exactly torch.Tensor")
    evidence = {"calls_checked": len(observed), "timed_not_tensor": timed,
                "expected": {"dtype": dtype_name(ev.dtype), "shape": list(ev.shape), "device": _device_text(ev.device)}}
    if problems:
        return Finding(CheckId.OUTPUT_TYPE, Status.FAIL, problems[0], {**evidence, "problems": problems[:10]})
    return Finding(CheckId.OUTPUT_TYPE, Status.PASS, f"plain {dtype_name(ev.dtype)} tensor of shape {ev.shape} "
                   f"on {_device_text(ev.device)} in all {len(observed)} observed calls", evidence)


def _device_text(dev) -> str:
    return str(dev) if dev.type == "cpu" else f"cuda:{dev.index or 0}"
