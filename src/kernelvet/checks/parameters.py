"""`parameters`: every parameter of the reference has a counterpart of the same shape in the
candidate, which then holds the judge's fresh values for it (weights are secret inputs, see
weights.py). A weight declared with another shape keeps the candidate's own init: right only
while the reference holds its init too (a norm's ones and zeros), wrong on any other weights.

A candidate that renames, transposes or fuses its weights defines
`ModelNew.load_reference_state(state_dict)` and takes the values itself; the outputs on the fresh
weights (precision) then say whether it used them. What the worker says it matched is the
candidate's own claim: this finding explains a wrong output, precision decides it."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached


def evaluate(ev) -> Finding:
    ref = ev.reference_weights
    got = ev.candidate_weights
    if ref is None or not isinstance(got, dict):
        return not_reached(CheckId.PARAMETERS)
    params = [(str(name), list(shape)) for name, shape, is_param in ref if is_param]
    evidence = {"reference_parameters": len(params), "hook": bool(got.get("hook"))}
    if not params:
        return Finding(CheckId.PARAMETERS, Status.PASS, "the reference has no floating parameters", evidence)
    if got.get("hook") is True:
        return Finding(CheckId.PARAMETERS, Status.PASS, f"ModelNew.load_reference_state took the reference's "
                       f"{len(ref)} fresh weights", evidence)
    matched = got.get("matched")
    matched = {m for m in matched if isinstance(m, str)} if isinstance(matched, list) else set()
    left = got.get("left") if isinstance(got.get("left"), list) else []
    missing = [{"name": n, "shape": s} for n, s in params if n not in matched]
    evidence.update({"missing": missing[:20], "candidate_unmatched": left[:20]})
    if missing:
        m = missing[0]
        theirs = ", ".join(f"{n} {tuple(s)}" for n, s in (x for x in left if isinstance(x, list) and len(x) == 2))
        return Finding(CheckId.PARAMETERS, Status.FAIL,
                       f"reference parameter {m['name']} of shape {tuple(m['shape'])} has no counterpart of that shape "
                       f"in the candidate ({len(missing)} of {len(params)} unmatched; the candidate's unmatched weights: "
                       f"{theirs or 'none'}); define ModelNew.load_reference_state(state_dict) if it stores them "
                       "another way", evidence)
    return Finding(CheckId.PARAMETERS, Status.PASS, f"all {len(params)} reference parameters handed to the candidate "
                   "by name or order and shape", evidence)
