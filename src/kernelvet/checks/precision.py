"""`precision`: the output's error against the judge's float64 reference, by relative Frobenius
norm, within what the declared dtype allows. A thinner format (TF32, float16, bfloat16 operands)
leaves an error 7x or more above the float32 bound; it is rejected, not tolerated.

And row by row (metrics.as_rows): a norm is carried by the output's largest rows, so rows that
weigh little in it (zeroed, or computed in a thinner format) leave it untouched. Each row's own
relative error must be within the same bound, or within ROW_SLACK times the reference
implementation's own error on that row (a row whose result cancels is as hard for the candidate
as for the reference), on the sets the reference itself ran on.

An output over the bound on a set the reference never ran on is held instead to a few times the
reference's own error on that very set, where that is wider (judge/own_error.py): a problem whose
conditioning moves from set to set must not fail an honest output on its harder sets.

Outputs still holding poison are left to `unwritten-output` (one cause, one finding)."""

from __future__ import annotations

import math

from .. import metrics
from ..ids import CheckId
from ..report import Finding, Status
from ._common import bounds_on_sets, dtype_name, not_reached


ROW_SLACK = metrics.REFERENCE_SLACK


def evaluate(ev) -> Finding:
    recs = ev.records("warmup", "fresh", "probe")
    if not recs:
        return not_reached(CheckId.PRECISION)
    tol = metrics.tolerance(ev.dtype, ev.reference_error, ev.declared_tolerance)
    rows, checked, worst, excluded, own = [], [], None, 0, {}
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
        rows.append(ev.rel_error(c.output, c.values_of, ev.error_floor))
        checked.append(c)
    for err, allowed, c in zip(rows, bounds_on_sets(ev, [(e, c.values_of) for e, c in zip(rows, checked)], tol),
                               checked):
        if allowed is None:   # not needed: an output elsewhere fails by a known bound
            continue
        if allowed > tol:
            own[str(c.values_of)] = allowed
        if worst is None or _over(err, allowed) > _over(*worst[:2]):
            worst = (err, allowed, c)
    evidence = {"tolerance": tol, "reference_error": ev.reference_error, "errors": rows,
                "excluded_unwritten": excluded, "declared_tolerance": ev.declared_tolerance}
    if own:   # sets held to the reference's own error there, harder than the sets it ran on
        evidence["own_set_bounds"] = own
    if ev.task_check is not None:   # a GPU MODE task's own checker on one checked output (evidence only)
        evidence["task_check"] = ev.task_check
    if worst is None:
        return Finding(CheckId.PRECISION, Status.SKIP, "every checked output held poison (see unwritten-output)",
                       evidence)
    err, allowed, c = worst
    evidence.update(ev.memo(metrics.ulp_stats, c.output, ev.refs64[c.values_of], ev.dtype))
    evidence["max_rel_error"] = max(rows)
    if err > allowed:
        what = "non-finite values" if math.isinf(err) else f"relative error {err:.3g}"
        there = f" (the reference's own error on that input set allows {allowed:.2g})" if allowed > tol else ""
        return Finding(CheckId.PRECISION, Status.FAIL,
                       f"{what} against the float64 reference exceeds the {_bound(ev)} {tol:.2g}{there}"
                       f" ({_hint(err, ev.dtype)})", evidence)
    err = max(rows)
    by_row = _rows_over(ev, recs, tol)
    if by_row:
        evidence["rows"] = by_row
        if by_row["rows_over"]:
            return Finding(CheckId.PRECISION, Status.FAIL,
                           f"{by_row['rows_over']} of {by_row['rows']} output rows exceed the {_bound(ev)} "
                           f"row by row (worst: row {by_row['worst_row']}, relative error "
                           f"{by_row['worst_error']:.3g} against its reference row, {by_row['worst_allowed']:.2g} "
                           f"allowed there), although the norm-wise error is {err:.3g}: rows that weigh little "
                           "in the norm were dropped or computed in a thinner format", evidence)
    harder = f" ({len(own)} of them held to the reference's own error there)" if own else ""
    return Finding(CheckId.PRECISION, Status.PASS,
                   f"max relative error {err:.2g} <= {max([tol, *own.values()]):.2g} over {len(rows)} input sets"
                   f"{harder}, and within it row by row", evidence)


def _over(err: float, allowed: float) -> float:
    """How far past its bound an error is (inf for non-finite values)."""
    return err / allowed if allowed > 0 else (math.inf if err > 0 else 0.0)


def _rows_over(ev, recs, tol: float) -> dict | None:
    """The per-row bound on the checked outputs whose values the reference implementation ran
    on: rows over it, in the output with the most of them."""
    import torch
    worst = None
    for c in recs:
        ref_rows = ev.reference_row_errors.get(c.values_of)
        if ref_rows is None or ev.poisoned(c):
            continue
        errs = ev.row_errors(c.output, c.values_of)
        if errs.shape != ref_rows.shape:
            continue
        allowed = torch.clamp(ROW_SLACK * ref_rows.to(errs.device), min=tol)
        ratio = errs / allowed
        i = int(torch.argmax(ratio)) if ratio.numel() else 0
        got = {"rows": int(errs.numel()), "rows_over": int((errs > allowed).sum()), "phase": c.phase,
               "worst_row": i, "worst_error": float(errs[i]) if errs.numel() else 0.0,
               "worst_allowed": float(allowed[i]) if errs.numel() else tol}
        if worst is None or (got["rows_over"], got["worst_error"]) > (worst["rows_over"], worst["worst_error"]):
            worst = got
    return worst


def _bound(ev) -> str:
    """Whose bound it is: the problem's own (TOLERANCE, a GPU MODE task's checker), or its dtype's."""
    return "problem's declared bound" if ev.declared_tolerance is not None else f"{dtype_name(ev.dtype)} bound"


def _hint(err: float, dtype) -> str:
    import torch
    if dtype == torch.float32 and 1e-4 < err < 1e-2:
        return "the fingerprint of TF32, float16 or bfloat16 arithmetic"
    return "wrong result"
