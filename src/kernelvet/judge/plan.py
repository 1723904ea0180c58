"""The candidate's plan: the requests one worker is driven through, in order, and the evidence
each adds (the package's docstring lists them). `Plan` holds what every stage needs (the
worker, the evidence, the sets, the settings and the message limit), one method per stage."""

from __future__ import annotations

import dataclasses
import os
import statistics
import time

import torch

from .. import codec, lending, sched, spawn, trace
from ..checks import attribution, caching, pair_clock, streams
from ..checks.timers import judge_clock, loop_settled, requests_disagree
from ..evidence import Evidence
from ..ids import CheckId
from . import null_prices
from .bodies import _decode_output, _encode_set, _faults_kept, _load_body, _pair_body, _time_body
from .lean import _let_go, _not_needed, borrowed, redraws, sent
from .policy import _audit_wanted, _early_failure, _policy_needs_trace
from .settings import LOOP_ATTEMPTS, Settings, _CONTROL, _LOOP, _OVERWRITE, _PROBE, _WARMUP


@dataclasses.dataclass(eq=False)
class Plan:
    """One candidate's plan on one worker. It refers to the evidence, never the reverse, so that
    the evidence (and the device memory it holds) is freed without the cycle collector."""

    w: object                     # the worker's handle (spawn.Worker)
    ev: Evidence
    fresh: list
    settings: Settings
    max_blob: int                 # the largest tensor a reply may carry
    values: object = None         # the input sets, by key (made on first use)
    unseen: list = dataclasses.field(default_factory=list)
    again: list = dataclasses.field(default_factory=list)   # unseen sets for the re-measurements
    waived: frozenset = frozenset()
    audit_mode: str = "auto"
    phases: dict = dataclasses.field(default_factory=dict)
    out_nbytes: int = 0
    set_values: dict = dataclasses.field(default_factory=dict)   # set -> key of the values it holds now
    placed: set = dataclasses.field(default_factory=set)   # sets the worker holds: a set is sent
                                                            # inside the first request that uses it
    controls: dict = dataclasses.field(default_factory=dict)   # a control request's key -> its seen set
    released: set = dataclasses.field(default_factory=set)     # control keys the worker no longer holds
    before_clocks: object = None   # run before the first device clock (the probe's, the timing's): a spare's start waited for

    def __post_init__(self):
        self.set_values = {k: k for k in [_WARMUP, *self.fresh, _PROBE, *self.unseen,
                                          *(_LOOP + i for i in range(LOOP_ATTEMPTS))]}

    @classmethod
    def of(cls, ev: Evidence, w, values, fresh, settings: Settings, **stages) -> Plan:
        """The plan for `ev`'s candidate; `stages`: unseen, again, waived, audit_mode, phases,
        before_clocks."""
        out_nbytes = ev.refs64[fresh[0]].numel() * torch.tensor([], dtype=ev.dtype).element_size()
        max_blob = ev.extra.get("message_limit") or max(1 << 20, 64 * out_nbytes)
        return cls(w, ev, fresh, settings, max_blob, values=values, out_nbytes=out_nbytes, **stages)

    # -- what every stage does -----------------------------------------------------------
    def record(self, phase, set_id, msg):
        self.ev.integrity.append((phase, msg.body.get("integrity", {})))
        return msg

    def call(self, phase, set_id, **flags):
        blobs = ()
        sending = set_id not in self.placed
        if sending:
            flags["layout"], blobs = _encode_set(self.values[set_id])
            self.placed.add(set_id)
        msg = self.record(phase, set_id, self.w.request("call", {"set": set_id, **flags}, blobs,
                                                        max_blob_bytes=self.max_blob))
        del blobs
        if sending and set_id in self.fresh:   # the worker keeps it for the timing
            sent(self.values, set_id, redraws(self.ev))
        self.ev.add_call(phase, set_id, self.set_values[set_id], msg.body, _decode_output(msg))

    def upload(self, *keys):
        for k in keys:
            layout, blobs = _encode_set(self.values[k])
            self.w.request("inputs", {"set": k, "layout": layout}, blobs)
            self.placed.add(k)

    def timed_outputs(self, msg, unseen_keys) -> dict:
        """A timing run's first output on each set, to the evidence (a check verifies each); the
        reply's body. Keep the body, not the reply: a received blob maps its output's memfd for as
        long as it lives, whatever the evidence kept of that output (three outputs of a big
        problem's host through the unseen pairs, held by the timing run's reply)."""
        for s, blob in zip(msg.body.get("first_sets", []), msg.tensors):
            s = self.controls.get(int(s), int(s))   # a control's output: of the seen set it ran in
            self.ev.add_call("unseen" if s in unseen_keys else "timed", s,
                             self.set_values.get(s, s), {}, codec.from_blob(blob))
        return msg.body

    def clocks_next(self) -> None:
        """Before the first device clock of the plan (and no-op after it): `before_clocks`, once."""
        hook, self.before_clocks = self.before_clocks, None
        if hook is not None:
            hook()

    def stop_if_failed(self, after: str) -> bool:
        failed = _early_failure(self.ev, self.waived) if self.settings.early_exit else None
        if failed:
            self.ev.extra["stopped_after"] = failed
            self.ev.extra["stopped_at"] = after
        return bool(failed)

    # -- the stages, in order ------------------------------------------------------------
    def run(self, candidate, entry, init, weight_seed, poison) -> str:
        """Every stage, stopping early where a check already fails; the worker's output."""
        ev, w = self.ev, self.w
        try:
            if self.stop_if_failed("the source scan"):
                return w.output()
            self.load(candidate, entry, init, weight_seed, poison)
            if not self.checked_calls():
                return w.output()
            self.clocks_next()
            self.timing()
            if CheckId.TIMERS in ev.enabled and ev.timing.get("times_ms"):
                t0 = time.monotonic()
                ev.loop = self.judge_clock_attempts()
                ev.reached.add("loop")
                self.phases["judge-clock"] = time.monotonic() - t0
            if ev.audit is None and _audit_wanted(ev, self.audit_mode, self.waived):
                self.audit()
            self.record("end", None, w.request("integrity"))
            ev.reached.add("end")
        except spawn.CandidateRaised as exc:
            ev.candidate_error = {"phase": exc.phase, "error": exc.error, "traceback": exc.tb}
        except spawn.WorkerEnded as exc:
            ev.worker_end = exc.reason
        return w.output()

    def load(self, candidate, entry, init, weight_seed, poison) -> None:
        ev, w = self.ev, self.w
        t0 = time.monotonic()
        body, blobs = _load_body({"kind": "candidate", "path": w.readable(os.path.abspath(candidate)), "entry": entry},
                                 ev.device, weight_seed, init, poison, CheckId.UNWRITTEN_OUTPUT in ev.enabled,
                                 self.settings, self.out_nbytes, ev.output_arg, ev.extra.pop("weights_state", ()))
        loaded = self.record("import", None, w.request("load", body, blobs))
        ev.candidate_weights = loaded.body.get("parameters")
        self.phases["import"] = time.monotonic() - t0
        ev.reached.add("load")

    def checked_calls(self) -> bool:
        """The warm-up, the fresh sets, determinism, caching's overwrite, the audit the library
        policy decides on, the ordering probe; False where the plan stops here."""
        ev, w, on, phases, fresh = self.ev, self.w, self.ev.enabled, self.phases, self.fresh
        t0 = time.monotonic()
        self.call("warmup", _WARMUP, trace=CheckId.LIBRARY_CALL in on)
        phases["first-call"] = time.monotonic() - t0   # compilation or a compile-cache load, mostly
        self.placed -= _let_go(w, ev, self.values, _WARMUP)
        ev.reached.add("warmup")
        if self.stop_if_failed("the warm-up call"):
            return False
        a = fresh[0]
        self.call("fresh", a, deep_paint=True)
        if _policy_needs_trace(ev):   # the library policy decides on the audit's trace: a library call
            self.audit(a)             # in disguise costs one fresh output's comparisons, not five, nor timing
            if self.stop_if_failed("the kernel audit"):
                phases["checks"] = time.monotonic() - t0
                return False
        if CheckId.DETERMINISM in on:
            w.request("release", {"empty_cache": True})
            self.call("determinism", a, deep_paint=True)
        for k in fresh[1:]:
            self.call("fresh", k, deep_paint=True)
        ev.reached.add("fresh")
        if CheckId.CACHING in on:
            layout, blobs = _encode_set(self.values[_OVERWRITE])
            msg = w.request("overwrite", {"set": a}, blobs)
            ev.overwrite_same_pointers = bool(msg.body.get("same_pointers"))
            self.set_values[a] = _OVERWRITE
            self.call("overwrite", a, deep_paint=True)
            _let_go(w, ev, self.values, _OVERWRITE, worker=False)   # its values live in set A's storages
            ev.reached.add("overwrite")
        if self.stop_if_failed("the checked calls"):
            phases["checks"] = time.monotonic() - t0
            return False
        if ev.device.type == "cuda" and CheckId.STREAMS in on:
            self.clocks_next()
            t1 = time.monotonic()
            self.upload(_PROBE)
            ev.probe = self.ordering_probe(_PROBE)
            self.placed -= _let_go(w, ev, self.values, _PROBE)
            phases["probe"] = time.monotonic() - t1
        phases["checks"] = time.monotonic() - t0
        return True

    def timing(self) -> None:
        """The timing run, the null request that prices it, the unseen pairs, each measured again
        where a clock disagreed."""
        ev, on = self.ev, self.ev.enabled
        t0 = time.monotonic()
        timed_unseen = self.unseen if CheckId.CACHING in on else []
        ev.timing = self.timed_outputs(self.clocked_time(_time_body(self.fresh, self.settings)), ())
        # priced only where the clock judges the timing request, or the pairs it gives a unit to
        pairs = bool(timed_unseen) and null_prices.pair_clocked(ev.extra["problem_size"]["input_bytes"],
                                                                self.out_nbytes)
        if CheckId.TIMERS in on and ev.timing.get("times_ms") and \
                null_prices.timing_priced(len(set(self.fresh)), self.out_nbytes, pairs):
            ev.null_timing = self.null_timing(len(ev.timing["times_ms"]))
            self.measure_requests_again()
        if timed_unseen:
            ev.unseen_pairs, ev.unseen_waits_ms, ev.unseen_controls = self.unseen_pairs(timed_unseen)
            self.measure_unseen_again()
        if CheckId.STREAMS in on:   # on the timing that stands
            self.measure_drain_again()
        ev.reached.add("timing")
        self.phases["timing"] = time.monotonic() - t0

    def measure_requests_again(self) -> None:
        """A timing request whose duration its reported times do not account for is timed again, up to
        twice, before it counts: a busy host stretches the work of one request that the null request
        does not price (a rep's copies, a collection) once; a recorder that shrinks times does so every
        time. A request that agrees replaces the timing; what any run saw wrong in the outputs is kept."""
        ev = self.ev
        tries = 0
        while tries < 2 and requests_disagree(ev.clocked_timing, ev.null_timing, ev.device.type, ev.null_trusted):
            tries += 1
            ev.timing = _faults_kept(self.time_again().body, ev.timing)

    def measure_drain_again(self) -> None:
        """A drain that says "hidden work" is measured again, up to twice, before it counts: another
        process busy on the device for a moment looks like hidden work once, hidden work does every
        time. A re-measurement that finds none replaces the timing, its reported times included, so
        that a candidate hiding work only sometimes is not timed with it; what any run saw wrong in
        the outputs is kept."""
        ev = self.ev
        attempts = []
        while streams.drain_says_hidden(ev.timing) and len(attempts) < 2:
            attempts.append({k: ev.timing.get(k) for k in ("drain_ms", "null_drain_ms", "synced_ms")})
            ev.timing = _faults_kept(self.time_again().body, ev.timing)
        if attempts:
            ev.drain_attempts = attempts

    def measure_unseen_again(self) -> None:
        """Seen/unseen pairs that say "remembers answers" are measured again, up to twice, each time on
        unseen inputs drawn for it: a busy host slows a few single reps once, a kernel that remembers
        is slow on new inputs every time. The last run's pairs are the evidence, the earlier ones kept."""
        ev = self.ev
        attempts = []
        while ((caching.remembers(ev.unseen_pairs, ev.device.type, ev.unseen_controls)
                or pair_clock.remembers(pair_clock.of(ev))) and len(attempts) < len(self.again)):
            new = self.again[len(attempts)]   # unseen inputs drawn for this run
            attempts.append([list(p) for p in ev.unseen_pairs])
            if ev.unseen_controls:
                ev.control_attempts.append([list(p) for p in ev.unseen_controls])
            ev.unseen_pairs, ev.unseen_waits_ms, ev.unseen_controls = self.unseen_pairs(new)
        if attempts:
            ev.unseen_attempts = attempts
        _not_needed(self.values, (k for keys in self.again[len(attempts):] for k in keys))

    def unseen_pairs(self, unseen) -> tuple[list[tuple], list[float | None], list[tuple]]:
        """One request per unseen set, carrying it: the worker times one call on it before any other
        candidate code runs in that request, then one call on a seen set (the pair). A set the worker
        never held cannot have been computed ahead, by a candidate that reads the worker's memory.
        The first rep of a request also pays for the request itself, on any clock: on a host clock
        (an honest CPU conv1d read 0.31 ms there against 0.07 ms on the rep after it, under load),
        and on device events, where the host's first rep after the worker slept outlasts the spin
        a device-bound call gets before each rep (measured in the timing run's warm reps), and a
        host-bound call gets none (on the H200, 0.15 against 0.05 ms for an honest five-op softmax,
        0.29 against 0.08 ms for an eight-op float16 one). So each pair has a control request built
        the same way, carrying a copy of a seen set's own values (`_control_request`), whose two
        reps price that cost (checks/caching.py). Beside each pair, the longest any one of the worker's
        threads waited for a core in its request(s), by the scheduler's account (sched.py): what a
        busy host adds at least to one rep. The reported pair times are the worker's word: each
        request is also bracketed by the judge's clock, and one null pair request (the same request
        without the candidate) prices what the brackets hold besides the two calls (ev.pair_clocks)."""
        ev, fresh = self.ev, self.fresh
        pairs, waits, controls, clocks = [], [], [], []
        # the pairs by the judge's clock need a priced timing request to scale by (checks/pair_clock.py)
        # (by the problem's set size, recorded before the plan: counting a set's values would draw it again)
        clocked = ev.null_timing and null_prices.pair_clocked(ev.extra["problem_size"]["input_bytes"], self.out_nbytes)
        null_s = self._null_pair(fresh[0]) if clocked else None
        for j, k in enumerate(unseen):
            seen = fresh[j % len(fresh)]
            # the control and the unseen request in turn first, so that neither is always the later
            order = ("control", "unseen") if j % 2 == 0 else ("unseen", "control")
            got = {what: self._control_request(seen) if what == "control" else self._pair_request(k, self.values[k], seen)
                   for what in order}
            _let_go(self.w, ev, self.values, k)
            u_pairs, u_wait, u_s = got["unseen"]
            c_pairs, c_wait, c_s = got.get("control", ([], None, None))
            if not (u_pairs and c_pairs):   # no price for its first rep: not judged, kept
                ev.extra.setdefault("uncontrolled_pairs", []).extend(tuple(p) for p in u_pairs)
                continue
            pairs += [tuple(p) for p in u_pairs]
            controls += [tuple(p) for p in c_pairs]
            waits += [u_wait if u_wait is None or c_wait is None else max(u_wait, c_wait)] * len(u_pairs)
            if null_s is not None:
                clocks.append({"unseen_s": u_s, "control_s": c_s, "null_s": null_s})
        held = [k for k in self.controls if k not in self.released]
        if held:   # this run's control copies, together, once its pairs are all timed
            self.w.request("release", {"sets": held})
            self.released.update(held)
        if ev.pair_clocks:
            ev.pair_clock_attempts.append(ev.pair_clocks)
        ev.pair_clocks = clocks
        return pairs, waits, controls

    def _pair_request(self, k, vals, seen, control: bool = False) -> tuple[list, float | None, float]:
        """One timing request carrying set `k` (values `vals`): its rep, then one on seen set `seen`.
        Returns the worker's [seen ms, carried ms] pairs, the longest thread wait in ms, and the
        request's duration by the judge's clock from its send to its reply (spawn.WorkerHandle.clocked),
        less its serving thread's waits for a core, in s."""
        ev = self.ev
        layout, blobs = _encode_set(vals)
        lead_ms = float((ev.timing or {}).get("lead_ms", 0.0))
        msg, clock = self.w.clocked("time", _pair_body(seen, k, layout, lead_ms), blobs, max_blob_bytes=self.max_blob)
        msg = self.record("timing", None, msg)
        wait_s = clock["max_thread_wait_s"]
        net_s = clock["judge_s"] - (clock.get("main_wait_s") or 0.0)
        self.timed_outputs(msg, () if control else (k,))
        # the one output the reply owes (worker/serve.py): its carried set's, computed in the request,
        # unless the worker says the call returned no tensor (output-type's, then)
        sent = [int(s) for s in msg.body.get("first_sets") or ()][:len(msg.tensors)]
        if sent.count(k) != 1 and not int(msg.body.get("non_tensor") or 0):
            ev.unanswered_pairs += 1
        ev.timing = _faults_kept(ev.timing or {}, msg.body)
        if not control:
            ev.unseen_in_place += int(msg.body.get("unseen_in_place") or 0)
        return msg.body.get("unseen_pairs", []), None if wait_s is None else wait_s * 1e3, net_s

    def _control_request(self, seen) -> tuple[list, float | None, float]:
        """A pair request like an unseen one, carrying a copy of the values seen set `seen` holds
        now, under a key of its own (placed, like an unseen set, in `seen`'s storages): a kernel
        that remembers answers by value answers its first rep from memory."""
        key = _CONTROL + len(self.controls)
        self.controls[key] = seen   # its outputs are verified as the seen set's
        got = self._pair_request(key, self._seen_values(seen), seen, control=True)
        if (self.ev.extra.get("holding") or {}).get("lean"):   # as its unseen twin is, by _let_go
            self.w.request("release", {"sets": [key]})
            self.released.add(key)
        return got

    def _null_pair(self, seen) -> float:
        """The judge's price of a pair request without the candidate (null_prices.null_pair, with
        the candidate's lead spin), by the judge's clock less its serving thread's waits, in s."""
        lead_ms = float((self.ev.timing or {}).get("lead_ms", 0.0))
        got = null_prices.null_pair(self.w, seen, self._seen_values(seen), self.max_blob, lead_ms)
        return got["judge_s"] - (got.get("main_wait_s") or 0.0)

    def _seen_values(self, seen) -> list:
        """The values seen set `seen` holds now, for a request that carries a copy of them (drawn
        again for that alone, where the holding draws sets again)."""
        return borrowed(self.values, self.set_values[seen], redraws(self.ev))

    def clocked_time(self, body: dict):
        """A timing request of the candidate, bracketed by the judge's clocks (`timers` bounds the
        reported times by its duration)."""
        w, ev = self.w, self.ev
        before = sched.sample(w.clock_pid)
        msg = self.record("timing", None, w.request("time", body, max_blob_bytes=self.max_blob))
        clocks = sched.between(before, sched.sample(w.clock_pid))
        times = msg.body.get("times_ms") or []
        if times:
            calls = len(times) + len(msg.body.get("synced_ms") or []) + (_REHEARSALS if ev.device.type == "cuda" else 0)
            ev.clocked_timing.append({**clocks, "calls": calls, "reps": calls + len(msg.body.get("null_drain_ms") or []),
                                      "reported_ms": statistics.median(times), "warmup_ms": float(body["warmup_ms"]),
                                      # the spin before each rep (CUDA), at most the worker's LEAD_MAX_S: a claim,
                                      # which only widens the bound
                                      "lead_ms": min(float(msg.body.get("lead_ms") or 0.0), LEAD_MAX_MS),
                                      "warmup_calls": int(body["warmup"]),
                                      # what its reply brings back: the first output on each set it times
                                      "moved_bytes": lending.rooms_for("time", body) * self.out_nbytes})
        return msg

    def null_timing(self, reps: int) -> dict:
        """The same timing request with a null call (null_prices.null_timing), in the candidate's worker."""
        return null_prices.null_timing(self.w, self.fresh, self.settings, reps, self.max_blob,
                                       self.ev.device.type == "cuda")

    def time_again(self, null_reps=None):
        """A re-measurement, when a clock disagreed with another: the seen sets again, on half the budget,
        bracketed by the judge's clocks."""
        settings = self.settings
        body = _time_body(self.fresh, settings, budget_ms=settings.budget_ms / 2, null_reps=null_reps)
        return self.clocked_time(body)

    def audit(self, set_id=None) -> None:
        """One call under the profiler (CUDA) on a set the worker holds (the last fresh one unless
        given), with the binaries the candidate's builds loaded; the judge reads their kernel
        symbols itself (checks/attribution.py)."""
        ev = self.ev
        set_id = self.fresh[-1] if set_id is None else set_id
        t0 = time.monotonic()
        policy = ev.library_policy
        body = {"set": set_id, "sleep_ms": _gate_ms(ev), "own": True,
                "ops": bool(policy and policy.needs_trace and policy.allowed_ops)}
        msg = self.record("audit", set_id, self.w.request(
            "audit", body, max_blob_bytes=self.max_blob + attribution.MAX_BINARY_BYTES))
        ev.audit = {**trace.expand(msg.body), "binaries": msg.body.get("binaries") or []}
        ev.own_kernels = attribution.own_symbols(codec.from_blob(b).numpy().tobytes() for b in msg.tensors)
        ev.reached.add("audit")
        self.phases["audit"] = time.monotonic() - t0

    def ordering_probe(self, set_id) -> dict:
        """Hold the caller's stream in a sleep long enough to outlast the call's host work (retry once
        longer if the call outlasted it), and see whether the output was finished anyway."""
        ev = self.ev
        sleep_ms = _gate_ms(ev)
        body = {}
        for _ in range(2):
            msg = self.record("probe", set_id, self.w.request("probe", {"set": set_id, "sleep_ms": sleep_ms},
                                                              max_blob_bytes=self.max_blob))
            body = msg.body
            if msg.tensors:
                ev.add_call("probe", set_id, set_id, {}, codec.from_blob(msg.tensors[0]))
            if body.get("conclusive") or body.get("why") == "output is not a tensor":
                break
            sleep_ms = min(sleep_ms * 4, 2000.0)
        return dict(body)

    def judge_clock_attempts(self) -> list[dict]:
        """The judge-clocked loop against the reported time; if they disagree, both again (up to twice):
        a busy moment between two measurements must not pass for a forged clock. Each loop runs on an
        input set of its own, which the worker receives inside the loop's request."""
        ev = self.ev
        reported = statistics.median(ev.timing["times_ms"])
        attempts = []
        for i in range(LOOP_ATTEMPTS):
            times = ev.timing["times_ms"]
            if i:
                times = self.time_again(null_reps=0).body["times_ms"]
                reported = statistics.median(times)
            attempt = {**self.judge_clocked_loop(self.fresh[1], reported, (_LOOP + i, self.values[_LOOP + i])),
                       "reported_ms": reported, "times_ms": list(times)}
            _let_go(self.w, ev, self.values, _LOOP + i)
            attempts.append(attempt)
            if loop_settled([judge_clock(a, ev.device.type, trusted=ev.null_trusted) for a in attempts]):
                break
        _not_needed(self.values, (_LOOP + i for i in range(len(attempts), LOOP_ATTEMPTS)))
        return attempts

    def judge_clocked_loop(self, set_id, median, new=None) -> dict:
        """N back-to-back calls that end in a device-wide sync, timed by the judge's clock (which the
        candidate cannot reach), and the same N calls of a null function to price the fixed cost.

        Two judge-side clocks per loop: wall time, and the CPU time the kernel accounted to the worker's
        threads. A busy machine inflates the first, many threads the second; the real work inflates
        both, so the smaller of the two is what the reported time must account for.
        """
        w, settings, max_blob, record = self.w, self.settings, self.max_blob, self.record

        def bracket(body, blobs=()):
            before = sched.sample(w.clock_pid)
            record("loop", body["set"], w.request("loop", body, blobs, max_blob_bytes=max_blob))
            got = sched.between(before, sched.sample(w.clock_pid))
            waits.append((got["wait_s"], got["main_wait_s"]))
            return got["judge_s"], got["cpu_s"]

        waits = []

        # N is sized from the reported time, and at most LOOP_OVERRUN x loop_ms at what a short loop
        # costs by the judge's own clock: a candidate that reports microseconds for milliseconds of
        # work (hidden, forged) must not make the judge run 2000 of its calls, three times over
        # (20 s at 4096^3). An honest candidate's N is what the reported time alone gives.
        # The loop runs on a set never seen before (`new`), which a one-call request carries first (a
        # kernel's first call on new inputs may build a plan or capture a graph); the pilot and the
        # loop time the calls after. A kernel that remembers answers is `caching`'s.
        loop_set, blobs, extra = set_id, (), {}
        if new is not None:
            loop_set, vals = new
            extra["layout"], blobs = _encode_set(vals)
        if new is not None:   # the first call on it, alone: the pilot prices the calls after
            record("loop", loop_set, w.request("loop", {"set": loop_set, "n": 1, **extra}, blobs, max_blob_bytes=max_blob))
        pilot_s, _ = bracket({"set": loop_set, "n": PILOT_CALLS})
        # less the request's own cost (a null pilot): on a busy host a round trip costs milliseconds,
        # and a loop sized by it would be too short for its calls to show above the null loop's noise
        null_pilot_s, _ = bracket({"set": loop_set, "n": PILOT_CALLS, "null": True})
        waits.clear()
        cap = LOOP_OVERRUN * settings.loop_ms / 1e3 / max((pilot_s - null_pilot_s) / PILOT_CALLS, 1e-9)
        n = int(max(5, min(2000, settings.loop_ms / max(median, 1e-3), cap)))
        wall, cpu = bracket({"set": loop_set, "n": n})
        null_wall, null_cpu = bracket({"set": loop_set, "n": n, "null": True})
        msg = record("loop", loop_set, w.request("loop", {"set": loop_set, "n": 0, "fetch": True}, max_blob_bytes=max_blob))
        if msg.tensors:   # the loop's last output, fetched off the clock (a check verifies it)
            self.ev.add_call("loop", loop_set, loop_set, {}, codec.from_blob(msg.tensors[0]))
        return {"n": n, "judge_s": wall, "null_s": null_wall, "cpu_s": cpu, "null_cpu_s": null_cpu,
                "pilot_s": pilot_s, "null_pilot_s": null_pilot_s, "cap": cap, "wait_s": waits[0][0], "null_wait_s": waits[1][0],
                "main_wait_s": waits[0][1], "null_main_wait_s": waits[1][1]}


def _measure_drain_again(w, ev: Evidence, fresh, settings: Settings, max_blob, record) -> None:
    """`Plan.measure_drain_again` for a caller holding the plan's parts, with its own `record`."""
    plan = Plan(w, ev, fresh, settings, max_blob)
    plan.record = record
    plan.measure_drain_again()


# 8 parameters: the plan's parts and two of its steps, as a caller without a plan holds them
def _measure_unseen_again(w, ev: Evidence, fresh, values, max_blob, record, again, timed_outputs) -> None:
    """`Plan.measure_unseen_again` for a caller holding the plan's parts, with its own `record` and
    `timed_outputs`."""
    plan = Plan(w, ev, fresh, None, max_blob, values=values, again=again)
    plan.record, plan.timed_outputs = record, timed_outputs
    plan.measure_unseen_again()


def _gate_ms(ev: Evidence) -> float:
    """How long to hold the caller's stream before a probed or audited call: longer than the call's
    host work, so that anything ordered after the caller's stream visibly waits. Sized from the
    calls after the warm-up (the first one compiles), 10 ms to 500 ms."""
    walls = [c.meta.get("wall_s", 0.0) for c in ev.calls if c.meta and c.phase != "warmup"]
    return min(max(10.0, 4e3 * max(walls, default=0.0)), 500.0)


LEAD_MAX_MS = 2.0       # the worker's _Reps.LEAD_MAX_S, in ms
NULL_TIMING_REPS = null_prices.NULL_TIMING_REPS
_REHEARSALS = null_prices.REHEARSALS
PILOT_CALLS = 10    # the judge-clocked loop's pilot: what a call costs by the judge's clock
LOOP_OVERRUN = 4    # the loop's length, at most this many times loop_ms at the pilot's price
