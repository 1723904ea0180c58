"""The order of the candidate's checked calls on CUDA, driven on the CPU: the plan's stages run as
written, with each call answered as an honest worker would (its output, the float64 reference
rounded to float32) and the kernel audit answered with a synthetic trace. The GPU suite runs the
same plan for real (tests/test_gpu_library_policy.py)."""

from __future__ import annotations

import pytest
import torch

from kernelvet.checks import library_policy as policies
from kernelvet.ids import CheckId
from kernelvet.judge.plan import Plan
from kernelvet.judge.settings import _OVERWRITE, _WARMUP, Settings
from kernelvet.protocol import Message

from .test_checks_unit import _ev
from .test_kernel_audit import CUBLAS, _act, _trace

FRESH = [1, 2, 3]
OWN = _act("matmul_kernel", 7, 1100, 2000, 5)      # a kernel the candidate's source defines
LIBRARY = _act(CUBLAS, 7, 1100, 2000, 5)           # cuBLAS's


class _Worker:
    """Answers the plan's own requests (release, overwrite); the calls and the audit are the plan's
    methods, replaced below, so that no codec or trace format stands between the plan and the test."""

    def __init__(self):
        self.requests = []

    def request(self, type_, body=None, blobs=(), **_):
        self.requests.append(type_)
        return Message("ok", {"same_pointers": False}, ())


def _plan(kernel, monkeypatch) -> tuple[Plan, list]:
    enabled = frozenset(CheckId) - {CheckId.STREAMS, CheckId.TIMERS}   # no ordering probe, no clocks
    ev = _ev("cuda", enabled=enabled, library_policy=policies.make_policy("own-kernels", "cuda"))
    ev.refs64[_WARMUP] = ev.refs64[1]
    ev.inputs[_WARMUP] = ev.inputs[1]
    ev.refs64[_OVERWRITE] = ev.refs64[2]
    values = {k: ev.inputs[k] for k in ev.inputs} | {_OVERWRITE: ev.inputs[2]}
    plan = Plan(_Worker(), ev, FRESH, Settings(), 1 << 20, values=values)
    order = []

    def call(phase, set_id, **_):
        order.append((phase, set_id))
        key = plan.set_values[set_id]
        meta = {"wall_s": 1e-4, "type": "Tensor", "exact_tensor": True, "device": "cuda:0",
                "storage_ptr": 1 << 30 | len(order) << 20}   # each call's output a storage of its own
        ev.add_call(phase, set_id, key, meta, ev.refs64[key].float())

    def audit(set_id=None):
        order.append(("audit", set_id))
        ev.audit = {**_trace(kernel), "cpu_events": []}
        ev.own_kernels = frozenset({"matmul_kernel"})
        ev.reached.add("audit")

    monkeypatch.setattr(plan, "call", call)
    monkeypatch.setattr(plan, "audit", audit)
    return plan, order


def test_a_library_call_in_disguise_is_rejected_after_one_fresh_call(monkeypatch):
    """own-kernels decides on the audit's trace: taken right after the first fresh call, a
    candidate that runs only library kernels costs that one output's comparisons, not the
    determinism call's, the other fresh sets' and the overwrite's (seconds each at KernelBench's sizes)."""
    plan, order = _plan(LIBRARY, monkeypatch)
    assert plan.checked_calls() is False
    assert order == [("warmup", _WARMUP), ("fresh", 1), ("audit", 1)]
    assert plan.ev.extra["stopped_after"] == str(CheckId.LIBRARY_CALL)
    assert plan.ev.extra["stopped_at"] == "the kernel audit"


def test_a_candidate_in_its_own_kernels_goes_on_to_every_checked_call(monkeypatch):
    plan, order = _plan(OWN, monkeypatch)
    assert plan.checked_calls() is True, plan.ev.extra
    assert order == [("warmup", _WARMUP), ("fresh", 1), ("audit", 1), ("determinism", 1), ("fresh", 2),
                     ("fresh", 3), ("overwrite", 1)]


@pytest.mark.parametrize("level", ["no-reference-ops", "off"])
def test_no_audit_among_the_checked_calls_where_the_policy_needs_no_trace(level, monkeypatch):
    plan, order = _plan(OWN, monkeypatch)
    plan.ev.library_policy = policies.make_policy(level, "cuda")
    assert plan.checked_calls() is True
    assert ("audit", 1) not in order and order[:2] == [("warmup", _WARMUP), ("fresh", 1)]
    assert torch.equal(plan.ev.records("fresh")[0].output, plan.ev.refs64[1].float())
