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
