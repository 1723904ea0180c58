"""A lean holding's judge side (sizes.Holding): sets let go once their one request is answered,
fresh sets let go once sent where the holding draws them again, and float64 references made on
the device kept where the checks compare."""

from __future__ import annotations

import torch

from .. import compact, crossing, sizes
from ..evidence import Evidence


def _let_go(w, ev: Evidence, values, key, worker: bool = True) -> set:
    """Under a lean holding, a set used for one request is let go once answered: the worker frees
    it, the judge keeps its float64 reference and drops its drawn copy. A problem's later vets
    (refcache.py) draw it and make its reference again: kept for them, every such set of a big
    problem would stay in the judge beyond what the plan counts (an H200 ran out of memory that
    way, at 4 GiB a reference). Returns the keys the worker no longer holds."""
    if not (ev.extra.get("holding") or {}).get("lean"):
        return set()
    ref = ev.refs64[key]   # made now, while the values are here
    if ref.is_cuda:   # GPU path: the judge's float64 work done before the worker's next timed request
        torch.cuda.synchronize(ref.device)
    del ref   # held here through the release below, it would be one reference more than the plan counts
    if worker:   # a set the worker held for one request: its reference served that request alone
        compact.drop_reference(ev, key)   # in the vet's view; below, in the layers beneath it
        for layer in (getattr(ev.refs64, "_own", None), getattr(ev.refs64, "_shared", None)):
            if layer is not None:
                layer.pop(key, None)
    drop_set(values, key)
    sizes.give_back_host()   # the set's and its reference's work, before the worker's next request
    if not worker:
        return set()
    msg = w.request("release", {"sets": [key]})
    ev.extra["worker_sets_held"] = max(ev.extra.get("worker_sets_held", 0), int(msg.body.get("sets_held") or 0))
    return {key}


def drop_set(values, key) -> None:
    """The judge's copy of set `key` dropped, from a vet's view and the layers beneath it
    (refcache.PerVet): asked for again, it is drawn again from its seed."""
    for held in _layers(values):
        held.pop(key, None)


def redraws(hold) -> bool:
    """Whether the holding (a sizes.Holding, or an Evidence's record of one) draws sets again where read."""
    if hasattr(hold, "redraw_sets"):
        return hold.redraw_sets
    return bool((hold.extra.get("holding") or {}).get("redraw_sets"))


def sent(values, key, redraw: bool) -> None:
    """Set `key` is in the worker's hands: under a holding that draws sets again, the judge's own
    copy goes (its float64 reference was made before any call); read later, it is drawn again."""
    if redraw:
        drop_set(values, key)
        sizes.give_back_host()


def borrowed(values, key, redraw: bool) -> list:
    """Set `key`'s values for one use. Under a holding that draws sets again, a set the judge no
    longer holds is drawn for this use alone and not kept: held, it would be one set more than
    the plan counts, for the rest of the vet."""
    if not redraw or _held(values, key):
        return values[key]
    got = values[key]
    drop_set(values, key)
    return got


def _held(values, key) -> bool:
    """Whether set `key` is in the judge's hands, in a vet's view or a layer beneath it."""
    return any(key in layer for layer in _layers(values))


def _layers(values) -> list:
    """A vet's view of its sets and the layers beneath it (refcache.PerVet: its own, the problem's)."""
    return [held for held in (values, getattr(values, "_own", None), getattr(values, "_shared", None))
            if held is not None]


def _moved(ref: torch.Tensor, where: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A float64 reference made on the device, kept where the checks compare (a big problem's on
    the host), in `dtype` if given and it is floating (sizes.Holding.reference_dtype), with its
    argmax/argmin ties."""
    dtype = dtype if dtype is not None and ref.is_floating_point() else ref.dtype
    if ref.device == where and ref.dtype == dtype:
        return ref
    ties = getattr(ref, "index_ties", None)
    out = crossing.moved(ref, where, dtype)
    if ties is not None:
        out.index_ties = ties.to(where)
    return out


def _not_needed(values, keys) -> None:
    """Sets the plan will not ask for after all (a re-measurement's unseen sets where none was
    needed, a loop's next attempts once one settled): their draws started ahead dropped
    (draws.Draws.forget, refcache.PerVet.forget)."""
    forget = getattr(values, "forget", None)
    if forget is not None:
        forget(list(keys))
