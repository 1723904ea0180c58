"""The worker's numbers are claims: candidates that rewrite the worker from inside it (its own
classes' methods, found through the interpreter, or the input sets it holds, found through the
stack) are rejected by what the judge measures itself, and the next vet on the same launcher is
unaffected."""

import json

import pytest

from kernelvet import spawn, vet
from kernelvet.ids import CheckId
from kernelvet.problem import load_problem
from kernelvet.report import Status, Verdict

from .candidates import MATMUL_HEADER, honest_matmul
from .test_hostile import assert_judge_healthy


@pytest.fixture(scope="module")
def launcher():
    launcher = spawn.Launcher()
    yield launcher
    launcher.close()


# The worker's module, reached the way a candidate reaches it: through the garbage collector's
# list of live objects (its Worker instance), not by a name of the harness's.
FIND_WORKER = """
import gc, sys
_worker = next(o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "sets"))
_kw = sys.modules[type(_worker).__module__]
"""

# The per-rep recorder, swapped: every time it is handed is recorded 300x shorter.
SHRINK_RECORDER = FIND_WORKER + """
_real_record = _kw._Reps._record
def _record(self, ms, seen, s):
    return _real_record(self, ms / 300, seen, s)
_kw._Reps._record = _record
"""

# The judge-clocked loop, swapped: no call at all while the judge's clock runs; the one output
# the judge fetches afterwards is computed then, off its clock.
SKIP_LOOP = FIND_WORKER + """
def _do_loop(self, msg):
    if msg.body.get("fetch"):
        out = self.fn(*self.loop_set) if getattr(self, "loop_set", None) else None
        return "looped", {"exact_tensor": out is not None}, [_kw.codec.to_blob(out)] if out is not None else []
    if "layout" in msg.body:
        self._place_set(int(msg.body["set"]), msg.body["layout"], msg.tensors)
    if not msg.body.get("null"):
        self.loop_set = self.sets[int(msg.body["set"])]
    return "looped", {"exact_tensor": True}, []
_kw.Worker._do_loop = _do_loop
"""

# The recorder shrunk 300x, and the null requests (the prices the judge subtracts) slowed by a
# sleep that accounts for the calls' real cost: a timing request and a loop look as short as the
# reported times say, once their nulls are subtracted.
SLOW_NULLS = SHRINK_RECORDER.replace("ms / 300", "ms / 300.0") + """
import time as _time
_cost = [0.0]
_real_time, _real_loop = _kw.Worker._do_time, _kw.Worker._do_loop
def _do_time(self, msg):
    out = _real_time(self, msg)
    if msg.body.get("null"):
        _time.sleep(int(msg.body.get("min_reps", 1)) * _cost[0])
    return out
def _do_loop(self, msg):
    out = _real_loop(self, msg)
    if msg.body.get("null"):
        _time.sleep(int(msg.body.get("n", 0)) * _cost[0])
    return out
_kw.Worker._do_time, _kw.Worker._do_loop = _do_time, _do_loop
"""

# Walk up the stack into the worker, compute an answer for every input set it holds, and answer
# each later call on one of them from memory (keyed by the storages and a sample of their values,
# so inputs overwritten in place are computed anew).
PRECOMPUTE = """
import sys
_answers = {}
def _key(A, B):
    return (A.data_ptr(), B.data_ptr(), float(A[0, :8].sum()), float(B[-1, -8:].sum()))
def _product(A, B):
    out = torch.zeros(A.shape[0], B.shape[1], device=A.device)
    for k in range(0, A.shape[1], 32):
        out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
    return out
def _precompute():
    f = sys._getframe(2)
    while f is not None:
        held = getattr(f.f_locals.get("self"), "sets", None)
        if isinstance(held, dict):
            for vals in list(held.values()):
                if len(vals) == 2 and _key(*vals) not in _answers:
                    _answers[_key(*vals)] = _product(*vals)
            return
        f = f.f_back
class ModelNew(nn.Module):
    def forward(self, A, B):
        _precompute()
        hit = _answers.get(_key(A, B))
        return hit.clone() if hit is not None else _product(A, B)
"""


# The worker's reply to a pair request, swapped: each unseen rep reported at its seen rep's time
# (the pair times say "never slower on new inputs").
FORGE_PAIR_REPLIES = FIND_WORKER + """
_real_unseen = _kw.Worker._time_unseen
def _time_unseen(self, b, blobs):
    kind, body, out = _real_unseen(self, b, blobs)
    body["unseen_pairs"] = [[s, s] for s, _u in body["unseen_pairs"]]
    return kind, body, out
_kw.Worker._time_unseen = _time_unseen
"""

# ... around a value-keyed memo (a hit: a few sums; a miss: the whole product).
FORGED_PAIRS = FORGE_PAIR_REPLIES + """
_answers = {}
def _fingerprint(A, B):
    return (tuple(A.shape), float(A.sum()), float(B.sum()), float(A[::7].sum()), float(B[:, ::5].sum()))
class ModelNew(nn.Module):
    def forward(self, A, B):
        key = _fingerprint(A, B)
        hit = _answers.get(key)
        if hit is None:
            hit = torch.zeros(A.shape[0], B.shape[1])
            for k in range(0, A.shape[1], 32):
                hit += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
            _answers[key] = hit
        return hit.clone()
"""


# The worker's reply to a pair request, swapped: it sends back no output, and the candidate
# computes nothing in a pair request (found on the stack), so its calls on new values go unchecked.
UNANSWERED_PAIRS = FIND_WORKER + """
import sys as _sys
_real_unseen = _kw.Worker._time_unseen
def _time_unseen(self, b, blobs):
    kind, body, _outputs = _real_unseen(self, b, blobs)
    body["first_sets"] = []
    return kind, body, []
_kw.Worker._time_unseen = _time_unseen
def _in_pair():
    f = _sys._getframe(1)
    while f is not None and f.f_code.co_name != "_time_unseen":
        f = f.f_back
    return f is not None
class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1])
        if _in_pair():
            return out
        for k in range(0, A.shape[1], 32):
            out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        return out
"""


def _write(write, name, text):
    return write(f"{name}.py", MATMUL_HEADER + text)


def test_a_recorder_that_shrinks_its_times_fails_timers_by_the_requests_duration(launcher, write):
    path = _write(write, "shrink", SHRINK_RECORDER + honest_matmul())
    report = vet(path, "matmul", device="cpu", timeout=120, launcher=launcher)
    timers = report.finding(CheckId.TIMERS)
    assert report.verdict is Verdict.REJECT and timers.status is Status.FAIL, report.dumps()
    assert any(r["says"] == "disagrees" for r in timers.evidence["requests"]), timers.evidence
    assert_judge_healthy(launcher)


def test_null_requests_slowed_to_hide_the_calls_fail_timers_held_to_their_trusted_price(launcher, write):
    # the calls' real cost, a running mean, less the 1/300 reported
    timed = honest_matmul("_c = (_time.perf_counter() - _t0) * 299 / 300\n"
                          "_cost[0] = _c if not _cost[0] else 0.8 * _cost[0] + 0.2 * _c")
    timed = timed.replace("        out = torch.zeros", "        _t0 = _time.perf_counter()\n        out = torch.zeros")
    path = _write(write, "slow_nulls", SLOW_NULLS + timed)
    report = vet(path, "matmul", device="cpu", timeout=300, launcher=launcher)
    timers = report.finding(CheckId.TIMERS)
    assert report.verdict is Verdict.REJECT and timers.status is Status.FAIL, (timers.summary, report.dumps())
    assert any(a["null_capped"] for a in timers.evidence["attempts"] + timers.evidence["requests"]), timers.evidence
    assert_judge_healthy(launcher)


def test_a_loop_that_skips_its_calls_fails_timers_from_below(launcher, write):
    path = _write(write, "skip", SKIP_LOOP + honest_matmul())
    report = vet(path, "matmul", device="cpu", timeout=120, launcher=launcher)
    timers = report.finding(CheckId.TIMERS)
    assert report.verdict is Verdict.REJECT and timers.status is Status.FAIL, report.dumps()
    # the attempts that could tell saw the skip (one the host kept waiting says "busy"), none agreed
    attempts = timers.evidence["attempts"]
    assert any(a["skipped"] for a in attempts) and not any(a["agrees"] for a in attempts), \
        json.dumps(attempts, default=str)
    assert "did not run its calls" in timers.summary
    assert_judge_healthy(launcher)


# A call of a fixed CPU cost (pure Python work: the host's load stretches its wall time, never
# its CPU time), with its library product: the judge's clocks, not the policy, are under test.
FIXED_COST = """
def _work():
    total = 0
    for i in range(400_000):
        total += i & 7
    return total
class ModelNew(nn.Module):
    def forward(self, A, B):
        _work()
        return torch.mm(A, B)
"""

# The recorder shrunk by less than timers.RATIO: within the bound, so timers passes.
SHRINK_6 = SHRINK_RECORDER.replace("ms / 300", "ms / 6")

# ... and the judge-clocked loop made to run a sixth of its calls, so that it agrees with the
# shrunk reports: only calls on values never seen before (the pair requests) and the timing
# request's own reps are left to bound the time.
SKIP_LOOP_6 = SHRINK_6 + """
_real_loop = _kw.Worker._do_loop
def _do_loop(self, msg):
    if not msg.body.get("fetch") and not msg.body.get("null"):
        msg.body["n"] = max(1, int(msg.body["n"]) // 6)
    return _real_loop(self, msg)
_kw.Worker._do_loop = _do_loop
"""


def _fixed_cost_report(launcher, write, name, attack=""):
    path = _write(write, name, attack + FIXED_COST)
    return vet(path, "matmul", device="cpu", timeout=180, launcher=launcher, allow=["library-call"])


def test_a_recorder_shrunk_within_the_bound_is_ranked_at_the_judges_clock(launcher, write):
    honest = _fixed_cost_report(launcher, write, "fixed_cost")
    assert honest.verdict is Verdict.PASS, [f.summary for f in honest.failed]
    assert honest.timing.judge_least_ms <= honest.timing.median_ms == honest.timing.ranked_ms, honest.timing
    forged = _fixed_cost_report(launcher, write, "fixed_cost_shrunk", SHRINK_6)
    t = forged.timing
    assert forged.verdict is Verdict.PASS, [f.summary for f in forged.failed]   # timers: within its bound
    # reported a sixth of the call; ranked at no less than the loop's per call over LEAST_RATIO (2.4x the
    # report where the worker had its core; 1.5x leaves room for a busy host's waits in the reps)
    assert t.judge_least_ms >= 1.5 * t.median_ms and t.ranked_ms == t.judge_least_ms, t
    assert forged.to_json()["timing"]["speedup"] == pytest.approx(t.reference_median_ms / t.judge_least_ms)
    assert_judge_healthy(launcher)


def test_a_loop_that_skips_calls_to_match_a_shrunk_recorder_is_ranked_by_the_calls_it_cannot_skip(launcher, write):
    forged = _fixed_cost_report(launcher, write, "fixed_cost_skip", SKIP_LOOP_6)
    t = forged.timing
    assert t.judge_least_ms >= 1.5 * t.median_ms and t.ranked_ms == t.judge_least_ms, t
    assert_judge_healthy(launcher)


def test_inputs_read_ahead_from_the_workers_frames_cannot_include_unseen_ones(launcher, write):
    """Every set the worker holds is answered ahead; the unseen sets, each inside the one request
    that times it, are not there to be read before their call, and come out slow (caching)."""
    path = _write(write, "precompute", PRECOMPUTE)
    report = vet(path, "matmul", device="cpu", timeout=120, launcher=launcher)
    caching = report.finding(CheckId.CACHING)
    assert report.verdict is Verdict.REJECT and caching.status is Status.FAIL, report.dumps()
    assert "remembers answers" in caching.summary
    assert_judge_healthy(launcher)


# A candidate that looks, at every call, for a pair request's carried set among the sets the
# worker holds (an unseen set's key, a re-measurement's, a control copy's): found, it answers zeros.
SPY_CARRIED = FIND_WORKER + """
def _carried():
    return [k for k in _worker.sets if 100 <= k < 200 or 3000 <= k < 4000 or 5000 <= k < 7000]
""" + honest_matmul("if _carried():\n    out = torch.zeros_like(out)")


def test_a_pair_requests_carried_set_is_not_held_when_the_candidate_runs(launcher, write):
    """Copied into a seen set's storages, the carried set is dropped before the call: a read-ahead
    of every set the worker holds finds no copy of a control's values at new pointers to pay for
    (and so price its misses away), nor an earlier request's unseen set."""
    report = vet(_write(write, "spy_carried", SPY_CARRIED), "matmul", device="cpu", timeout=120, launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.finding(CheckId.CACHING).evidence["unseen_at_seen_pointers"] > 0


def test_forged_pair_times_fail_caching_by_the_judges_clock(launcher, write):
    """The worker's pairs say "as fast on new inputs"; the requests carrying new inputs, by the
    judge's clock, took a whole product longer than their controls."""
    path = _write(write, "forged_pairs", FORGED_PAIRS)
    # at 512^3 a miss (~0.3 s in the worker on the 2-core CI host) stands far above the noise of a
    # pair request on a host clock; at 256^3 (~4-40 ms) it is near the judge's bound there
    report = vet(path, load_problem("matmul", (512, 512, 512)), device="cpu", timeout=200, launcher=launcher)
    caching = report.finding(CheckId.CACHING)
    assert report.verdict is Verdict.REJECT and caching.status is Status.FAIL, report.dumps()
    assert caching.evidence.get("by_judge_clock") and "judge's clock" in caching.summary, caching.summary
    assert all(u == s for s, u in caching.evidence["pairs"])   # what the worker said
    assert_judge_healthy(launcher)


def test_a_pair_reply_without_its_carried_sets_output_fails_caching(launcher, write):
    """The reply to a pair request owes the output of its call on the set it carried: a worker
    that sends none back (its calls on new values skipped) is rejected, not judged on its word."""
    report = vet(_write(write, "unanswered_pairs", UNANSWERED_PAIRS), "matmul", device="cpu", timeout=120,
                 launcher=launcher)
    caching = report.finding(CheckId.CACHING)
    assert report.verdict is Verdict.REJECT and caching.status is Status.FAIL, report.dumps()
    assert caching.evidence["unanswered_pairs"] >= 5 and "without the output" in caching.summary
    assert_judge_healthy(launcher)


def test_a_pair_reply_that_says_its_call_returned_no_tensor_fails_output_type(launcher, write):
    """The same reply, saying its call returned something other than a tensor (no output to send):
    a claim that holds the candidate to output-type's rule, so it is rejected all the same."""
    text = UNANSWERED_PAIRS.replace('body["first_sets"] = []', 'body["first_sets"], body["non_tensor"] = [], 1')
    report = vet(_write(write, "no_tensor_pairs", text), "matmul", device="cpu", timeout=120, launcher=launcher)
    output_type = report.finding(CheckId.OUTPUT_TYPE)
    assert report.verdict is Verdict.REJECT and output_type.status is Status.FAIL, report.dumps()
    assert output_type.evidence["timed_not_tensor"] >= 1 and "timed:" in output_type.summary
    assert "unanswered_pairs" not in report.finding(CheckId.CACHING).evidence
    assert_judge_healthy(launcher)


def test_an_honest_pair_reply_carries_its_carried_sets_output_alone(launcher, write):
    """Each pair and control request sends back one output, verified as its carried set's: none is
    counted unanswered, and the caching check passes."""
    report = vet(_write(write, "honest", honest_matmul()), "matmul", device="cpu", timeout=120, launcher=launcher)
    caching = report.finding(CheckId.CACHING)
    assert report.verdict is Verdict.PASS and caching.status is Status.PASS, [f.summary for f in report.failed]
    assert "unanswered_pairs" not in caching.evidence and caching.evidence["pairs"]


# -- the judge's arithmetic on its own measurements (synthetic, deterministic) -----------------

def _ev(**kw):
    import torch
    from kernelvet.evidence import Evidence
    from kernelvet.ids import ALL_CHECKS
    ev = Evidence(device=torch.device("cpu"), device_info={}, peaks=None, dtype=torch.float32, shape=(8, 8),
                  flops=None, bytes_moved=None, inputs={}, refs64={}, reference_error=1e-7,
                  poison_words=(0,), enabled=frozenset(ALL_CHECKS), integrity=[("import", {"moved": []})])
    for k, v in kw.items():
        setattr(ev, k, v)
    return ev


def _timers(ev):
    from kernelvet.checks import REGISTRY
    return REGISTRY[CheckId.TIMERS](ev)


NULL = {"judge_s": 0.006 + 64 * 0.05e-3, "main_wait_s": 0.0, "reps": 64, "fixed_s": 0.006, "fixed_main_wait_s": 0.0}


def _request(reported_ms, judge_s, main_wait_s=0.0, calls=100):
    return {"judge_s": judge_s, "cpu_s": None, "wait_s": 2 * main_wait_s, "main_wait_s": main_wait_s,
            "calls": calls, "reps": calls, "reported_ms": reported_ms, "warmup_ms": 25.0, "warmup_calls": 3}


def test_a_timing_request_that_lasts_its_reps_agrees_and_one_50x_longer_fails():
    honest = _request(1.0, 0.025 + 0.006 + 100 * (1.0 + 0.05) / 1e3)          # warm-up, fixed, reps + their cost
    forged = _request(1.0 / 50, honest["judge_s"])
    assert _timers(_ev(clocked_timing=[honest], null_timing=NULL)).status is Status.PASS
    f = _timers(_ev(clocked_timing=[forged], null_timing=NULL))
    assert f.status is Status.FAIL and "timing request" in f.summary, f.summary


def test_a_timing_request_that_sends_back_more_than_a_gib_is_left_to_the_loop():
    """Its outputs' copies, through the host or a lent device buffer as the free memory allows,
    vary by more than its calls cost: the judge's clock does not judge that request (on an 80 GB
    H100 an honest 2.8 ms 3-D convolution's request, 2.46 GiB outputs sent back, read 143 ms a
    call), and a forger's reported time is left to the judge-clocked loop, which still fails it."""
    from kernelvet.checks import timers
    big = timers.CLOCKED_MAX_BYTES + 1
    slow_copies = {**_request(2.8, 6.0, calls=36), "moved_bytes": big}
    assert _timers(_ev(clocked_timing=[slow_copies], null_timing=NULL)).status is Status.PASS
    assert _timers(_ev(clocked_timing=[{**slow_copies, "moved_bytes": big - 1}], null_timing=NULL)).status is Status.FAIL
    assert not timers.requests_disagree([slow_copies], NULL, "cpu")
    forged = {**slow_copies, "reported_ms": 2.8 / 50}
    f = _timers(_ev(clocked_timing=[forged], null_timing=NULL, loop=[_loop(2.8 / 50, 2.8)]))
    assert f.status is Status.FAIL and "does not account for the work" in f.summary, f.summary


def test_a_busy_host_scales_what_was_measured_elsewhere_and_a_forger_still_fails():
    """The request ran while its serving thread waited 7/8 of the time: the reps' own cost (priced
    by the null request, elsewhere) and the warm-up's budget are scaled by 8; the reported times,
    taken over the same reps, already carry the waits."""
    honest = _request(8.0, 8 * (0.025 + 0.006 + 100 * 0.05 / 1e3) + 100 * 8.0 / 1e3)
    honest["main_wait_s"] = honest["judge_s"] * 7 / 8
    assert _timers(_ev(clocked_timing=[honest], null_timing=NULL)).status is Status.PASS
    forged = {**honest, "reported_ms": 8.0 / 50}
    assert _timers(_ev(clocked_timing=[forged], null_timing=NULL)).status is Status.FAIL


def test_a_request_that_barely_had_a_core_is_inconclusive_not_failed():
    from kernelvet.checks import timers
    starved = _request(0.01, 1.0, main_wait_s=1.0 * (1 - 0.5 / timers.BUSY_FACTOR))
    f = _timers(_ev(clocked_timing=[starved], null_timing=NULL))
    assert f.status is Status.SKIP and f.evidence["inconclusive"] and "inconclusive" in f.summary


def _loop(reported_ms, per_call_ms, n=100, wait_s=0.0, null_s=0.010):
    return {"n": n, "judge_s": null_s + n * per_call_ms / 1e3, "null_s": null_s, "cpu_s": None, "null_cpu_s": None,
            "reported_ms": reported_ms, "wait_s": wait_s, "null_wait_s": 0.0, "main_wait_s": 0.0,
            "null_main_wait_s": 0.0, "times_ms": [reported_ms]}


def test_the_busy_hosts_false_finding_is_inconclusive_and_a_forger_is_not():
    """A tiny elementwise call (17 us per rep) read 0.39 ms per call back to back on a 2-core host
    with two spinning processes: its threads waited for a core through the loop. A forger that
    claims 1/50 of 5 ms fails whatever the host did: waiting explains at most BUSY_SLACK_MS a call."""
    busy = [_loop(0.0171, 0.3882, wait_s=0.5 * 0.1 + 100 * 0.0004)] * 3
    f = _timers(_ev(loop=busy))
    assert f.status is Status.SKIP and f.evidence["inconclusive"], f.summary
    forged = [_loop(0.1, 5.0, wait_s=0.4)] * 3
    assert _timers(_ev(loop=forged)).status is Status.FAIL
    calm = [_loop(0.0171, 0.3882, wait_s=0.0)] * 3   # the same numbers without the waits: a lie
    assert _timers(_ev(loop=calm)).status is Status.FAIL


def test_a_loop_faster_than_its_reported_calls_by_both_clocks_skipped_them():
    skipped = [_loop(5.0, 0.01, n=12)] * 3
    f = _timers(_ev(loop=skipped))
    assert f.status is Status.FAIL and "did not run its calls" in f.summary
    warm_caches = [_loop(5.0, 5.0 / 4, n=12)] * 3   # back to back 4x faster than per rep: honest
    assert _timers(_ev(loop=warm_caches)).status is Status.PASS
    too_short = [_loop(0.01, 0.0, n=100)] * 3       # 100 x 10 us: within the null loop's noise
    assert _timers(_ev(loop=too_short)).status is Status.PASS


def test_a_loop_too_short_to_show_a_skip_does_not_clear_one_seen_skipping():
    """Two loops of a skipping candidate seen running none of their calls; a third, of 5 calls at
    a floor of 0.25 ms (1.25 ms in all, within the null loop's noise), agreed from above."""
    skipped = _loop(10.4, 0.0, n=5)
    too_short = _loop(2.0, 0.01, n=5)
    f = _timers(_ev(loop=[skipped, skipped, too_short]))
    assert f.status is Status.FAIL and "did not run its calls" in f.summary, f.summary
    ran = _loop(10.4, 9.0, n=5)   # one that ran its calls where a skip would show clears it
    assert _timers(_ev(loop=[skipped, ran])).status is Status.PASS


def test_a_pool_thread_kept_from_a_core_stretches_the_reported_times_not_the_floor_alone():
    """An honest parallel call ran 6.5 ms a call in the judge's loop; its timing request, on a host
    overloaded meanwhile, reported 264 ms a rep: one of its pool's threads waited for a core 85% of
    the request, the serving thread (asleep at the pool's barrier) hardly at all. The request is
    stretched by that thread's waits, and the floor makes room for them; a loop that ran none of
    its calls still falls below it, however long the worker kept one of its own threads waiting."""
    stretched = _request(264.0, 0.025 + 0.006 + 20 * 264.0 / 1e3, calls=20)
    stretched["max_thread_wait_s"] = 0.85 * stretched["judge_s"]
    ran = [_loop(264.0, 6.5, n=12)] * 3
    f = _timers(_ev(loop=ran, clocked_timing=[stretched], null_timing=NULL))
    assert f.status is Status.PASS, f.summary
    quiet = {**stretched, "max_thread_wait_s": 0.0}   # no thread waited: a loop 40x faster skipped
    f = _timers(_ev(loop=ran, clocked_timing=[quiet], null_timing=NULL))
    assert f.status is Status.FAIL and "did not run its calls" in f.summary, f.summary
    starved = {**stretched, "max_thread_wait_s": 0.999 * stretched["judge_s"]}
    skipped = [_loop(264.0, 0.0, n=12)] * 3
    f = _timers(_ev(loop=skipped, clocked_timing=[starved], null_timing=NULL))
    assert f.status is Status.FAIL and "did not run its calls" in f.summary, f.summary


def test_a_serving_thread_the_host_kept_off_its_core_stretches_the_floor_on_the_cpu():
    """An honest 0.03 ms call's reps read 12.3 ms a rep for a minute on a 2-core virtual machine,
    its back-to-back loop 0.35 ms a call, with no wait on a run queue to show for it: the serving
    thread of the timing request ran (or waited for a core) a small part of it, its core taken back
    by the machine's host, or itself blocked. On the CPU the floor makes room for that, up to
    BUSY_FACTOR; a loop that ran none of its calls still falls below it, and on CUDA, where the
    serving thread sleeps on the device, it says nothing."""
    from kernelvet.checks import timers
    stretched = _request(12.3, 0.025 + 0.006 + 20 * 12.3 / 1e3, calls=20)
    stretched["main_run_s"] = 0.03 * stretched["judge_s"]
    ran = [_loop(12.3, 0.35, n=100)] * 3
    f = _timers(_ev(loop=ran, clocked_timing=[stretched], null_timing=NULL))
    assert f.status is Status.PASS, f.summary
    ran_quiet = {**stretched, "main_run_s": stretched["judge_s"]}   # it ran all along: the loop skipped
    f = _timers(_ev(loop=ran, clocked_timing=[ran_quiet], null_timing=NULL))
    assert f.status is Status.FAIL and "did not run its calls" in f.summary, f.summary
    skipped = [_loop(12.3, 0.0, n=100)] * 3
    f = _timers(_ev(loop=skipped, clocked_timing=[stretched], null_timing=NULL))
    assert f.status is Status.FAIL and "did not run its calls" in f.summary, f.summary
    assert timers._stall_load(stretched, "cuda") == 1.0 and timers._stall_load(stretched, "cpu") == timers.BUSY_FACTOR


def test_the_judges_rehearsal_count_is_the_workers():
    from kernelvet import judge, worker
    assert judge._REHEARSALS == worker._Reps.REHEARSALS
    assert judge.LEAD_MAX_MS == worker._Reps.LEAD_MAX_S * 1e3


def test_a_time_the_judges_clocks_did_not_bound_is_not_vouched(launcher, write):
    """Timers waived: the verdict may pass, but the time is the worker's word, marked so."""
    path = _write(write, "honest_unvouched", honest_matmul())
    waived = vet(path, "matmul", device="cpu", timeout=120, launcher=launcher, allow=["timers"])
    assert waived.verdict is Verdict.PASS and waived.timing.vouched is False
    assert waived.to_json()["timing"]["vouched"] is False


def test_the_least_time_comes_off_the_launch_slack_and_over_its_ratio():
    from kernelvet.checks import timers
    assert timers.least_ms(0.1, "cuda") == 0.0      # a launch-bound call's host pace: no device time
    assert timers.least_ms(3.15, "cuda") == pytest.approx(3.0 / 1.5)
    assert timers.least_ms(10.05, "cpu") == pytest.approx(10.0 / 2.5)   # a host clock's noise is wider


def test_a_loop_that_agrees_ranks_a_report_below_its_least_at_the_least():
    from kernelvet.judge.assembly import _judge_least_ms
    from kernelvet.report import Timing
    honest = _ev(loop=[_loop(5.0, 5.2, n=12)])
    assert _judge_least_ms(honest) < 5.0
    forged = _ev(loop=[_loop(5.0 / 4, 5.0, n=12)])   # within RATIO: timers agrees
    assert _timers(forged).status is Status.PASS
    least = _judge_least_ms(forged)
    assert least == pytest.approx((5.0 - 0.05) / 2.5, rel=1e-6)
    t = Timing(method="-", raw_ms=(1.25,) * 5, reference_raw_ms=(5.0,) * 5, judge_least_ms=least)
    assert t.ranked_ms == least and t.speedup == pytest.approx(5.0 / least)
    assert t.to_json()["median_ms"] == 1.25 and t.to_json()["judge_least_ms"] == least


def test_the_pair_requests_least_is_not_lowered_by_a_forged_median():
    """A control prices a request's first rep in units of the reported median: a worker that
    halves its reports doubles that price, and must not take a whole call off the unseen request."""
    from kernelvet.checks import pair_clock
    clocks = [{"unseen_s": 0.024, "control_s": 0.024, "null_s": 0.002}] * 5   # two 10 ms calls each
    honest = pair_clock.least_ms(pair_clock.judged_pairs(clocks, 0.010, None, 0.0, "cpu"), "cpu")
    halved = pair_clock.least_ms(pair_clock.judged_pairs(clocks, 0.005, None, 0.0, "cpu"), "cpu")
    assert 0 < honest < 10.0 and halved >= honest, (honest, halved)


def test_a_kernel_that_remembers_answers_is_ranked_by_its_call_on_new_values():
    """A memo whose hit costs 4 ms and whose miss 10 ms: within caching's ratio, so not flagged;
    its reports say 4 ms, and the pair requests say what a call on new values costs."""
    from kernelvet.checks import pair_clock, timers
    clocks = [{"unseen_s": 0.002 + 0.010 + 0.004, "control_s": 0.002 + 0.004 + 0.004, "null_s": 0.002}] * 5
    judged = pair_clock.judged_pairs(clocks, 0.004, None, 0.0, "cpu")
    assert not pair_clock.remembers(judged)
    noise = judged[0]["bound_ms"] - 2.5 * 4.0
    assert pair_clock.least_ms(judged, "cpu") == pytest.approx((10.0 - noise - 0.05) / timers.LEAST_RATIO["cpu"])
    # a control stalled on purpose lowers that reading, not the other (the two calls, halved)
    stalled = [{**c, "control_s": c["control_s"] + 0.050} for c in clocks]
    assert pair_clock.least_ms(pair_clock.judged_pairs(stalled, 0.004, None, 0.0, "cpu"), "cpu") > 0
