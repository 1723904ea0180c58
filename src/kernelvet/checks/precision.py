"""`precision`: the output's error against the judge's float64 reference, by relative Frobenius
norm, within what the declared dtype allows. A thinner format (TF32, float16, bfloat16 operands)
leaves an error 7x or more above the float32 bound; it is rejected, not tolerated.

Outputs still holding poison are left to `unwritten-output` (one cause, one finding)."""

from __future__ import annotations

import math

from .. import metrics
from ..ids import CheckId
from ..report import Finding, Status
from ._common import dtype_name, not_reached


def evaluate(ev) -> Finding:
    recs = ev.records("warmup", "fresh", "probe")
    if not recs:
        return not_reached(CheckId.PRECISION)
    tol = metrics.tolerance(ev.dtype, ev.reference_error)
    rows, worst, excluded = [], None, 0
    for c in recs:
        if ev.poisoned(c):
            excluded += 1
            continue
        if c.output.dtype != ev.dtype:
            return Finding(CheckId.PRECISION, Status.FAIL,
                           f"output dtype is {dtype_name(c.output.dtype)}; the problem declares {dtype_name(ev.dtype)}",
                           {"phase": c.phase})
        ref = ev.refs64[c.values_of]
        if tuple(c.output.shape) != tuple(ref.shape):
            return Finding(CheckId.PRECISION, Status.FAIL, f"output shape {tuple(c.output.shape)} is not the "
                           f"reference's {tuple(ref.shape)}", {"phase": c.phase})
        err = ev.memo(metrics.rel_error, c.output, ref, ev.extra.get("error_floor", 0.0))
        rows.append(err)
        if worst is None or err > worst[0]:
            worst = (err, c)
    evidence = {"tolerance": tol, "reference_error": ev.reference_error, "errors": rows,
                "excluded_unwritten": excluded}
    if worst is None:
        return Finding(CheckId.PRECISION, Status.SKIP, "every checked output held poison (see unwritten-output)",
                       evidence)
    err, c = worst
    evidence.update(ev.memo(metrics.ulp_stats, c.output, ev.refs64[c.values_of], ev.dtype))
    evidence["max_rel_error"] = err
    if err > tol:
        what = "non-finite values" if math.isinf(err) else f"relative error {err:.3g}"
        return Finding(CheckId.PRECISION, Status.FAIL,
                       f"{what} against the float64 reference exceeds the {dtype_name(ev.dtype)} bound {tol:.2g}"
                       f" ({_hint(err, ev.dtype)})", evidence)
    return Finding(CheckId.PRECISION, Status.PASS,
                   f"max relative error {err:.2g} <= {tol:.2g} over {len(rows)} input sets", evidence)


def _hint(err: float, dtype) -> str:
    import torch
    if dtype == torch.float32 and 1e-4 < err < 1e-2:
        return "the fingerprint of TF32, float16 or bfloat16 arithmetic"
    return "wrong result"
