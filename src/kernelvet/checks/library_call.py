"""`library-call`: the candidate does not call the library op it was meant to replace.

Three witnesses: a scan of the source (AST, plus string literals for inline C++/CUDA), the aten
ops the candidate actually dispatched in a traced call, so `getattr(torch, "m" + "m")` and
`torch.ops.aten.mm` are caught too, and (CUDA, when the kernel audit ran) the vendor library
kernels in the profiler's trace, which also sees cuBLAS reached through ctypes or a prebuilt .so.
The forbidden set defaults to the heavy ops the reference itself dispatches (traced in the worker
before the candidate is loaded)."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from .kernel_audit import vendor_kernels


def evaluate(ev) -> Finding:
    forbidden = sorted(ev.forbidden)
    evidence = {"forbidden_aten": forbidden}
    if ev.source_hits:
        h = ev.source_hits[0]
        return Finding(CheckId.LIBRARY_CALL, Status.FAIL, f"line {h.line}: calls {h.op} ({h.text})",
                       {**evidence, "hits": [{"op": x.op, "line": x.line, "how": x.how, "text": x.text}
                                             for x in ev.source_hits[:20]]})
    traced = [c for c in ev.records("warmup") if c.meta.get("aten_ops") is not None]
    if traced:
        ops = set(traced[0].meta["aten_ops"])
        bad = sorted(op for op in ops if op in ev.forbidden)
        evidence["dispatched"] = sorted(ops)
        if bad:
            return Finding(CheckId.LIBRARY_CALL, Status.FAIL,
                           f"the candidate dispatched {', '.join(bad)}, the op it was meant to replace", evidence)
    vendor = vendor_kernels(ev) if ev.forbidden else []
    if vendor:
        return Finding(CheckId.LIBRARY_CALL, Status.FAIL,
                       f"the device ran the vendor library kernel {vendor[0][:200]}: the library call the problem "
                       "forbids", {**evidence, "vendor_kernels": vendor})
    return Finding(CheckId.LIBRARY_CALL, Status.PASS,
                   "no forbidden op in the source" + (" or in the traced call" if traced else ""), evidence)
