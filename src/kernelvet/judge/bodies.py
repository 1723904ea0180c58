"""The bodies of the judge's requests (input sets, loads, timing runs) and what it reads back."""

from __future__ import annotations

import torch

from .. import codec
from .settings import Settings


def _encode_set(vals: list) -> tuple[list, list]:
    layout, blobs = [], []
    for v in vals:
        if isinstance(v, torch.Tensor):
            layout.append({"t": len(blobs)})
            blobs.append(codec.to_blob(v, device_ok=True))   # a set kept on the device: lent from there
        else:
            layout.append({"v": v})
    return layout, blobs


def _decode_output(msg) -> torch.Tensor | None:
    return codec.from_blob(msg.tensors[0]) if msg.tensors else None


# one parameter per field of the load request's body
def _load_body(target: dict, dev, weight_seed, init, poison, paint, settings, out_nbytes, output_arg=None,
               state=(), whole=None):
    """`whole` (the reference's load only): its other parameters and buffers, by name, so that the
    worker may build it without running its init (weights.build_whole)."""
    layout, blobs = _encode_set(init)
    body = {"target": target, "device": str(dev), "weight_seed": weight_seed, "init": layout,
            "poison": poison, "paint": paint, "settle_s": settings.settle_s, "out_nbytes": out_nbytes,
            "output_arg": output_arg}
    if state:   # the fresh weights, as (name, blob index) after the init tensors
        body["state"] = [{"name": name, "t": len(blobs) + i} for i, (name, _t, _p) in enumerate(state)]
        blobs = blobs + [codec.to_blob(t) for _n, t, _p in state]
    if whole is not None:
        body["whole"] = [{"name": name, "t": len(blobs) + i} for i, (name, _t) in enumerate(whole)]
        blobs = blobs + [codec.to_blob(t.contiguous()) for _n, t in whole]
    return body, blobs


# the timing request's fields, each the settings' unless given
def _time_body(sets, settings: Settings, reps=None, warmup=None, budget_ms=None, null_reps=None,
               unseen=()) -> dict:
    return {"sets": sets, "unseen": list(unseen),
            "warmup_ms": settings.warmup_ms, "reps": reps or settings.max_reps,
            "min_reps": min(reps or settings.min_reps, settings.min_reps),
            "budget_ms": settings.budget_ms if budget_ms is None else budget_ms,
            "warmup": settings.warmup_calls if warmup is None else warmup,
            "null_reps": settings.null_reps if null_reps is None else null_reps,
            "reps_per_sync": settings.reps_per_sync}


def _pair_body(seen: int, key: int, layout: list, lead_ms: float, null: bool = False) -> dict:
    """A pair request: one rep on set `key`, carried by the request (`layout`), in seen set
    `seen`'s storages, then one on `seen`; `null`: the judge's null function in both calls'
    place (what the request costs without the candidate: judge/null_prices.py)."""
    body = {"sets": [seen], "unseen": [key], "layout": layout, "lead_ms": lead_ms,
            "reps": 1, "min_reps": 1, "budget_ms": 0.0, "warmup": 0, "warmup_ms": 0.0, "null_reps": 0}
    if null:
        body["null"] = True
    return body


def _faults_kept(body: dict, other: dict) -> dict:
    """A timing body with what either run saw wrong in the outputs (the larger counts)."""
    return {**body, **{k: max(int(body.get(k, 0)), int(other.get(k, 0)))
                       for k in ("mismatches", "overruns", "non_tensor", "reused_output_reps")}}
