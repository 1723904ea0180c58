"""The judge-worker wire: one typed definition per request and per reply.

Each message is a `Body`: the fields its JSON body may carry, each with a JSON kind and, for
numbers, a lower bound. The worker reads requests against `REQUESTS`; the judge reads replies
against `REPLIES` and takes from a request only the reply `ANSWERS` names for it (or `failed`).
The worker is the candidate's process, so a reply is a claim: a field of the wrong kind or out of
its bounds ends the worker with a protocol violation that names the field, never a traceback in
the judge. Tensors travel beside the body (protocol.py checks their specs); bodies stay small.
"""

from __future__ import annotations

import dataclasses
import math

# The exit status of a worker whose own code raised (EX_SOFTWARE): never 0, which reads as a worker
# that chose to stop; its traceback goes to its stderr, which the judge keeps with its output.
HARNESS_FAILED = 70


@dataclasses.dataclass(frozen=True)
class Kind:
    """A JSON kind: `int`, `num` (int or float), `bool`, `str`, `list`, `dict`; `of` for the
    elements of a list; `lo` the least a number may be; `null` whether None is allowed too."""

    name: str
    of: "Kind | None" = None
    lo: float | None = None
    null: bool = False

    def problem(self, value) -> str | None:
        """Why `value` is not of this kind, or None."""
        if value is None:
            return None if self.null else "null"
        if self.name in ("int", "num"):
            ok = isinstance(value, int) if self.name == "int" else isinstance(value, (int, float))
            if not ok or isinstance(value, bool):
                return f"not {'an integer' if self.name == 'int' else 'a number'}"
            if self.lo is not None and not (value >= self.lo):   # NaN fails too
                return f"{value!r} is below {self.lo}"
            if isinstance(value, float) and math.isinf(value):
                return "infinite"
            return None
        want = {"bool": bool, "str": str, "list": list, "dict": dict}[self.name]
        if not isinstance(value, want):
            return f"not a {self.name}"
        if self.of is not None:
            for i, item in enumerate(value):
                why = self.of.problem(item)
                if why:
                    return f"item {i}: {why}"
        return None


INT, BOOL, STR, LIST, DICT = (Kind(n) for n in ("int", "bool", "str", "list", "dict"))
COUNT, SECONDS = Kind("int", lo=0), Kind("num", lo=0.0)
INTS, STRS, TIMES = Kind("list", of=INT), Kind("list", of=STR), Kind("list", of=SECONDS)
PAIRS = Kind("list", of=Kind("list", of=SECONDS))
ROWS = Kind("list", of=Kind("list", of=INT))   # an audited call's trace (trace.py)


class Body(frozenset):
    """A message's field names (a frozenset, as `protocol.recv` takes them) with their kinds."""

    kinds: dict[str, Kind]

    def __new__(cls, **kinds: Kind) -> "Body":
        self = super().__new__(cls, kinds)
        self.kinds = kinds
        return self

    def problem(self, body: dict) -> str | None:
        """The first field of `body` that is not of its kind, and why; None if all are."""
        for name, value in body.items():
            why = self.kinds[name].problem(value) if name in self.kinds else "not a field of this message"
            if why:
                return f"field {name!r}: {why}"
        return None


SET = Kind("int")   # an input set's key (judge/settings.py)

# A request carrying big CUDA tensors, or whose reply does, names the device buffers the judge lent
# for it (lending.py): each {"handle", "nbytes", "room"}.
_LENT = {"lent": Kind("list", of=DICT)}

REQUESTS: dict[str, Body] = {k: Body(**v.kinds, **_LENT) for k, v in {
    "prepare": Body(device=STR, flush_factor=SECONDS),
    "load": Body(target=DICT, device=STR, weight_seed=Kind("int", null=True), init=LIST, poison=DICT, paint=BOOL,
                 settle_s=SECONDS, out_nbytes=COUNT, output_arg=Kind("int", null=True), state=LIST, whole=LIST),
    "inputs": Body(set=SET, layout=LIST),
    "overwrite": Body(set=SET),
    "call": Body(set=SET, trace=BOOL, deep_paint=BOOL, layout=LIST, copies_on_host=BOOL),
    "time": Body(sets=INTS, unseen=INTS, reps=COUNT, min_reps=COUNT, budget_ms=SECONDS, warmup=COUNT,
                 warmup_ms=SECONDS, null_reps=COUNT, reps_per_sync=COUNT, layout=LIST, lead_ms=SECONDS, null=BOOL,
                 copies_on_host=BOOL),
    "loop": Body(set=SET, n=COUNT, null=BOOL, fetch=BOOL, layout=LIST),
    "probe": Body(set=SET, sleep_ms=SECONDS, copies_on_host=BOOL),
    "audit": Body(set=SET, sleep_ms=SECONDS, own=BOOL, ops=BOOL),
    "release": Body(empty_cache=BOOL, sets=INTS, census=BOOL),
    "precision": Body(tf32=BOOL),
    "integrity": Body(),
    "lend": Body(),   # a probe: the one lent tensor, returned through the one room
    "bye": Body(),
}.items()}

# Every reply also carries the worker's `integrity` (bindings moved, process state changed).
_INTEGRITY = {"integrity": DICT}

REPLIES: dict[str, Body] = {k: Body(**v, **_INTEGRITY) for k, v in {
    "hello": dict(pid=COUNT, ppid=COUNT, torch=STR, python=STR),
    "prepared": dict(start_s=SECONDS, warm_failed=DICT, device=DICT, flush_bytes=COUNT),
    "loaded": dict(import_s=SECONDS, build_s=SECONDS, parameters=DICT),
    "ok": dict(same_pointers=BOOL, sets_held=COUNT, census=DICT),
    "output": dict(wall_s=SECONDS, call_index=COUNT, py_threads_new=COUNT, native_threads=INTS,
                   children_new=INTS, type=STR, exact_tensor=BOOL, aten_ops=STRS, storage_ptr=COUNT, device=STR,
                   changed_after_return=BOOL, inputs_changed=INTS, py_threads_after_settle=COUNT,
                   guard_overrun=COUNT, after_return=DICT, same_storage_as_call=COUNT),
    "probed": dict(conclusive=BOOL, sleep_ms=SECONDS, early_fraction=SECONDS, compared=COUNT, why=STR),
    "timed": dict(times_ms=TIMES, drain_ms=TIMES, null_drain_ms=TIMES, synced_ms=TIMES, order=INTS,
                  unseen_pairs=PAIRS, mismatches=COUNT, non_tensor=COUNT, first_sets=INTS, overruns=COUNT,
                  warmup_calls=COUNT, lead_ms=SECONDS, host_bound=BOOL, unseen_in_place=COUNT,
                  reused_output_reps=COUNT, outputs_copied=BOOL),
    "audited": dict(activities=ROWS, names=STRS, dropped=COUNT, cpu_events=ROWS, cpu_dropped=COUNT,
                    binaries=Kind("list", of=DICT)),
    "looped": dict(exact_tensor=BOOL),
    "state": dict(),
    "lent": dict(),
    "failed": dict(phase=STR, error=STR, traceback=STR),
}.items()}

# The one reply each request may get (besides "failed"): a candidate that writes forged frames into
# the worker's socket desynchronises the stream, and the next mismatch ends the worker.
ANSWERS = {None: "hello", "prepare": "prepared", "load": "loaded", "inputs": "ok", "overwrite": "ok", "release": "ok",
           "precision": "ok", "call": "output", "time": "timed", "probe": "probed", "audit": "audited", "loop": "looped",
           "integrity": "state", "lend": "lent"}
