"""Decisions on synthetic evidence for the idioms honest kernels use every day: a check that
rejects honest code is as serious a bug as a missed cheat. Fast, no worker (the corpus runs the
real candidates)."""

import pytest
import torch

from kernelvet.checks import REGISTRY
from kernelvet.evidence import CallRecord
from kernelvet.ids import CheckId
from kernelvet.report import Status

from .test_checks_unit import _ev


def _call(after_return, py_threads_new=0, **meta):
    return CallRecord("fresh", 1, 1, {"py_threads_new": py_threads_new, "children_new": [],
                                      "changed_after_return": False, "after_return": after_return, **meta},
                      torch.zeros(8, 8))


IDLE_POOL = {"threads": 2, "ended": 0, "running": 0, "cpu_ms": 0.004, "device_allocs": 0}


@pytest.mark.parametrize("after, want", [
    (IDLE_POOL, Status.PASS),                                   # joined futures, pool alive and idle
    ({**IDLE_POOL, "cpu_ms": 11.7}, Status.FAIL),               # a matmul finishing off the clock
    ({**IDLE_POOL, "running": 1, "cpu_ms": 0.2}, Status.FAIL),  # still runnable when the settle ends
    ({**IDLE_POOL, "device_allocs": 3}, Status.FAIL),           # kernels producing tensors while nobody called
    ({**IDLE_POOL, "ended": 1, "cpu_ms": 4.0}, Status.FAIL),    # finished its work during the settle, then ended
    ("forged", Status.PASS),                                    # malformed: no evidence of work, not an error
])
def test_threads_judges_work_after_return_not_live_threads(after, want):
    f = REGISTRY[CheckId.THREADS](_ev("cpu", calls=[_call(after, py_threads_new=2)]))
    assert f.status is want, f.summary
    if want is Status.PASS:
        assert "idle thread" in f.summary


def test_threads_still_fails_a_changed_output_and_a_child_process():
    changed = _call(IDLE_POOL, changed_after_return=True)
    child = _call(IDLE_POOL, children_new=[4242])
    for c in (changed, child):
        assert REGISTRY[CheckId.THREADS](_ev("cpu", calls=[c])).status is Status.FAIL


@pytest.mark.parametrize("key, old, new, want", [
    ("cudnn.benchmark", "False", "True", Status.PASS),
    ("allow_tf32 (cudnn)", "True", "False", Status.PASS),          # raises precision
    ("allow_tf32 (cuda.matmul)", "False", "True", Status.FAIL),    # TF32 for float32 matmuls
    ("bf16 reduced-precision reduction", "False", "True", Status.FAIL),
    ("float32_matmul_precision", "highest", "high", Status.FAIL),
    ("float32_matmul_precision", "high", "highest", Status.PASS),
    ("default_dtype", "torch.float32", "torch.float16", Status.FAIL),
    ("deterministic_algorithms", "False", "True", Status.PASS),
    ("dispatch aten::equal", "ab12", "cd34", Status.FAIL),          # the harness's own comparisons
    ("torch_dispatch_mode_stack", "0", "1", Status.FAIL),
])
def test_global_state_counts_only_what_can_lower_precision_or_touch_the_harness(key, old, new, want):
    f = REGISTRY[CheckId.GLOBAL_STATE](_ev("cpu", integrity=[("load", {"changed": {key: [old, new]}})]))
    assert f.status is want, f.summary
    if want is Status.PASS:
        assert key in f.evidence["harmless"]


def test_global_state_a_harmless_flag_does_not_hide_a_later_harmful_one():
    integrity = [("load", {"changed": {"cudnn.benchmark": ["False", "True"]}}),
                 ("fresh", {"changed": {"cudnn.benchmark": ["False", "True"],
                                        "allow_tf32 (cuda.matmul)": ["False", "True"]}})]
    f = REGISTRY[CheckId.GLOBAL_STATE](_ev("cpu", integrity=integrity))
    assert f.status is Status.FAIL and f.evidence["phase"] == "fresh"
    assert list(f.evidence["changed"]) == ["allow_tf32 (cuda.matmul)"]


def test_an_unseen_rep_runs_new_values_at_the_seen_sets_pointers_and_puts_them_back():
    """The seen/unseen pair compares new values at seen pointers with repeated values: a graph
    keyed on pointers is replayed on both sides, a cache keyed on values misses on the unseen one."""
    from kernelvet.worker import Worker, _Reps
    w = Worker(None)
    seen_x, unseen_x = torch.randn(16), torch.randn(16)
    w.sets = {1: [seen_x, 3], 100: [unseen_x, 3]}
    w.paint = False
    calls = []
    w.fn = lambda x, k: calls.append((x.data_ptr(), x.clone())) or x   # returns its input's storage
    rec = _Reps(w)
    before = seen_x.clone()
    rec.rep(1, seen=True)
    rec.rep(100, seen=False, at=1)
    rec.collect()
    assert calls[1][0] == seen_x.data_ptr() and torch.equal(calls[1][1], unseen_x)
    assert torch.equal(seen_x, before), "the seen set's own values were not put back"
    assert torch.equal(rec.first[100], unseen_x), "the output was verified after the values were put back"
    assert rec.in_place == 1 and len(rec.pairs) == 1


def test_an_unseen_set_that_differs_in_shape_runs_in_its_own_storages():
    from kernelvet.worker import Worker, _Reps
    w = Worker(None)
    w.sets = {1: [torch.randn(16)], 100: [torch.randn(8)]}
    w.paint, ptrs = False, []
    w.fn = lambda x: ptrs.append(x.data_ptr()) or x * 2
    rec = _Reps(w)
    rec.rep(100, seen=False, at=1)
    assert ptrs == [w.sets[100][0].data_ptr()] and rec.in_place == 0


def _aliased_calls():
    return [CallRecord("warmup", 0, 0, {"call_index": 1}, torch.zeros(8, 8)),
            CallRecord("fresh", 1, 1, {"call_index": 2, "same_storage_as_call": 1}, torch.zeros(8, 8))]


@pytest.mark.parametrize("policy, want", [("allow", Status.PASS), ("reject", Status.FAIL)])
def test_aliasing_records_a_reused_output_storage_and_fails_it_only_when_strict(policy, want):
    ev = _ev("cpu", calls=_aliased_calls())
    ev.reused_output = policy
    f = REGISTRY[CheckId.ALIASING](ev)
    assert f.status is want, f.summary
    assert f.evidence["same_storage"] == [["fresh", 2, 1]] and f.evidence["reused_output"] == policy


def test_aliasing_passes_own_storages_and_sees_reuse_in_the_timed_reps():
    own = [CallRecord("fresh", 1, 1, {"call_index": 2}, torch.zeros(8, 8))]
    assert "own storage" in REGISTRY[CheckId.ALIASING](_ev("cpu", calls=own)).summary
    ev = _ev("cpu", calls=own, timing={"reused_output_reps": 1})
    ev.reused_output = "reject"
    assert REGISTRY[CheckId.ALIASING](ev).status is Status.FAIL


def test_a_reused_output_storage_in_the_timed_reps_is_copied_not_counted_as_other_bits():
    """A static output buffer overwrites the outputs still queued for checking; from the first
    reuse on, each rep's output is copied right after its call and the overwritten one is left
    unchecked: `determinism` sees no other bits."""
    from kernelvet.worker import Worker, _Reps
    w = Worker(None)
    w.sets = {1: [torch.randn(16)], 2: [torch.randn(16)]}
    w.paint, buf = False, torch.empty(16)
    w.fn = lambda x: buf.copy_(x * 2)
    rec = _Reps(w)
    for s in (1, 2, 1, 2, 1):
        rec.rep(s, seen=True)
    rec.collect()
    assert rec.verdicts()["mismatches"] == 0 and rec.verdicts()["reused_output_reps"] == 1
    assert torch.equal(rec.first[1], w.sets[1][0] * 2) and torch.equal(rec.first[2], w.sets[2][0] * 2)
