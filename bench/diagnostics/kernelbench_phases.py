"""Where a vet of a big KernelBench problem spends its time: the report's phases, and the judge's
own steps inside them (set draws, float64 references, FLOP count, worker requests), each timed by
wrapping the function that does it.

    PYTHONPATH=src [VET_TIMEOUT_S=300] [VET_DEVICE=cuda] [KB_LEVEL1=DIR] \
        python3 bench/diagnostics/kernelbench_phases.py OUT.jsonl 4:ref,3:allowed [BUDGET_S]

Each spec is PROBLEM_NUMBER:KIND of KernelBench level 1 (in KB_LEVEL1, by default
.kernelbench/KernelBench/level1):
`ref`, the problem's own Model as the candidate (default library policy), or `allowed`, the same
with `--allow library-call`. One line per vet is appended to OUT.jsonl; no new vet starts once
BUDGET_S seconds have passed.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import signal
import sys
import tempfile
import time

import kernelvet.judge.api as api
import kernelvet.judge.plan as plan
import kernelvet.judge.reference as reference
from kernelvet import bits_digest, codec, compact, evidence, lending, metrics, problem, protocol, sizes, spawn, vet

LEVEL1 = os.environ.get("KB_LEVEL1", os.path.join(".kernelbench", "KernelBench", "level1"))
DEVICE = os.environ.get("VET_DEVICE", "cuda")
SPENT = collections.defaultdict(float)
TIMEOUT_S = float(os.environ.get("VET_TIMEOUT_S", "300"))   # each vet's --timeout
CALLS = collections.Counter()
LOANS: list = []   # per loan made: [lent input bytes, rooms asked, rooms made, room bytes]
CALLERS: dict = collections.defaultdict(collections.Counter)   # label -> "f < g < h" -> [calls]


def _timed(owner, name: str, label: str | None = None, callers: bool = False) -> None:
    """`callers`: also count the four functions above each call (who asks for a slow step)."""
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.monotonic()
        if callers:
            f, chain = sys._getframe(1), []
            while f is not None and len(chain) < 4:
                chain.append(f.f_code.co_name)
                f = f.f_back
            CALLERS[label or name][" < ".join(chain)] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[label or name] += time.monotonic() - t0
            CALLS[label or name] += 1
    setattr(owner, name, wrapper)


def _judge_steps() -> dict:
    return {k: [round(SPENT[k], 3), CALLS[k]] for k in SPENT}


def _wrap_all() -> None:
    _timed(problem.Problem, "draw_inputs")
    _timed(api, "reference64")
    _timed(api, "_count_flops")
    _timed(sizes, "plan_for")   # holding_for's work too: it calls plan_for
    _timed(api, "_judged_on")
    _timed(plan, "_encode_set")
    _timed(reference, "_encode_set", "_encode_set (reference)")
    _timed(spawn.WorkerHandle, "request")
    # the comparisons, and an output's move to where they are made (a big problem's: the host)
    for name in ("compare", "compare_rows", "rel_error", "row_errors", "ulp_stats", "poison_count", "same_bits",
                 "rel_distance", "bitwise_differences"):
        _timed(metrics, name, f"metrics.{name}")
    _timed(evidence.Evidence, "add_call", "Evidence.add_call (the move, a lean vet's comparisons)")
    _timed(compact, "settle", "compact.settle (a lean vet's comparisons)")
    _timed(metrics, "_sliced_norms", "metrics._sliced_norms (the sliced norms inside rel_error and rel_distance)", callers=True)
    # the transfers: sends and receives (a receive waits for the worker too), loans, host copies
    _timed(protocol, "send", "protocol.send")
    _timed(protocol, "recv", "protocol.recv (the worker's time inside)")
    _timed(codec, "from_blob", "codec.from_blob")
    _timed(lending, "through_host", "lending.through_host")
    _timed(lending.JudgeLoan, "received", "JudgeLoan.received")
    _timed(lending.JudgeLoan, "close", "JudgeLoan.close")
    _loans_counted()
    _timed(bits_digest, "digest", "bits_digest.digest")
    # a set's float64 reference made (the forward, then its move to where the judge compares)
    _timed(api, "_reference_of", "api._reference_of (a reference made and moved)")
    _timed(api, "_moved", "api._moved (a reference to where it is compared)")
    _timed(evidence.Evidence, "_compared_where_arrived", "Evidence._compared_where_arrived")
    _settled_where()
    for name in ("_pair_request", "_control_request", "_null_pair", "clocked_time", "measure_requests_again",
                 "measure_unseen_again", "measure_drain_again"):
        _timed(plan.Plan, name, f"Plan.{name}")
    # the plan's stages (each one's requests and comparisons together)
    for name in ("call", "upload", "timed_outputs", "unseen_pairs", "null_timing", "time_again", "audit",
                 "ordering_probe", "judge_clock_attempts"):
        _timed(plan.Plan, name, f"Plan.{name}")


def _loans_counted() -> None:
    """Each loan's size: a reply's outputs with no room made for them come back through the host."""
    make = lending.JudgeLoan.make.__func__

    def counted(cls, device, blobs, rooms, room_bytes):
        t0 = time.monotonic()
        loan = make(cls, device, blobs, rooms, room_bytes)
        SPENT["JudgeLoan.make"] += time.monotonic() - t0
        CALLS["JudgeLoan.make"] += 1
        if loan is not None:
            lent = sum(b.size for b in loan.buffers[:loan.first_room])
            LOANS.append([lent, rooms, len(loan.buffers) - loan.first_room, room_bytes])
        return loan
    lending.JudgeLoan.make = classmethod(counted)


def _settled_where() -> None:
    """Where each output a lean vet settles arrived (an accelerator, or the host), counted."""
    settle = compact.settle

    def counted(ev, rec):
        CALLS[f"settled on {rec.output.device.type}"] += 1
        SPENT.setdefault(f"settled on {rec.output.device.type}", 0.0)
        return settle(ev, rec)
    compact.settle = counted


def _stage(number: int, work: str) -> tuple[str, str, str]:
    """The problem and its own Model as a candidate, in a folder of their own."""
    files = {int(f.split("_")[0]): f for f in os.listdir(LEVEL1) if f.endswith(".py")}
    name = files[number]
    with open(os.path.join(LEVEL1, name)) as fh:
        source = fh.read()
    folder = os.path.join(work, str(number))
    os.makedirs(folder, exist_ok=True)
    prob, cand = os.path.join(folder, "problem.py"), os.path.join(folder, "candidate.py")
    with open(prob, "w") as fh:
        fh.write(source)
    with open(cand, "w") as fh:
        fh.write(source + "\n\nclass ModelNew(Model):\n    pass\n")
    return name, prob, cand


def one(spec: str, work: str) -> dict:
    number, kind = spec.split(":")
    name, prob, cand = _stage(int(number), work)
    SPENT.clear()
    CALLS.clear()
    LOANS.clear()
    CALLERS.clear()
    t0 = time.monotonic()
    try:
        report = vet(cand, prob, device=DEVICE, timeout=TIMEOUT_S, allow=["library-call"] if kind == "allowed" else [])
        got = {"verdict": str(report.verdict), "failed": [str(f.check) for f in report.failed],
               "phases": dict(report.phases_s), "requests": dict(report.requests_s)}
    except Exception as exc:  # noqa: BLE001 - recorded, the next spec still runs
        got = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    got.update(problem=name, kind=kind, wall=time.monotonic() - t0,
               judge=_judge_steps(), loans=list(LOANS),
               callers={k: dict(v) for k, v in CALLERS.items()})
    return got


def _partial_on_sigterm(out: str, current: dict) -> None:
    """Stopped from outside (a `timeout`), the vet under way still leaves its line: the judge's
    steps so far, marked unfinished."""
    def stop(_signum, _frame):
        line = json.dumps({**current, "unfinished": True, "wall": time.monotonic() - current.get("t0", 0.0),
                           "judge": _judge_steps(), "loans": list(LOANS),
                           "callers": {k: dict(v) for k, v in CALLERS.items()}})
        print(line, flush=True)
        with open(out, "a") as fh:
            fh.write(line + "\n")
        os._exit(124)
    signal.signal(signal.SIGTERM, stop)


def main(argv: list[str]) -> int:
    out, specs = argv[0], argv[1].split(",")
    budget = float(argv[2]) if len(argv) > 2 else 540.0
    _wrap_all()
    current: dict = {}
    _partial_on_sigterm(out, current)
    end = time.monotonic() + budget
    with tempfile.TemporaryDirectory() as work:
        for spec in specs:
            if time.monotonic() > end:
                break
            current.clear()
            current.update(spec=spec, t0=time.monotonic())
            line = json.dumps(one(spec, work))
            print(line, flush=True)
            with open(out, "a") as fh:
                fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
