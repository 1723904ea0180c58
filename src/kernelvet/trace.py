"""An audited call's profiler trace on the wire: written by the worker (`encode`), read back by the
judge (`expand`) into the activities and CPU events the checks classify (checks/kernel_audit.py,
checks/attribution.py).

One table of names, and one row of integers per device activity or CPU event: a trace of tens of
thousands of kernels (a 6-layer LSTM over 512 steps runs more than 10,000 in one call) stays well
within the message header. The harness's own markers are always kept; what is left out beyond the
limits is counted, so that the judge knows when its account of the call is partial. Every row is
the worker's claim: one that is not as the format says counts for nothing, and is counted.
"""

from __future__ import annotations

import json

MARKER = "spin_kernel"   # the harness's gate and end marker around the audited call
AUDIT_MAX = 30000        # device activities one audit sends at most (and as many CPU events)
BODY_BYTES = 3 << 20     # what rows and names may take of the header (protocol.MAX_HEADER_BYTES: 4 MiB)
ACTIVITY = ("stream", "start_ns", "end_ns", "corr")          # a device activity's row: its name, then these
CPU_EVENT = ("kind", "tid", "start_ns", "end_ns", "corr")    # a CPU event's row: its name, then these
CPU_KINDS = ("op", "launch")


def encode(acts: list[dict], cpu_events: list[dict] | None) -> dict:
    """The body of the worker's `audited` reply, from the profiler's activities (dicts with `name`
    and ACTIVITY's keys) and, where asked, its CPU events (`name` and CPU_EVENT's keys, `kind` one
    of CPU_KINDS). The markers are kept whatever the count; the latest other rows go first."""
    acts = sorted(acts, key=lambda a: a["corr"])
    markers = [a for a in acts if MARKER in a["name"]]
    others = [a for a in acts if MARKER not in a["name"]]
    cpu = list(cpu_events or ())
    keep, cpu_keep = min(len(others), AUDIT_MAX), min(len(cpu), AUDIT_MAX)
    while True:
        kept = sorted(others[:keep] + markers, key=lambda a: a["corr"])
        body = _rows(kept, cpu[:cpu_keep] if cpu_events is not None else None)
        if len(json.dumps(body)) <= BODY_BYTES or keep + cpu_keep == 0:
            break
        keep, cpu_keep = keep // 2, cpu_keep // 2
    body["dropped"] = len(others) - keep
    if cpu_events is not None:
        body["cpu_dropped"] = len(cpu) - cpu_keep
    return body


def _rows(acts: list[dict], cpu_events: list[dict] | None) -> dict:
    names: dict[str, int] = {}

    def row(e: dict, fields: tuple[str, ...]) -> list[int]:
        return [names.setdefault(e["name"], len(names)), *(int(e[f]) for f in fields)]

    body: dict = {"activities": [row(a, ACTIVITY) for a in acts]}
    if cpu_events is not None:
        body["cpu_events"] = [row({**e, "kind": CPU_KINDS.index(e["kind"])}, CPU_EVENT) for e in cpu_events]
    body["names"] = list(names)
    return body


def expand(body: dict) -> dict:
    """The judge's reading of an `audited` body (wire.py has checked its kinds): activities and CPU
    events as dicts, `dropped` and `cpu_dropped` as sent, and `malformed`, the rows that were not
    as the format says (a name index out of the table, a wrong length, an unknown kind)."""
    names = body.get("names") or []
    malformed = 0

    def dicts(rows, fields):
        nonlocal malformed
        out = []
        for r in rows or ():
            if len(r) != 1 + len(fields) or not 0 <= r[0] < len(names) or any(type(x) is not int for x in r):
                malformed += 1
                continue
            out.append({"name": names[r[0]], **dict(zip(fields, r[1:]))})
        return out

    acts = dicts(body.get("activities"), ACTIVITY)
    cpu = dicts(body.get("cpu_events"), CPU_EVENT)
    for e in cpu:
        if not 0 <= e["kind"] < len(CPU_KINDS):
            malformed += 1
    cpu = [{**e, "kind": CPU_KINDS[e["kind"]]} for e in cpu if 0 <= e["kind"] < len(CPU_KINDS)]
    return {"activities": acts, "cpu_events": cpu, "dropped": int(body.get("dropped") or 0),
            "cpu_dropped": int(body.get("cpu_dropped") or 0), "malformed": malformed}
