"""caching's pairs by the judge's clock (checks/pair_clock.py): the arithmetic on synthetic
request durations, where the worker's own pair times say nothing, and the bracket a request's
duration is read by (spawn.WorkerHandle.clocked)."""

import os
import time

import torch

from kernelvet import spawn
from kernelvet.checks import REGISTRY, pair_clock
from kernelvet.evidence import Evidence
from kernelvet.ids import ALL_CHECKS, CheckId
from kernelvet.report import Status

NULL_S = 0.003          # a pair request without the candidate
UNIT_S = 0.001          # a seen call


def _clock(unseen_calls_s, control_calls_s, null_s=NULL_S):
    return {"unseen_s": null_s + unseen_calls_s, "control_s": null_s + control_calls_s, "null_s": NULL_S}


def test_an_honest_pair_leaves_one_call_and_a_memo_leaves_its_miss():
    honest = pair_clock.judged_pairs([_clock(3 * UNIT_S, 3 * UNIT_S)] * 5, UNIT_S, None, 0.0, "cpu")
    assert not pair_clock.remembers(honest)
    assert abs(honest[0]["unseen_ms"] - 1.0) < 1e-9 and abs(honest[0]["first_rep_price_ms"] - 1.0) < 1e-9
    # a miss of 10 calls' time against hits of one: the control (a hit) prices the first rep alone
    memo = pair_clock.judged_pairs([_clock(UNIT_S + 10 * UNIT_S + UNIT_S, 3 * UNIT_S)] * 5, UNIT_S, None, 0.0, "cpu")
    assert pair_clock.remembers(memo) and abs(memo[0]["unseen_ms"] - 10.0) < 1e-9


def test_a_stall_in_the_control_is_priced_only_up_to_its_cap_on_cuda_and_not_on_a_host_clock():
    miss = 30 * UNIT_S
    # the memo stalls its hit in the control's first rep as long as its miss takes: on CUDA the
    # control prices at most CLOCK_PRICE_CAP calls of it; on the CPU, where honest pair requests
    # run many times slower than the timing run, the stall is indistinguishable and it passes
    stalled = [_clock(UNIT_S + miss + UNIT_S, UNIT_S + miss + UNIT_S)] * 5
    cuda = pair_clock.judged_pairs(stalled, UNIT_S, None, 0.0, "cuda")
    cap_ms = pair_clock.CLOCK_PRICE_CAP["cuda"] * UNIT_S * 1e3 + 0.005
    assert all(abs(j["first_rep_price_ms"] - cap_ms) < 1e-9 for j in cuda)
    assert pair_clock.remembers(cuda)
    assert not pair_clock.remembers(pair_clock.judged_pairs(stalled, UNIT_S, None, 0.0, "cpu"))


def test_the_controls_spread_widens_the_bound():
    """A run whose controls (the same request on seen values) varied by 20 calls' time, most of
    them, cannot tell a pair 10 calls slower from noise; a few controls the host slowed widen
    nothing."""
    unseen = _clock(UNIT_S + 10 * UNIT_S + UNIT_S, 3 * UNIT_S)
    quiet = pair_clock.judged_pairs([unseen] * 5, UNIT_S, None, 0.0, "cpu")
    assert pair_clock.remembers(quiet) and quiet[0]["control_spread_ms"] == 0.0
    varied = [{**unseen, "control_s": NULL_S + (3 + d) * UNIT_S} for d in (0, 10, 20, 20, 20)]
    judged = pair_clock.judged_pairs(varied, UNIT_S, None, 0.0, "cpu")
    assert abs(judged[0]["control_spread_ms"] - 40.0) < 1e-9 and not pair_clock.remembers(judged)
    few = [{**unseen, "control_s": NULL_S + (3 + d) * UNIT_S} for d in (0, 0, 0, 20, 30)]
    judged = pair_clock.judged_pairs(few, UNIT_S, None, 0.0, "cpu")
    assert judged[0]["control_spread_ms"] == 0.0 and pair_clock.remembers(judged)


def test_all_pairs_but_one_must_say_so():
    slow, fine = _clock(30 * UNIT_S, 3 * UNIT_S), _clock(3 * UNIT_S, 3 * UNIT_S)
    assert not pair_clock.remembers(pair_clock.judged_pairs([slow, slow, slow, fine, fine], UNIT_S, None, 0.0, "cpu"))
    assert pair_clock.remembers(pair_clock.judged_pairs([slow, slow, slow, slow, fine], UNIT_S, None, 0.0, "cpu"))
    # a run of two pairs spares none
    assert not pair_clock.remembers(pair_clock.judged_pairs([slow, fine], UNIT_S, None, 0.0, "cpu"))
    assert pair_clock.remembers(pair_clock.judged_pairs([slow, slow], UNIT_S, None, 0.0, "cpu"))


def test_a_busy_host_slowing_some_requests_is_not_a_memo_and_does_not_hide_one():
    """The host only adds time. An honest run whose unseen requests the host slowed three times
    in five (and one control) passes; a memo's run with two controls slowed (each pricing a miss
    away from its own pair, were it read alone) still says so: the run's controls price by their
    median."""
    burst = 25 * UNIT_S
    honest = [_clock(3 * UNIT_S + burst, 3 * UNIT_S)] * 3 + [_clock(3 * UNIT_S, 3 * UNIT_S + burst)] + \
        [_clock(3 * UNIT_S, 3 * UNIT_S)]
    assert not pair_clock.remembers(pair_clock.judged_pairs(honest, UNIT_S, None, 0.0, "cpu"))
    memo = [_clock(12 * UNIT_S, 3 * UNIT_S + burst)] * 2 + [_clock(12 * UNIT_S, 3 * UNIT_S)] * 3
    judged = pair_clock.judged_pairs(memo, UNIT_S, None, 0.0, "cpu")
    assert all(abs(j["first_rep_price_ms"] - 1.0) < 1e-9 for j in judged)
    assert sum(j["slower"] for j in judged) == 5 and pair_clock.remembers(judged)


def test_a_slowed_null_pair_is_held_to_the_cheapest_control_and_to_its_trusted_price():
    """A worker that slows its null pair request by the miss's cost would have the judge subtract
    the miss; the price is held to what the cheapest control left (less two calls), and where the
    controls are slowed alike, to NULL_CAP x what the reference's worker paid (on CUDA, where the
    control's own price is capped too)."""
    trusted = {"judge_s": NULL_S, "main_wait_s": 0.0}
    miss = 40 * UNIT_S
    slowed = {"unseen_s": NULL_S + miss + UNIT_S, "control_s": NULL_S + 2 * UNIT_S, "null_s": NULL_S + miss}
    judged = pair_clock.judged_pairs([slowed] * 5, UNIT_S, None, 0.0, "cpu")
    assert pair_clock.remembers(judged) and abs(judged[0]["null_ms"] - NULL_S * 1e3) < 1e-9
    both = {**slowed, "control_s": NULL_S + miss + 2 * UNIT_S}
    assert not pair_clock.remembers(pair_clock.judged_pairs([both] * 5, UNIT_S, None, 0.0, "cuda"))
    held = pair_clock.judged_pairs([both] * 5, UNIT_S, trusted, 0.0, "cuda")
    assert pair_clock.remembers(held) and all(j["null_capped"] for j in held)


def _ev(clocks, **kw):
    ev = Evidence(device=torch.device("cpu"), device_info={}, peaks=None, dtype=torch.float32, shape=(8, 8),
                  flops=None, bytes_moved=None, inputs={}, refs64={}, reference_error=1e-7,
                  poison_words=(0,), enabled=frozenset(ALL_CHECKS), integrity=[("import", {"moved": []})])
    ev.timing = {"times_ms": [UNIT_S * 1e3] * 20, "lead_ms": 0.0}
    ev.clocked_timing = [{"judge_s": 0.06, "cpu_s": None, "wait_s": 0.0, "main_wait_s": 0.0, "calls": 20,
                          "reps": 20, "reported_ms": UNIT_S * 1e3, "warmup_ms": 25.0, "warmup_calls": 3}]
    ev.null_timing = {"judge_s": 0.006 + 64 * 0.05e-3, "main_wait_s": 0.0, "reps": 64, "fixed_s": 0.006,
                      "fixed_main_wait_s": 0.0}
    ev.pair_clocks = clocks
    ev.unseen_pairs = [(UNIT_S * 1e3, UNIT_S * 1e3)] * len(clocks)   # the worker: never slower
    ev.unseen_controls = [(UNIT_S * 1e3, UNIT_S * 1e3)] * len(clocks)
    for k, v in kw.items():
        setattr(ev, k, v)
    return ev


def test_caching_fails_by_the_judges_clock_where_the_worker_says_nothing_is_slower():
    memo = [_clock(UNIT_S + 20 * UNIT_S + UNIT_S, 3 * UNIT_S)] * 5
    f = REGISTRY[CheckId.CACHING](_ev(memo))
    assert f.status is Status.FAIL and f.evidence["by_judge_clock"], f.summary
    assert "judge's clock" in f.summary and "5 of 5 pairs" in f.summary
    honest = [_clock(3 * UNIT_S, 3 * UNIT_S)] * 5
    assert REGISTRY[CheckId.CACHING](_ev(honest)).status is Status.PASS


def test_without_a_priced_timing_request_the_pairs_are_not_judged_by_the_clock():
    """timers waived: no null timing request, no judge's per-call time to scale the pairs by."""
    memo = [_clock(UNIT_S + 20 * UNIT_S + UNIT_S, 3 * UNIT_S)] * 5
    ev = _ev(memo, null_timing=None)
    assert pair_clock.of(ev) == []
    assert REGISTRY[CheckId.CACHING](ev).status is Status.PASS


def test_a_pair_request_is_judged_by_the_clock_only_while_what_it_moves_stays_small():
    """The bytes a pair request moves are its carried set and the one output its reply sends
    back: a 1 GiB set whose call writes 2 GiB (level 1 problem 55) moves 3 GiB, whose copies
    vary by more than a call costs; a small set with a small output is judged."""
    from kernelvet.checks.timers import CLOCKED_MAX_BYTES
    from kernelvet.judge import null_prices
    mib = 1 << 20
    small = [torch.empty(64, mib // 4)]            # 64 MiB carried
    assert null_prices.pair_clocked(small, 64 * mib)
    assert null_prices.pair_clocked(small, CLOCKED_MAX_BYTES - 64 * mib)
    assert not null_prices.pair_clocked(small, CLOCKED_MAX_BYTES - 64 * mib + 1)
    big_set = [torch.empty(1).expand(CLOCKED_MAX_BYTES // 4)]   # 1 GiB as its bytes count, unallocated
    assert null_prices.pair_clocked(big_set, 0)
    assert not null_prices.pair_clocked(big_set, 2048 * mib)


def test_a_clocked_request_leaves_the_judges_own_work_before_it_outside_its_bracket(monkeypatch):
    """The judge's clock over a pair request runs from its send to its reply: what the judge does
    before it sends (a loan's buffer filled with the set the request carries, here 0.3 s of a
    stand-in) is not the worker's. Bracketed from before that work, a 128 MiB set's fill read
    1.4-1.9 ms of a 4096^3 GEMM's null pair request on an H100, widening each pair's bound."""
    launcher = spawn.Launcher()
    w = spawn.WorkerHandle(launcher, time.monotonic() + 60, device="cpu")
    try:
        w.hello()
        monkeypatch.setattr(w, "_loan", lambda *a: time.sleep(0.3))   # no loan, after 0.3 s
        t0 = time.monotonic()
        msg, clock = w.clocked("release", {"sets": []})
        took = time.monotonic() - t0
        assert msg.type == "ok"
        assert took >= 0.3 and clock["judge_s"] < took - 0.25, (took, clock)
    finally:
        w.close()
        w.cleanup()
        launcher.close()


class _NullWorker:
    """Answers the null requests of null_prices.trusted; records their types and bodies."""
    clock_pid = os.getpid()   # the judge's clocks read a process's schedstat: this one's

    def __init__(self):
        self.asked = []

    def request(self, kind, body=None, blobs=(), max_blob_bytes=None):
        self.asked.append((kind, body or {}))

    def clocked(self, kind, body, blobs=(), max_blob_bytes=None):
        self.request(kind, body)
        return None, {"judge_s": 0.01, "main_wait_s": 0.0}


def _asked_for(out_nbytes, set_bytes):
    from kernelvet.judge import Settings, null_prices
    w = _NullWorker()
    prices = null_prices.trusted(w, [1, 2, 3], Settings(), 1 << 40, True, reps=20,
                                 seen_values=lambda: [torch.empty(1)], out_nbytes=out_nbytes, seen_bytes=set_bytes)
    timing = [b for kind, b in w.asked if kind == "time" and b.get("null") and "layout" not in b]
    return sorted(prices), timing


def test_a_null_timing_request_is_made_only_where_the_clock_judges_what_it_prices():
    """A timing request on three sets sends back the first output on each: over 1 GiB, the clock
    does not judge it, and where the pair requests are too big to be clocked as well, a null
    timing request (and its three outputs of the call's shape) would price nothing."""
    from kernelvet.judge import null_prices
    mib = 1 << 20
    assert null_prices.timing_priced(3, 300 * mib, pairs_clocked=False)        # 900 MiB back: judged
    assert not null_prices.timing_priced(3, 400 * mib, pairs_clocked=False)    # 1.2 GiB back
    assert null_prices.timing_priced(3, 400 * mib, pairs_clocked=True)         # the pairs' unit needs it
    small = _asked_for(64 * mib, 64 * mib)
    assert small[0] == ["loops", "pair", "timing"] and len(small[1]) == 1
    assert _asked_for(400 * mib, 500 * mib)[0] == ["loops", "pair", "timing"]   # pairs 900 MiB: clocked
    assert _asked_for(400 * mib, 800 * mib) == (["loops"], [])    # 1.2 GiB either way
    assert _asked_for(6 << 30, 6 << 30) == (["loops"], [])        # a 6 GiB ReLU
