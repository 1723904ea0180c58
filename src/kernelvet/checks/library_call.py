"""`library-call`: the candidate wrote what the library policy says it must write itself.

The level (checks/library_policy.py) decides what counts:
  no-reference-ops  the aten ops the candidate dispatched in a traced call must not include the
                    reference's compute ops (or, where the reference contracts, any library
                    contraction). What dispatches decides, not names in the source: a name the
                    scan finds (`nn.Linear` kept to hold weights) is evidence, and fails only when
                    it names code below the dispatcher, where no trace sees it (cuBLAS symbols,
                    link flags, numpy/scipy BLAS, ATen backend kernels called from C++). On CUDA,
                    vendor library kernels in the audit's trace that are not the candidate's own
                    fail too where the reference contracts (cuBLAS through ctypes).
  own-kernels       (CUDA) the bulk of the call's device time ran in kernels of binaries the
                    candidate's own build produced (checks/attribution.py); on the CPU, which has no
                    kernel trace, it is judged as no-reference-ops.
"""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from . import attribution
from ._common import not_reached
from .kernel_audit import VENDOR, classify, vendor_kernels
from .library_policy import (CONTRACTIONS, OWN_SHARE_MIN, below_dispatcher, dispatched_forbidden, make_policy,
                             reference_compute_ops)


def evaluate(ev) -> Finding:
    policy = ev.library_policy or make_policy("no-reference-ops", ev.device.type)
    evidence = {"policy": policy.to_json(), "forbidden_aten": sorted(ev.forbidden)}
    named = [{"op": x.op, "line": x.line, "how": x.how, "text": x.text} for x in ev.source_hits[:20]]
    if named:
        evidence["named_in_source"] = named   # evidence: what dispatched decides
    if policy.judged_as == "own-kernels":
        return _own_kernels(ev, evidence)
    below = [h for h in ev.source_hits if below_dispatcher(h.op)]
    if below:
        h = below[0]
        return Finding(CheckId.LIBRARY_CALL, Status.FAIL,
                       f"line {h.line}: calls {h.op} ({h.text}), below the dispatcher, where no trace can see it",
                       evidence)
    traced = [c for c in ev.records("warmup") if c.meta.get("aten_ops") is not None]
    if traced:
        ops = set(traced[0].meta["aten_ops"])
        bad = dispatched_forbidden(ops, ev.forbidden)
        evidence["dispatched"] = sorted(ops)
        if bad:
            return Finding(CheckId.LIBRARY_CALL, Status.FAIL,
                           f"the candidate dispatched {', '.join('aten::' + b for b in bad)}: "
                           f"{_why(ev, bad)} (--library-policy {policy.level}; --allow-op names an op it may call)",
                           evidence)
    vendor = vendor_kernels(ev) if ev.forbidden & CONTRACTIONS else []
    if vendor:
        return Finding(CheckId.LIBRARY_CALL, Status.FAIL,
                       f"the device ran the vendor library kernel {vendor[0][:200]}: a library contraction, where "
                       "the problem's own contraction is the candidate's to write", {**evidence, "vendor_kernels": vendor})
    if not traced:
        if named:
            return not_reached(CheckId.LIBRARY_CALL, "not run: the source names "
                               f"{named[0]['op']}, and no traced call says whether it dispatches")
        return Finding(CheckId.LIBRARY_CALL, Status.PASS, "no forbidden op in the source", evidence)
    extra = f" (names in the source that did not dispatch: {', '.join(sorted({n['op'] for n in named}))})" if named else ""
    return Finding(CheckId.LIBRARY_CALL, Status.PASS,
                   f"none of the reference's compute ops dispatched in the traced call{extra}", evidence)


def _why(ev, bad: list[str]) -> str:
    ref = reference_compute_ops(ev.reference_aten_ops)
    if set(bad) & ref:
        return "the reference dispatches it, and the candidate was to write it itself"
    if set(bad) <= CONTRACTIONS:
        return "a library contraction, where the reference's contraction is the candidate's to write"
    return "the same computation as an op the reference dispatches, which the candidate was to write itself"


def _own_kernels(ev, evidence: dict) -> Finding:
    if ev.audit is None:
        return not_reached(CheckId.LIBRARY_CALL, "not run: own-kernels decides on the kernel audit's trace, "
                           "which was not taken")
    c = classify(ev.audit)
    if c is None:
        return Finding(CheckId.LIBRARY_CALL, Status.FAIL, "the profiler trace lacks the harness's marker kernels: "
                       "no device time can be attributed", evidence)
    policy = ev.library_policy
    allowed = attribution.allowed_launches(ev.audit.get("cpu_events") or [], policy.allowed_ops)
    split = attribution.device_time(c["kernels"], ev.own_kernels, allowed)
    judged = split["own"] + split["other"]
    total = judged + split["allowed"]
    evidence.update({"device_ns": {k: split[k] for k in ("own", "allowed", "other")},
                     "other_kernels": [[n, ns] for n, ns in split["others"][:20]],
                     "own_kernel_symbols": sorted(ev.own_kernels)[:50]})
    if total == 0:
        return Finding(CheckId.LIBRARY_CALL, Status.SKIP, "no kernel time to attribute (kernel-audit says why)",
                       evidence)
    share = split["own"] / judged if judged else 1.0
    evidence["own_share"] = share
    words = f"{split['own'] / total:.0%} of device time in the candidate's own kernels"
    if split["allowed"]:
        words += f"; {split['allowed'] / total:.0%} in allowed ops ({', '.join(policy.named_ops)})"
    if split["other"]:
        words += f"; {split['other'] / total:.0%} in {_kind(split['others'])}"
    if share >= OWN_SHARE_MIN:
        return Finding(CheckId.LIBRARY_CALL, Status.PASS, words, evidence)
    return Finding(CheckId.LIBRARY_CALL, Status.FAIL,
                   f"{words}: under --library-policy own-kernels at least {OWN_SHARE_MIN:.0%} must run in kernels the "
                   "candidate's source builds (Triton, load_inline); a composition of PyTorch or library ops is not a "
                   "kernel under this level (--library-policy no-reference-ops allows it)", evidence)


def _kind(others: list) -> str:
    """The other kernels, in words: by what their names show (evidence for a reader, not a verdict)."""
    vendor = sum(ns for n, ns in others if VENDOR.search(n))
    torch_ = sum(ns for n, ns in others if "at::native" in n and not VENDOR.search(n))
    if vendor >= torch_ and vendor:
        what = "library kernels (cuBLAS, cuDNN, ...)"
    elif torch_:
        what = "PyTorch's own kernels"
    else:
        what = "kernels not built from the candidate's source"
    return f"{what}, e.g. {others[0][0][:80]}"
