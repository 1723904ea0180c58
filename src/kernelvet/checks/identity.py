"""`identity`: the output must be the function of its inputs, not one of them, and not a constant.

Over at least three independent random input sets: an output much closer to one of its inputs
than the true answer is (a copy), or outputs of different inputs much closer to each other than
the true answers are (ignores its input), is a reject. A reference that really equals an input
(ReLU of positives, say) exempts itself: both distances are then zero.

Outputs of different inputs can only differ where the true answers do by more than the output's
own rounding: a GELU of sums far below zero, plus a bias, is that bias to float32's last bit
whatever the input (KernelBench's level 2 problem 36: three sets' answers 6e-11 apart, relative),
and the reference itself returns one output for all of them. Answers closer than an honest
output's error (the reference implementation's own, at least the dtype's epsilon) cannot tell a
constant from right outputs; where no pair can, the check says inconclusive, and a constant there
is `precision`'s to judge."""

from __future__ import annotations

import itertools

import torch

from .. import metrics
from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached

RATIO = 0.1   # "much closer": a tenth of the reference's distance


def evaluate(ev) -> Finding:
    recs = [c for c in ev.records("fresh") if not ev.poisoned(c)]
    if len({c.values_of for c in recs}) < 3:
        return not_reached(CheckId.IDENTITY, "fewer than three independent input sets were checked")
    for c in recs:
        for i, d_out, d_ref in ev.input_distances(c.output, c.values_of, ev.output_arg):
            if d_ref > 1e-12 and d_out <= RATIO * d_ref:
                return Finding(CheckId.IDENTITY, Status.FAIL,
                               f"output is a copy of input {i}: distance {d_out:.3g} to it, where the true "
                               f"answer is {d_ref:.3g} away", {"input": i, "d_output_input": d_out,
                                                                "d_reference_input": d_ref})
    told = untold = 0   # pairs whose answers lie further apart than honest outputs' error, and closer
    for a, b in itertools.combinations(recs, 2):
        if a.values_of == b.values_of:
            continue
        ref_a, ref_b = ev.refs64[a.values_of], ev.refs64[b.values_of]
        if getattr(ref_a, "index_ties", None) is not None:
            # argmax/argmin: any index of the extreme is right, so indices of two sets need not be as
            # far apart as torch's; precision (exact up to ties, on every set) rules out a constant
            continue
        d_out = ev.rel_distance(a.output, b.output)
        d_ref = ev.rel_distance(ref_a, ref_b)
        if d_ref <= 1e-12:
            continue
        if d_ref * ev.memo(metrics.norm, ref_b) * (1 - RATIO) <= _honest_error(ev, ref_a) + _honest_error(ev, ref_b):
            untold += 1
            continue
        told += 1
        if d_out <= RATIO * d_ref:
            return Finding(CheckId.IDENTITY, Status.FAIL,
                           f"output ignores its input: two different input sets gave outputs {d_out:.3g} apart, "
                           f"where the true answers are {d_ref:.3g} apart",
                           {"d_outputs": d_out, "d_references": d_ref})
    if untold and not told:
        return Finding(CheckId.IDENTITY, Status.SKIP,
                       "inconclusive: the true answers of different input sets lie closer together than an honest "
                       "output's own rounding, so outputs that do not move with the input cannot be told from "
                       "right ones (precision judges them)", {"sets": len(recs), "untold": untold})
    return Finding(CheckId.IDENTITY, Status.PASS,
                   f"outputs of {len(recs)} independent input sets track their inputs, none is a copy of one",
                   {"sets": len(recs), "untold": untold})


def _honest_error(ev, ref: torch.Tensor) -> float:
    """How far (by norm) an honest output may lie from the answer `ref` by rounding alone: the
    reference implementation's own error, at least the output dtype's epsilon, relative."""
    if not ref.is_floating_point():
        return 0.0
    eps = torch.finfo(ev.dtype).eps if ev.dtype.is_floating_point else 0.0
    return max(ev.reference_error or 0.0, eps) * max(ev.memo(metrics.norm, ref), ev.error_floor)
