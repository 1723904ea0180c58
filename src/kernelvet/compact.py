"""Outputs compared, then dropped: what a big problem's vet keeps of the outputs it checks once.

Under a lean holding (sizes.Holding) the judge would otherwise keep every output it records (the
checked calls, the timing's first output per set, both sides of each unseen pair, each loop's
last) and a float64 reference per input set: for an 8 GiB output, tens of them. Every output but
those the checks compare with each other (the fresh sets' and the determinism call's: identity,
determinism) is compared as it arrives, with the very functions the checks apply to it, and the
numbers are kept in the evidence's memo under a stand-in of the same shape and dtype on the meta
device, which holds no data:

  precision (warm-up, probe): error against the float64 reference with the problem's floor, ULP
    statistics, per-row errors where the reference's own are known;
  caching (warm-up, overwrite, timed, unseen, loop): error against its values' reference, and the
    overwrite's against its storages' old values;
  unwritten-output, Evidence.poisoned (all): the poison count.

The reference of a set used for one request (warm-up, probe, unseen, loop) is swapped
for its stand-in when the judge lets the set go (judge._let_go -> `drop_reference`), so that a set
used by two records (the probe's two attempts) is compared against the real values each time.
"""

from __future__ import annotations

import torch

from . import metrics

PHASES = frozenset({"warmup", "overwrite", "probe", "timed", "unseen", "loop"})
# values_of: a set used for this record alone (the overwrite's values stay in set A for the timing)
OWN_VALUES = frozenset({"warmup", "probe", "unseen", "loop"})
_PRECISION = frozenset({"warmup", "probe"})


def settle(ev, rec) -> None:
    """Compare `rec`'s output now, record what the checks read of it, keep a stand-in."""
    from .evidence import Evidence
    out = rec.output
    stand = out.to("meta")
    words = ev.poison_words
    n = metrics.poison_count(out, words)
    ev.known(metrics.poison_count, n, stand, words)   # unwritten-output
    ev.known(Evidence._poison_count, n, stand)        # Evidence.poisoned
    for key in {rec.values_of, rec.set_id}:           # caching: the overwrite's old values too
        ref = ev.refs64[key]
        if out.shape != ref.shape:
            continue
        as_seen = _stand_in(ev, key, ref) if rec.phase in OWN_VALUES and key == rec.values_of else ref
        precision = rec.phase in _PRECISION and key == rec.values_of and out.dtype == ev.dtype
        rows = precision and key in ev.reference_row_errors
        # one pass over the pair for every error the checks read of it (Evidence.compared)
        c = (metrics.compare_rows if rows else metrics.compare)(out, ref)
        ev.known(metrics.compare_rows if rows else metrics.compare, c, stand, as_seen)
        if c is None:   # an integer output, or a reference with non-finite values: rel_error's own path
            ev.known(metrics.rel_error, metrics.rel_error(out, ref), stand, as_seen)
        if precision:
            floor = ev.error_floor
            if c is None:
                ev.known(metrics.rel_error, metrics.rel_error(out, ref, floor), stand, as_seen, floor)
                if rows:
                    ev.known(metrics.row_errors, metrics.row_errors(out, ref), stand, as_seen)
            ev.known(metrics.ulp_stats, metrics.ulp_stats(out, ref, ev.dtype), stand, as_seen, ev.dtype)
    rec.output = stand


def _stand_in(ev, key, ref: torch.Tensor) -> torch.Tensor:
    """The meta stand-in `key`'s reference will be swapped for (one per key, made once)."""
    stands = ev.extra.setdefault("reference_stand_ins", {})
    if key not in stands:
        stand = ref.to("meta")
        ties = getattr(ref, "index_ties", None)
        if ties is not None:
            stand.index_ties = ties
        stands[key] = stand
    return stands[key]


def drop_reference(ev, key) -> None:
    """`key`'s set is done with: its reference gives way to the stand-in its records were keyed on."""
    stand = ev.extra.get("reference_stand_ins", {}).get(key)
    if stand is not None:
        ev.refs64[key] = stand
