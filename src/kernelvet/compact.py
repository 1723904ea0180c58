"""Outputs compared, then dropped: what a big problem's vet keeps of the outputs it checks once.

Under a lean holding (sizes.Holding) the judge would otherwise keep every output it records (the
checked calls, the timing's first output per set, both sides of each unseen pair, each loop's
last) and a float64 reference per input set: for an 8 GiB output, tens of them. Every output but
those the checks compare with each other (the fresh sets': identity, determinism) is compared as
it arrives, with the very functions the checks apply to it, and the numbers are kept in the
evidence's memo under a stand-in of the same shape and dtype on the meta device, which holds no
data:

  precision (warm-up, probe): error against the float64 reference with the problem's floor, ULP
    statistics, per-row errors where the reference's own are known;
  caching (warm-up, overwrite, timed, unseen, loop): error against its values' reference, and the
    overwrite's against its storages' old values;
  unwritten-output, Evidence.poisoned (all): the poison count;
  determinism (its second launch on a fresh set, `settle_repeat`): bitwise equal to the first
    launch's output, which stays (one that differs stays too).

An output on the device compared against a reference on the host (a big problem judged there)
costs seconds, the reference crossing to the device: one bit-identical to an output settled
before against the same references (by a keyed digest of its bits, bits_digest.py) takes that
one's numbers. A seen set's timed outputs and the control requests' are such repeats.

The reference of a set used for one request (warm-up, probe, unseen, loop) is swapped
for its stand-in when the judge lets the set go (judge._let_go -> `drop_reference`), so that a set
used by two records (the probe's two attempts) is compared against the real values each time.
"""

from __future__ import annotations

import torch

from . import bits_digest, metrics, sizes

PHASES = frozenset({"warmup", "overwrite", "probe", "timed", "unseen", "loop"})
# values_of: a set used for this record alone (the overwrite's values stay in set A for the timing)
OWN_VALUES = frozenset({"warmup", "probe", "unseen", "loop"})
_PRECISION = frozenset({"warmup", "probe"})


def settle(ev, rec) -> None:
    """Compare `rec`'s output now, record what the checks read of it, keep a stand-in. An output
    bit-identical to one settled before against the same references (bits_digest.py: a seen set's
    timed outputs, the controls' copies of its values) takes that one's numbers, not a second pass."""
    out = rec.output
    stand = out.to("meta")
    seen = _digest_key(ev, rec, out)
    facts = ev.settled_bits.get(seen) if seen is not None else None
    if facts is None:
        facts = _facts(ev, rec, out)
        if seen is not None:
            ev.settled_bits[seen] = facts
    else:
        ev.extra["outputs_settled_again"] = ev.extra.get("outputs_settled_again", 0) + 1
    for fn, value, key, more in facts:
        as_seen = () if key is None else (_as_seen(ev, rec, key),)
        ev.known(fn, value, stand, *as_seen, *more)
    rec.output = stand
    sizes.give_back_host()   # the comparisons' freed temporaries, before the next reply arrives


def settle_repeat(ev, rec) -> None:
    """The determinism call's output (a fresh set's inputs, launched again), compared with the first
    fresh output on that set now, with what `determinism` reads of the pair (same bits; where they
    differ, by how much), its poison counted, and a stand-in kept: a second copy of a fresh output,
    held to the end of the vet, would be one output more than a lean plan counts."""
    first = next((c for c in ev.records("fresh") if c.set_id == rec.set_id), None)
    out = rec.output
    if first is None:   # nothing to compare it with: kept, as the check finds it
        rec.output = ev.kept(out, rec.values_of)
        return
    stand, twin = out.to("meta"), first.output
    ev.poison_counted(out, stand)
    same = metrics.same_bits(out, twin)
    ev.known(metrics.same_bits, same, stand, twin)
    if not same:   # determinism._launches_differ's numbers
        ev.known(metrics.bitwise_differences, metrics.bitwise_differences(out, twin), stand, twin)
        if out.shape == twin.shape and out.is_floating_point():
            ev.known(metrics.rel_error, metrics.rel_error(out, twin), stand, twin)
    rec.output = stand
    sizes.give_back_host()


def _facts(ev, rec, out) -> list[tuple]:
    """What the checks read of `out`, as (function, value, reference key or None, arguments after
    the output and its reference): with no tensor of the vet's in them, so that one kept in
    `ev.settled_bits` holds no reference alive past its set."""
    from .evidence import Evidence
    words = ev.poison_words
    n = metrics.poison_count(out, words)
    facts = [(metrics.poison_count, n, None, (words,)),   # unwritten-output
             (Evidence._poison_count, n, None, ())]       # Evidence.poisoned
    for key in {rec.values_of, rec.set_id}:               # caching: the overwrite's old values too
        ref = ev.refs64[key]
        if out.shape != ref.shape:
            continue
        precision = rec.phase in _PRECISION and key == rec.values_of and out.dtype == ev.dtype
        rows = precision and key in ev.reference_row_errors
        # one pass over the pair for every error the checks read of it (Evidence.compared)
        c = (metrics.compare_rows if rows else metrics.compare)(out, ref)
        facts.append((metrics.compare_rows if rows else metrics.compare, c, key, ()))
        if c is None:   # an integer output, or a reference with non-finite values: rel_error's own path
            facts.append((metrics.rel_error, metrics.rel_error(out, ref), key, ()))
        if precision:
            floor = ev.error_floor
            if c is None:
                facts.append((metrics.rel_error, metrics.rel_error(out, ref, floor), key, (floor,)))
                if rows:
                    facts.append((metrics.row_errors, metrics.row_errors(out, ref), key, ()))
            facts.append((metrics.ulp_stats, metrics.ulp_stats(out, ref, ev.dtype), key, (ev.dtype,)))
    return facts


def _as_seen(ev, rec, key):
    """The reference `key`'s numbers are kept under: the stand-in of a set used for this record
    alone (its reference goes once the set is let go), else the reference itself."""
    ref = ev.refs64[key]
    return _stand_in(ev, key, ref) if rec.phase in OWN_VALUES and key == rec.values_of else ref


def _digest_key(ev, rec, out) -> tuple | None:
    """What makes two records' settled numbers the same: the output's bits, the references they are
    compared against and the record's phase; None where a digest costs about what a comparison does
    (`worth_a_digest`)."""
    keys = sorted({rec.values_of, rec.set_id})
    if not worth_a_digest(out, [ev.refs64[k] for k in keys]):
        return None
    refs = tuple((k, id(ev.refs64[k])) for k in keys)
    try:
        bits = bits_digest.digest(out, ev.digest_key)
    except torch.OutOfMemoryError:   # no room for the digest's slices now: compared as it is
        return None
    return bits, refs, rec.phase


def worth_a_digest(out: torch.Tensor, refs: list) -> bool:
    """An output on an accelerator whose references are elsewhere (the host): its comparison moves
    each reference to the device, its digest reads the output where it is."""
    return out.device.type != "cpu" and all(r.device != out.device for r in refs)


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
