"""Each check's decision on synthetic evidence, with the numbers measured on an H200
(shared/CALIBRATION.md). Fast, no worker: the corpus tests run the real thing."""

import math
import os

import pytest
import torch

from kernelvet import judge, sched
from kernelvet.checks import REGISTRY, evaluate_all
from kernelvet.evidence import CallRecord, Evidence
from kernelvet.ids import ALL_CHECKS, CheckId
from kernelvet.report import Finding, Status, Verdict, verdict_of


def _ev(device="cuda", **kw):
    g = torch.Generator().manual_seed(1)
    inputs = {k: [torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)] for k in (1, 2, 3)}
    refs = {k: (v[0].double() @ v[1].double()) for k, v in inputs.items()}
    ev = Evidence(device=torch.device(device, 0) if device == "cuda" else torch.device("cpu"), device_info={},
                  peaks=None, dtype=torch.float32, shape=(8, 8), flops=None, bytes_moved=None, inputs=inputs,
                  refs64=refs, reference_error=1e-7, poison_words=(0x7FC01234,), enabled=frozenset(ALL_CHECKS))
    for k, v in kw.items():
        setattr(ev, k, v)
    return ev


def _timing(events_us, drain_us, null_us=11.0, n=50):
    return {"times_ms": [events_us / 1e3] * n, "drain_ms": [drain_us / 1e3] * n,
            "null_drain_ms": [null_us / 1e3] * 20, "mismatches": 0}


# (events, drain) medians per rep from the H200 calibration table, microseconds.
CALIBRATED = {
    "torch.mm 256": (10.8, 10.4, Status.PASS),
    "Triton GEMM 256": (12.2, 12.0, Status.PASS),
    "synced side stream 256": (23.9, 15.8, Status.PASS),
    "hidden stream 256": (1.3, 31.4, Status.FAIL),
    "Triton GEMM 1024": (60.5, 12.1, Status.PASS),
    "hidden stream 1024": (1.3, 128.7, Status.FAIL),
    "Triton GEMM 4096": (3209, 44, Status.PASS),
    "synced side stream 4096": (3249, 39, Status.PASS),
    "hidden stream 4096": (101, 3303, Status.FAIL),
}


@pytest.mark.parametrize("case", sorted(CALIBRATED))
def test_streams_on_calibrated_h200_numbers(case):
    events, drain, want = CALIBRATED[case]
    f = REGISTRY[CheckId.STREAMS](_ev(timing=_timing(events, drain)))
    assert f.status is want, (case, f.summary)


def test_streams_skips_on_cpu_with_reason():
    f = REGISTRY[CheckId.STREAMS](_ev("cpu"))
    assert f.status is Status.SKIP and "CPU" in f.summary


@pytest.mark.parametrize("reported_ms, judge_per_call_ms, want", [
    (0.0134, 0.027, Status.PASS),     # honest launch-bound Triton GEMM, back-to-back host pace
    (3.2, 3.3, Status.PASS),          # honest 4096^3
    (0.001, 3.2, Status.FAIL),        # "0.001 ms" for a call that takes milliseconds
    (0.064, 3.2, Status.FAIL),        # a 50x forged report
    (0.8, 3.2, Status.PASS),          # 4x: honest multi-threaded BLAS, back to back on a busy machine
    (0.0025, 0.110, Status.PASS),     # honest tiny Triton kernel, back to back at a slow host's launch pace
    (0.00186, 0.0858, Status.PASS),   # hidden-stream GEMM at 256^3 (H200, s7): the judge sees launch cost only
    (0.001, 0.2, Status.FAIL),        # "0.001 ms" for 0.2 ms of work: beyond any launch cost
])
def test_timers_judge_clock(reported_ms, judge_per_call_ms, want):
    n = 100
    ev = _ev(timing={"times_ms": [reported_ms] * 20}, integrity=[("import", {"moved": [], "changed": {}})],
             loop=[{"n": n, "judge_s": 0.01 + n * judge_per_call_ms / 1e3, "null_s": 0.01,
                    "reported_ms": reported_ms}])
    assert REGISTRY[CheckId.TIMERS](ev).status is want


def test_timers_busy_machine_inflates_wall_but_not_cpu_time():
    attempt = {"n": 10, "judge_s": 10 * 0.200, "null_s": 0.0, "cpu_s": 10 * 0.016, "null_cpu_s": 0.0,
               "reported_ms": 16.0}
    ev = _ev("cpu", integrity=[("import", {"moved": []})], loop=[attempt])
    assert REGISTRY[CheckId.TIMERS](ev).status is Status.PASS


def test_timers_one_agreeing_attempt_of_three_is_enough_and_a_forger_fails_all():
    noisy = {"n": 10, "judge_s": 2.0, "null_s": 0.0, "reported_ms": 16.0}
    calm = {"n": 10, "judge_s": 0.17, "null_s": 0.0, "reported_ms": 16.0}
    forged = {"n": 10, "judge_s": 0.17, "null_s": 0.0, "reported_ms": 0.05}
    assert REGISTRY[CheckId.TIMERS](_ev("cpu", integrity=[("i", {})], loop=[noisy, calm])).status is Status.PASS
    assert REGISTRY[CheckId.TIMERS](_ev("cpu", integrity=[("i", {})], loop=[forged] * 3)).status is Status.FAIL


# Trusted null prices (taken while the worker held only the reference): loops of 10 and 2000
# null calls at 2 ms + 1 us per call; a timing request's round trip 1 ms, 64 null reps at 0.1 ms.
TRUSTED = {"loops": [{"n": 10, "judge_s": 0.00201, "cpu_s": 0.002}, {"n": 2000, "judge_s": 0.004, "cpu_s": 0.004}],
           "timing": {"judge_s": 0.001 + 64 * 1e-4, "fixed_s": 0.001, "reps": 64}}


def test_timers_a_null_loop_slowed_past_its_trusted_price_does_not_hide_the_calls():
    """A forger reports 1/300 of its 30 ms calls and sleeps through the null loop for the rest."""
    n, reported, true = 100, 0.1, 30.0
    slowed = {"n": n, "judge_s": n * true / 1e3, "null_s": n * (true - reported) / 1e3, "reported_ms": reported}
    ev = _ev("cpu", integrity=[("i", {})], loop=[slowed] * 3)
    assert REGISTRY[CheckId.TIMERS](ev).status is Status.PASS   # without the trusted price, it passes
    ev.null_trusted = TRUSTED
    f = REGISTRY[CheckId.TIMERS](ev)
    assert f.status is Status.FAIL and all(a["null_capped"] for a in f.evidence["attempts"]), f.evidence


def test_timers_an_honest_null_loop_within_its_trusted_price_is_not_capped():
    n = 100
    honest = {"n": n, "judge_s": 0.003 + n * 0.03, "null_s": 0.003, "reported_ms": 30.0}
    ev = _ev("cpu", integrity=[("i", {})], loop=[honest])
    ev.null_trusted = TRUSTED
    f = REGISTRY[CheckId.TIMERS](ev)
    assert f.status is Status.PASS and not f.evidence["attempts"][0]["null_capped"]


def _request(reported_ms, calls, judge_s, wait_s=0.0):
    return {"reported_ms": reported_ms, "calls": calls, "reps": calls, "judge_s": judge_s, "warmup_ms": 0.0,
            "warmup_calls": 0, "main_wait_s": 0.0, "wait_s": wait_s}


def test_timers_a_null_timing_request_slowed_past_its_trusted_price_fails_the_request_on_a_quiet_host():
    """Reps of 30 ms reported as 0.1 ms; the null request slept 30 ms a rep to account for them."""
    from kernelvet.checks.timers import request_clock
    null = {"judge_s": 0.001 + 20 * 0.030, "fixed_s": 0.001, "reps": 20, "wait_s": 0.0}
    req = _request(0.1, 20, 20 * 0.0301)
    assert request_clock(req, null, "cpu")["says"] == "agrees"          # the slowed null hides the work
    got = request_clock(req, null, "cpu", TRUSTED)
    assert got["null_capped"] and got["says"] == "disagrees", got
    busy = {**null, "wait_s": 0.5 * null["judge_s"]}                    # its threads waited: inconclusive
    assert request_clock(req, busy, "cpu", TRUSTED)["says"] == "busy"


def test_timers_rebinding_names_the_clock_and_phase():
    ev = _ev(integrity=[("import", {"moved": []}), ("fresh", {"moved": ["time.perf_counter"]})])
    f = REGISTRY[CheckId.TIMERS](ev)
    assert f.status is Status.FAIL and "time.perf_counter" in f.summary and f.evidence["phase"] == "fresh"


def _fresh(ev, outputs):
    ev.calls = [CallRecord("fresh", k, k, {"exact_tensor": True, "device": "cpu"}, out)
                for k, out in outputs.items()]
    return ev


def test_identity_copy_of_an_input_fails_and_true_answer_passes():
    ev = _ev("cpu")
    assert REGISTRY[CheckId.IDENTITY](_fresh(ev, {k: ev.inputs[k][0].clone() for k in (1, 2, 3)})).status \
        is Status.FAIL
    assert REGISTRY[CheckId.IDENTITY](_fresh(ev, {k: ev.refs64[k].float() for k in (1, 2, 3)})).status \
        is Status.PASS


def test_identity_constant_output_ignores_its_input():
    ev = _ev("cpu")
    const = torch.full((8, 8), 0.125)
    f = REGISTRY[CheckId.IDENTITY](_fresh(ev, {k: const for k in (1, 2, 3)}))
    assert f.status is Status.FAIL and "ignores its input" in f.summary


def test_identity_cannot_tell_answers_closer_than_precision_allows_and_says_so():
    # KernelBench's level 2 problem 36 at its own sizes: GELU of sums far below zero, plus a bias,
    # is the bias whatever the input; true answers differ by 1e-11 of their norm, float32 rounds
    # them to one output, and the reference implementation itself returns a constant
    ev = _ev("cpu")
    bias = torch.full((8, 8), 0.7, dtype=torch.float64)
    ev.refs64 = {k: bias + 1e-11 * v[0].double() for k, v in ev.inputs.items()}
    honest = {k: ev.refs64[k].float() for k in (1, 2, 3)}
    assert len({float(o.sum()) for o in honest.values()}) == 1   # one float32 output for all three
    f = REGISTRY[CheckId.IDENTITY](_fresh(ev, honest))
    assert f.status is Status.SKIP and "inconclusive" in f.summary and f.evidence["untold"] == 3, f.summary
    # a copy of an input is still a copy, however close the answer lies (practice's copy_input)
    # where the answers are told apart, the same constant still ignores its input
    ev.refs64 = {k: bias + 1e-2 * v[0].double() for k, v in ev.inputs.items()}
    f = REGISTRY[CheckId.IDENTITY](_fresh(ev, honest))
    assert f.status is Status.FAIL and "ignores its input" in f.summary


def test_identity_needs_three_independent_sets():
    ev = _ev("cpu")
    f = REGISTRY[CheckId.IDENTITY](_fresh(ev, {1: ev.refs64[1].float(), 2: ev.refs64[2].float()}))
    assert f.status is Status.SKIP


def test_caching_unseen_much_slower_than_seen_fails():
    ev = _ev("cuda", timing={"times_ms": [0.010] * 30, "mismatches": 0}, unseen_pairs=[(0.010, 0.060)] * 5)
    assert REGISTRY[CheckId.CACHING](ev).status is Status.FAIL
    ev = _ev("cuda", timing={"times_ms": [0.010] * 30, "mismatches": 0}, unseen_pairs=[(0.010, 0.012)] * 5)
    assert REGISTRY[CheckId.CACHING](ev).status is Status.PASS


def test_caching_compares_rep_for_rep_so_drift_does_not_look_like_memory():
    """A device whose clock ramps up during the run makes early reps slow, seen and unseen alike."""
    pairs = [(0.060, 0.062), (0.030, 0.031), (0.012, 0.013), (0.011, 0.011), (0.011, 0.012)]
    ev = _ev("cuda", timing={"times_ms": [0.011] * 100, "mismatches": 0}, unseen_pairs=pairs)
    assert REGISTRY[CheckId.CACHING](ev).status is Status.PASS


def test_waived_check_is_recorded_not_silenced():
    ev = _ev("cpu", integrity=[("import", {"moved": ["time.perf_counter"], "changed": {}})])
    findings = {f.check: f for f in evaluate_all(ev, waived=frozenset({CheckId.TIMERS}))}
    f = findings[CheckId.TIMERS]
    assert f.status is Status.WAIVED and f.evidence["would_be"] == "fail" and "--allow timers" in f.summary


def test_every_check_has_exactly_one_evaluator():
    assert set(REGISTRY) == set(ALL_CHECKS)


def test_a_crashing_check_is_an_error_not_a_pass(monkeypatch):
    monkeypatch.setitem(REGISTRY, CheckId.PRECISION, lambda ev: 1 / 0)
    findings = evaluate_all(_ev("cpu"))
    f = {f.check: f for f in findings}[CheckId.PRECISION]
    assert f.status is Status.ERROR
    # no verdict where a check could not decide; a failed check still rejects
    assert verdict_of(findings) is Verdict.ERROR and Verdict.ERROR.exit_code == 3
    failed = Finding(CheckId.TIMERS, Status.FAIL, "forged")
    assert verdict_of([*findings, failed]) is Verdict.REJECT
    assert verdict_of([Finding(CheckId.TIMERS, Status.PASS, "ok")]) is Verdict.PASS


def test_an_early_stop_relabels_only_the_checks_it_left_without_evidence():
    from kernelvet.judge import _mark_not_run
    ev = _ev("cpu")
    ev.extra.update(stopped_after="library-call", stopped_at="the source scan")
    out = {f.check: f for f in _mark_not_run(evaluate_all(ev), ev)}
    assert out[CheckId.STREAMS].summary.startswith("no streams on the CPU")      # meaningless here, not cut short
    assert "stopped early, after library-call had rejected the candidate at the source scan" in \
        out[CheckId.CACHING].summary


class _Timed:
    def __init__(self, body, tensors=()):
        self.type, self.body, self.tensors = "timed", body, list(tensors)


class _TimingWorker:
    """Answers `time` requests with the bodies it was given, in order; counts what it was asked."""

    pid = clock_pid = os.getpid()   # the judge's clocks read a process's schedstat: this one's

    def __init__(self, *bodies):
        self.bodies, self.asked = list(bodies), []

    def request(self, kind, body, blobs=(), max_blob_bytes=None):
        self.asked.append((kind, body))
        if kind == "time" and "layout" in body:   # a pair request: its carried set's output (a stand-in)
            return _Timed({**self.bodies.pop(0), "first_sets": body["unseen"]}, [None])
        return _Timed(self.bodies.pop(0)) if kind == "time" else None

    def clocked(self, kind, body, blobs=(), max_blob_bytes=None):
        before = sched.sample(self.clock_pid)
        msg = self.request(kind, body, blobs, max_blob_bytes)
        return msg, sched.between(before, sched.sample(self.clock_pid))


def _retry(ev, worker):
    from kernelvet.judge import Settings, _measure_drain_again
    _measure_drain_again(worker, ev, [1, 2, 3], Settings(), 1 << 20, lambda phase, s, msg: msg)


def test_a_drain_that_says_hidden_once_is_measured_again_and_the_clean_run_is_reported():
    busy = {**_timing(12.2, 30.0), "mismatches": 2}          # a moment of someone else's work
    clean = _timing(12.4, 12.0)
    ev = _ev(timing=busy)
    w = _TimingWorker(clean)
    _retry(ev, w)
    assert len(w.asked) == 1 and w.asked[0][0] == "time"
    assert ev.timing["times_ms"] == clean["times_ms"] and ev.timing["mismatches"] == 2   # what was wrong stays
    f = REGISTRY[CheckId.STREAMS](ev)
    assert f.status is Status.PASS and len(f.evidence["earlier_attempts"]) == 1


def test_hidden_work_every_time_fails_after_three_measurements():
    ev = _ev(timing=_timing(1.3, 31.4))
    w = _TimingWorker(_timing(1.3, 30.9), _timing(1.3, 32.0))
    _retry(ev, w)
    f = REGISTRY[CheckId.STREAMS](ev)
    assert len(w.asked) == 2 and f.status is Status.FAIL and "3 measurements" in f.summary


def test_a_clean_drain_is_not_measured_again():
    ev = _ev(timing=_timing(12.2, 12.0))
    w = _TimingWorker()
    _retry(ev, w)
    assert w.asked == [] and ev.drain_attempts == []


def test_every_peak_table_entry_is_reachable_and_a_part_without_one_is_named():
    """The first substring match wins: no key may be shadowed by an earlier, shorter one."""
    from kernelvet import devices
    keys = [k for k, _ in devices._TABLE]
    for i, key in enumerate(keys):
        assert devices.peaks({"type": "cuda", "name": f"NVIDIA {key}"}) == devices._TABLE[i][1], key
    assert devices.peaks({"type": "cuda", "name": "Some Future GPU"}) is None


def test_evidence_is_freed_without_the_cycle_collector():
    """The checks memoise on the evidence (bound methods included): nothing of that may refer back
    to it, or every output and reference it holds (device memory, on a CUDA run) would outlive the
    vet until Python's cycle collector happened to run."""
    import gc
    import weakref
    ev = _ev(device="cpu")
    for k in (1, 2, 3):
        ev.add_call("fresh", k, k, {}, ev.refs64[k].float())
    evaluate_all(ev, set())
    assert ev._memo   # the checks did memoise
    gone = weakref.ref(ev)
    gc.disable()
    try:
        del ev
        assert gone() is None
    finally:
        gc.enable()


def _unseen_again(ev, worker):
    values = {k: [torch.ones(4)] for k in (1, 2, 3, 3001, 3002)}
    judge._measure_unseen_again(worker, ev, [1, 2, 3], values, 1 << 20, lambda _p, _s, msg: msg,
                                [[3001], [3002]], lambda msg, keys: None)
    return REGISTRY[CheckId.CACHING](ev)


def _pairs(pairs, mismatches=0):
    return {"times_ms": [0.010] * 20, "unseen_pairs": pairs, "mismatches": mismatches, "first_sets": []}


MEMO, HONEST = [(0.010, 0.060)] * 5, [(0.010, 0.011)] * 5


def test_caching_pairs_that_say_remembers_once_are_measured_again_on_new_inputs():
    """A busy host slowing the unseen reps of one run is not memory: the next run says so. Each
    unseen set travels inside the one timing request that uses it (never uploaded ahead)."""
    ev = _ev("cpu", timing={"times_ms": [0.010] * 30, "mismatches": 2}, unseen_pairs=[(0.1, 0.5)] * 5)
    worker = _TimingWorker(_pairs(HONEST), _pairs(HONEST))
    f = _unseen_again(ev, worker)
    assert f.status is Status.PASS and f.evidence["earlier_attempts"] == [[[0.1, 0.5]] * 5]
    # on a host clock, a control request first: a copy of seen set 1's values, under a key of its own
    assert [t for t, _ in worker.asked] == ["time", "time", "release"]
    (_, control), (_, unseen), (_, release) = worker.asked
    assert release["sets"] == control["unseen"]   # the run's control copies, once its pairs are timed
    assert control["unseen"] == [judge.settings._CONTROL] and control["sets"] == [1]
    assert unseen["unseen"] == [3001] and unseen["sets"] == [1]
    assert unseen["layout"] == control["layout"] == [{"t": 0}]   # each set itself, in its request
    assert ev.timing["times_ms"] == [0.010] * 30 and ev.timing["mismatches"] == 2   # the timing stands, faults kept


def test_on_a_host_clock_the_unseen_rep_is_paired_with_a_control_requests_first_rep():
    """The first rep of any request pays for the request (0.4 ms more here than the rep after it):
    an honest kernel is as slow on the control's seen values as on new ones, and passes, judged net
    of that price; a memo answers the control's first rep from memory, and is slow on new values
    every time."""
    first_slow = {"times_ms": [0.1], "unseen_pairs": [[0.1, 0.5]], "mismatches": 0, "first_sets": []}
    memo_hit = {**first_slow, "unseen_pairs": [[0.1, 0.1]]}
    memo_miss = {**first_slow, "unseen_pairs": [[0.1, 0.6]]}
    ev = _ev("cpu", timing={"times_ms": [0.1] * 30, "mismatches": 0}, unseen_pairs=[(0.1, 0.5)])
    f = _unseen_again(ev, _TimingWorker(first_slow, first_slow))
    assert f.status is Status.PASS and ev.unseen_pairs == ev.unseen_controls == [(0.1, 0.5)], f
    assert f.evidence["net_pairs"] == [[0.1, pytest.approx(0.1)]] and f.evidence["controls"] == [[0.1, 0.5]]
    ev = _ev("cpu", timing={"times_ms": [0.1] * 30, "mismatches": 0}, unseen_pairs=[(0.1, 0.6)],
             unseen_controls=[(0.1, 0.1)])
    f = _unseen_again(ev, _TimingWorker(memo_hit, memo_miss, memo_hit, memo_miss))
    assert f.status is Status.FAIL and ev.unseen_pairs == [(0.1, 0.6)] and "in each of 3 runs" in f.summary
    assert "net of a request's own cost" in f.summary and len(f.evidence["earlier_controls"]) == 2


@pytest.mark.parametrize("host_bound", [False, True])
def test_on_device_events_the_unseen_rep_is_paired_with_a_control_requests_first_rep(host_bound):
    """The first rep of a request pays for the request on device events too: its cold host outlasts
    a device-bound call's spin, and a host-bound call has none (on the H200, 0.15 against 0.05 ms
    for an honest five-op softmax, 0.29 against 0.08 ms for an eight-op float16 one). Judged net of
    a control's price it passes; a memo still answers the control's first rep from memory."""
    first_slow = {"times_ms": [0.05], "unseen_pairs": [[0.05, 0.15]], "mismatches": 0, "first_sets": []}
    timing = {"times_ms": [0.05] * 30, "mismatches": 0, "host_bound": host_bound}
    ev = _ev("cuda", timing=dict(timing), unseen_pairs=[(0.05, 0.15)])
    worker = _TimingWorker(first_slow, first_slow)
    f = _unseen_again(ev, worker)
    assert f.status is Status.PASS and ev.unseen_controls == [(0.05, 0.15)], f
    assert [b["unseen"] for t, b in worker.asked if t == "time"] == [[judge.settings._CONTROL], [3001]]
    memo_hit = {**first_slow, "unseen_pairs": [[0.05, 0.05]]}
    ev = _ev("cuda", timing=dict(timing), unseen_pairs=[(0.05, 0.15)], unseen_controls=[(0.05, 0.05)])
    f = _unseen_again(ev, _TimingWorker(memo_hit, first_slow, memo_hit, first_slow))
    assert f.status is Status.FAIL and "in each of 3 runs" in f.summary and "net of" in f.summary


def test_a_kernel_that_computes_ahead_what_a_request_brings_pays_for_it_in_both():
    """A read-ahead that computes every set it finds on arrival pays one product in the control
    request (for the copy of seen values, at storages it has not seen), two in the unseen one: net
    of the control's price, the unseen rep is still a product against a lookup."""
    from kernelvet.checks import caching
    pairs, controls = [(0.15, 58.9)] * 5, [(0.15, 29.1)] * 5
    assert caching.remembers(pairs, "cpu", controls)
    honest = [(0.07, 0.31)] * 5, [(0.07, 0.30)] * 5   # the request's own cost, in both
    assert caching.remembers(honest[0], "cpu") and not caching.remembers(honest[0], "cpu", honest[1])


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_control_price_is_capped_so_a_stall_on_a_requests_first_rep_prices_no_miss_away(device):
    """A memo that sleeps on the first rep of a request as long as a miss takes makes its controls
    as slow as its unseen reps (stalled_cache); the price is held to a few seen reps, and the memo
    is slow on new inputs again. An honest call's own price (2.5x its seen rep) stands."""
    from kernelvet.checks import caching
    stalled = [(0.01, 2.0)] * 5
    assert caching.remembers(stalled, device, [(0.01, 1.99)] * 5)
    assert caching.control_price(0.01, (0.01, 1.99), device) == pytest.approx(
        caching.CONTROL_PRICE_CAP * 0.01 + caching.UNSEEN_FLOOR_MS[device])
    honest = [(0.08, 0.29)] * 5, [(0.08, 0.29)] * 5
    assert caching.remembers(honest[0], device) and not caching.remembers(honest[0], device, honest[1])
    ev = _ev(device, timing={"times_ms": [0.01] * 30, "mismatches": 0}, unseen_pairs=stalled,
             unseen_controls=[(0.01, 1.99)] * 5)
    f = REGISTRY[CheckId.CACHING](ev)
    assert f.status is Status.FAIL and f.evidence["controls_capped"] == 5, f


def test_a_preempted_seen_rep_does_not_hide_a_memo_on_a_host_clock():
    """One seen rep slowed by another process (16 ms) among pairs of a kernel that computes only on
    new inputs: the seen reps are read by their median, and the pairs still say it remembers."""
    from kernelvet.checks import caching
    pairs = [(0.05, 6.0), (0.05, 6.2), (16.0, 6.1), (0.06, 5.9), (0.05, 6.0)]
    assert caching.remembers(pairs, "cpu") and caching.remembers(pairs, "cuda")
    honest = [(0.06, 0.11), (0.06, 14.0), (0.06, 0.12), (12.0, 0.11), (0.06, 8.0)]   # a busy host's
    assert not caching.remembers(honest, "cpu")


def test_a_busy_host_slowing_three_unseen_reps_of_five_is_not_memory():
    """A 2-core host under bursts of load slowed 3 of an honest ReLU's 5 unseen reps (2.4 ms) to
    8-18 ms and none of its controls: not a memo, whose every unseen rep is slow. Two controls
    slowed do not hide a memo either: the run's controls price by their median."""
    from kernelvet.checks import caching
    honest = [(2.4, 18.5), (2.5, 12.7), (2.5, 8.8), (2.5, 2.5), (2.5, 2.6)]
    controls = [(2.5, 2.6)] * 5
    assert caching.slow_pairs(caching.net_pairs(honest, controls, "cpu"), "cpu") == 3
    assert not caching.remembers(honest, "cpu", controls)
    memo = [(2.4, 20.0)] * 5
    assert caching.remembers(memo, "cpu", [(2.4, 14.0), (2.4, 13.0), (2.4, 2.5), (2.4, 2.6), (2.4, 2.4)])


def test_a_workers_wait_for_a_core_is_evidence_of_a_busy_host_never_an_excuse():
    """A cheat computing on new inputs under load waits for a core as long as an honest kernel
    stalled by the load: the pairs decide, the waits are kept beside them."""
    slow = [(0.07, 14.0)] * 5
    f = REGISTRY[CheckId.CACHING](_ev("cpu", timing={"times_ms": [0.07] * 30, "mismatches": 0}, unseen_pairs=slow,
                                      unseen_waits_ms=[15.0] * 5))
    assert f.status is Status.FAIL and f.evidence["waits_ms"] == [15.0] * 5


def test_the_pool_is_woken_before_each_rep_of_a_pair_on_the_cpu():
    """The unseen rep is the first of its request, after the worker slept: both reps of a pair
    start with the intra-op pool awake, from one parallel op of the harness's own."""
    from kernelvet.worker import _Bound
    from kernelvet.worker.reps import _Reps

    class _W:
        device, bound, flush_buf, output_arg, fn, poison, reused_storage = \
            torch.device("cpu"), _Bound(), None, None, None, {}, False
        sets = {0: [torch.ones(4)]}
        pool_wake = torch.zeros(1 << 17)

        def _paint_for_call(self, s, deep=False):
            pass

    w = _W()
    rec = _Reps(w)
    rec._before_call(0)
    assert not w.pool_wake.any()   # the timing run's reps: untouched
    rec.wake_pool = True
    rec._before_call(0)
    rec._before_call(0)
    assert bool((w.pool_wake == 2).all())


def test_a_pair_request_keeps_a_copy_of_its_carried_sets_output_alone():
    """Its seen set is timed once and its output not sent back: no copy of it is made (a big
    problem's output is gigabytes of the device), while the carried set's is kept to be sent."""
    from kernelvet.worker import _Bound
    from kernelvet.worker.reps import _Reps

    class _W:
        device, bound, reused_storage = torch.device("cpu"), _Bound(), False

    rec = _Reps(_W())
    rec.kept = {7}
    out = torch.ones(4)
    rec._verify(3, out)
    rec._verify(7, out)
    assert list(rec.first) == [7] and rec.first[7] is not out and torch.equal(rec.first[7], out)
    rec.kept = None   # a timing run: every set's first output kept
    rec._verify(3, out)
    assert sorted(rec.first) == [3, 7]


def test_each_unseen_pair_carries_the_wait_of_its_own_request():
    ev = _ev("cuda", timing={"times_ms": [0.010] * 30, "mismatches": 0}, unseen_pairs=MEMO)
    _unseen_again(ev, _TimingWorker(_pairs(HONEST), _pairs(HONEST)))   # the control, then the unseen set
    assert len(ev.unseen_waits_ms) == len(ev.unseen_pairs) == 5
    assert all(w is not None and w >= 0.0 for w in ev.unseen_waits_ms)


def test_caching_fails_only_when_every_run_says_remembers():
    ev = _ev("cuda", timing={"times_ms": [0.010] * 30, "mismatches": 0}, unseen_pairs=MEMO)
    # each run: a control (answered from memory, as fast as a seen rep), then the unseen set
    f = _unseen_again(ev, _TimingWorker(_pairs(HONEST), _pairs(MEMO), _pairs(HONEST), _pairs(MEMO)))
    assert f.status is Status.FAIL and "in each of 3 runs" in f.summary
    assert len(f.evidence["earlier_attempts"]) == judge.UNSEEN_AGAIN


def test_an_unseen_pair_whose_control_timed_nothing_is_kept_unjudged():
    ev = _ev("cpu", timing={"times_ms": [0.010] * 30}, unseen_pairs=[(0.1, 0.5)] * 5)
    worker = _TimingWorker(_pairs([]), _pairs(HONEST[:1]))
    _unseen_again(ev, worker)
    assert ev.extra["uncontrolled_pairs"] == [HONEST[0]] and ev.unseen_pairs == []


def test_a_float32_reference_that_convolves_on_cuda_is_held_to_tf32s_ceiling_not_float32s():
    from kernelvet.judge.reference import _own_error_ceiling
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    conv = {"aten::convolution", "aten::add.Tensor"}
    assert _own_error_ceiling(torch.float32, cuda, conv) == pytest.approx(1e-2)
    assert _own_error_ceiling(torch.float32, cpu, conv) == pytest.approx(5e-4)   # the CPU convolves in float32
    assert _own_error_ceiling(torch.float32, cuda, {"aten::mm"}) == pytest.approx(5e-4)   # matmul TF32 is off by default
    assert _own_error_ceiling(torch.bfloat16, cuda, conv) == pytest.approx(0.1)
    for rnn in ({"aten::gru.input"}, {"aten::lstm.input"}, {"aten::_cudnn_rnn"}):   # cuDNN's recurrences: TF32 too
        assert _own_error_ceiling(torch.float32, cuda, rnn) == pytest.approx(1e-2)
        assert _own_error_ceiling(torch.float32, cpu, rnn) == pytest.approx(5e-4)


def _launched_twice(second_apart: float, reference_repeat_mismatches: int, timed_mismatches: int = 0):
    """Set 1's fresh output, and the determinism call's on the same inputs, `second_apart` away (relative)."""
    ev = _ev(reference_repeat_mismatches=reference_repeat_mismatches)
    out = ev.refs64[1].float()
    again = out * (1 + second_apart) if second_apart else out.clone()
    ev.calls = [CallRecord("fresh", 1, 1, {}, out), CallRecord("determinism", 1, 1, {}, again)]
    ev.timing = {"times_ms": [0.01] * 20, "mismatches": timed_mismatches}
    return REGISTRY[CheckId.DETERMINISM](ev)


@pytest.mark.parametrize("apart, ref_mismatches, timed, status", [
    (0.0, 0, 0, Status.PASS),     # bitwise equal
    (1e-6, 0, 0, Status.FAIL),    # the reference repeats bitwise: so must the candidate
    (0.0, 0, 3, Status.FAIL),     # ... its timed reps too
    (1e-6, 5, 0, Status.PASS),    # the reference's library does not repeat here (atomics): within the bound
    (1e-6, 5, 3, Status.PASS),    # ... and its timed reps' differing bits are evidence
    (0.5, 5, 0, Status.FAIL),     # far beyond the bound: read from memory nobody wrote
])
def test_determinism_holds_a_candidate_to_the_repeatability_of_its_reference(apart, ref_mismatches, timed, status):
    f = _launched_twice(apart, ref_mismatches, timed)
    assert f.status is status, f
    if status is Status.PASS and apart:
        assert f.evidence["launches_differ"]["relative_difference"] <= f.evidence["launches_differ"]["tolerance"]


def test_bitwise_differences_counts_and_measures_slice_by_slice():
    from kernelvet import metrics
    a = torch.zeros(3 * metrics.HOST_SLICE + 5)
    b = a.clone()
    b[7], b[metrics.HOST_SLICE + 1], b[-1] = 0.5, -2.0, 1e-3
    assert metrics.bitwise_differences(a, b) == (3, 2.0)
    b[-2] = float("nan")
    assert metrics.bitwise_differences(a, b) == (4, math.inf)
    assert metrics.bitwise_differences(torch.arange(4), torch.tensor([0, 1, 5, 3])) == (1, 3.0)
    assert metrics.bitwise_differences(a, a[:-1]) == (a.numel(), math.inf)
    f = _launched_twice(1e-6, 0)
    assert f.status is Status.FAIL and f.evidence["differing"] > 0 and "max difference" in f.summary, f
