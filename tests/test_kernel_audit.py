"""The kernel audit's decisions on synthetic profiler traces, shaped like the H200's (names from
bench/results/2026-11-30-h200/diagnostics/kernel-trace.json). Fast, no GPU: the GPU suite traces for real."""

import json

import pytest

from kernelvet import trace
from kernelvet.checks import REGISTRY
from kernelvet.checks.kernel_audit import classify, defined_kernels
from kernelvet.ids import CheckId
from kernelvet.report import Status

from .test_checks_unit import _ev

SPIN = "at::cuda::(anonymous namespace)::spin_kernel(long)"
CUBLAS = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"


def _act(name, stream, start, end, corr):
    return {"name": name, "stream": stream, "start_ns": start, "end_ns": end, "corr": corr}


def _trace(*own):
    """Gate spin 0-1000 ns and end marker at 5000 ns on stream 7, around the candidate's activities."""
    return {"activities": [_act(SPIN, 7, 0, 1000, 1), *own, _act(SPIN, 7, 5000, 5010, 99)], "dropped": 0}


IN_ORDER = _act("matmul_kernel", 7, 1100, 2000, 5)
SIDE_WAITED = _act("matmul_kernel", 30, 1100, 2000, 5)           # a side stream that waited on the caller's
HIDDEN = _act("matmul_kernel", 30, 200, 900, 5)                  # ran while the gate held the caller's stream
LATE = _act("matmul_kernel", 30, 4000, 9000, 5)                  # ended after the end marker began
AFTER_RETURN = _act("matmul_kernel", 30, 6000, 7000, 120)        # launched after the end marker


@pytest.mark.parametrize("acts, hidden", [((IN_ORDER,), False), ((SIDE_WAITED,), False), ((HIDDEN,), True),
                                          ((LATE,), True), ((AFTER_RETURN,), True)])
def test_streams_takes_the_trace_as_a_witness(acts, hidden):
    f = REGISTRY[CheckId.STREAMS](_ev(audit=_trace(*acts)))
    assert (f.status is Status.FAIL) is hidden, f
    assert bool(f.evidence.get("trace")) is hidden


def test_library_call_sees_vendor_kernels_in_the_trace():
    ev = _ev(audit=_trace(_act(CUBLAS, 7, 1100, 2000, 5)), forbidden=frozenset({"mm"}))
    f = REGISTRY[CheckId.LIBRARY_CALL](ev)
    assert f.status is Status.FAIL and "cublas" in f.summary
    ev.forbidden = frozenset()   # a problem that forbids nothing may use the vendor's kernels
    assert REGISTRY[CheckId.LIBRARY_CALL](ev).status is Status.PASS


def test_a_kernel_is_the_candidates_own_by_the_symbols_of_its_binaries():
    ev = _ev(audit=_trace(_act("cutlass_style_gemm", 7, 1100, 2000, 5)), forbidden=frozenset({"mm"}),
             kernels_defined=("cutlass_style_gemm",), own_kernels=frozenset({"cutlass_style_gemm"}))
    assert REGISTRY[CheckId.LIBRARY_CALL](ev).status is Status.PASS


@pytest.mark.parametrize("decoy", ["gemm", "nvjet", "xmma", "cublas", "sm80_xmma_gemm"])
def test_a_decoy_named_like_a_vendor_kernel_owns_none_of_its_time(decoy):
    """A Triton kernel defined (and built) but never launched, named so that a substring match would
    have taken cuBLAS's kernel for it: the cuBLAS kernel is not the candidate's."""
    ev = _ev(audit=_trace(_act(CUBLAS, 7, 1100, 2000, 5)), forbidden=frozenset({"mm"}),
             kernels_defined=(decoy,), own_kernels=frozenset({decoy}))
    f = REGISTRY[CheckId.LIBRARY_CALL](ev)
    assert f.status is Status.FAIL and "cublas" in f.summary, f
    assert REGISTRY[CheckId.KERNEL_AUDIT](ev).status is Status.FAIL   # the decoy itself never ran


def _own_kernels_ev(*acts, own=frozenset(), allowed=(), cpu_events=()):
    from kernelvet.checks.library_policy import make_policy
    audit = _trace(*acts)
    audit["cpu_events"] = list(cpu_events)
    return _ev(audit=audit, own_kernels=frozenset(own), library_policy=make_policy("own-kernels", "cuda", allowed))


def test_own_kernels_states_the_share_of_device_time_in_the_candidates_kernels():
    f = REGISTRY[CheckId.LIBRARY_CALL](_own_kernels_ev(
        _act("matmul_kernel", 7, 1100, 1980, 5), _act("void at::native::vectorized_elementwise_kernel<4>", 7, 1980, 2000, 6),
        own={"matmul_kernel"}))
    assert f.status is Status.PASS and f.summary.startswith("98% of device time in the candidate's own kernels; 2% in "
                                                            "PyTorch's own kernels"), f.summary
    assert f.evidence["device_ns"] == {"own": 880, "allowed": 0, "other": 20}


def test_own_kernels_rejects_a_composition_of_library_ops_and_a_decoy():
    composition = _own_kernels_ev(_act("void at::native::vectorized_elementwise_kernel<4>", 7, 1100, 1900, 5),
                                  _act("void at::native::reduce_kernel<512, 1>", 7, 1900, 2000, 6))
    f = REGISTRY[CheckId.LIBRARY_CALL](composition)
    assert f.status is Status.FAIL and "composition" in f.summary and "0% of device time" in f.summary, f.summary
    decoy = _own_kernels_ev(_act(CUBLAS, 7, 1100, 2000, 5), _act("gemm", 7, 2000, 2010, 6), own={"gemm"})
    f = REGISTRY[CheckId.LIBRARY_CALL](decoy)
    assert f.status is Status.FAIL and "library kernels" in f.summary, f.summary


def test_own_kernels_counts_an_allowed_ops_time_as_allowed():
    conv = "void cudnn::cnn::implicit_convolve_sgemm<float>"
    events = [{"kind": "op", "name": "aten::convolution", "tid": 1, "start_ns": 0, "end_ns": 100, "corr": 0},
              {"kind": "launch", "name": "cudaLaunchKernel", "tid": 1, "start_ns": 10, "end_ns": 20, "corr": 5}]
    acts = (_act(conv, 7, 1100, 1900, 5), _act("fused_relu_bias", 7, 1900, 2000, 6))
    f = REGISTRY[CheckId.LIBRARY_CALL](_own_kernels_ev(*acts, own={"fused_relu_bias"}, allowed=["conv2d"],
                                                       cpu_events=events))
    assert f.status is Status.PASS and "in allowed ops (conv2d)" in f.summary, f.summary
    f = REGISTRY[CheckId.LIBRARY_CALL](_own_kernels_ev(*acts, own={"fused_relu_bias"}, cpu_events=events))
    assert f.status is Status.FAIL, f.summary


def test_own_kernels_without_a_trace_is_not_run():
    from kernelvet.checks.library_policy import make_policy
    f = REGISTRY[CheckId.LIBRARY_CALL](_ev(library_policy=make_policy("own-kernels", "cuda")))
    assert f.status is Status.SKIP and "audit" in f.summary


@pytest.mark.parametrize("acts, defined, status", [
    ((IN_ORDER,), (), Status.PASS),
    ((IN_ORDER,), ("matmul_kernel",), Status.PASS),
    ((IN_ORDER,), ("tiled_matmul",), Status.FAIL),                                  # defined, never ran
    ((_act("Memcpy DtoD (Device -> Device)", 7, 1100, 1200, 5),), (), Status.FAIL),  # no kernel at all
    ((), (), Status.FAIL),
])
def test_kernel_audit_decides_what_only_the_trace_tells(acts, defined, status):
    built = frozenset({"matmul_kernel"} & set(defined))   # what the candidate's build produced
    f = REGISTRY[CheckId.KERNEL_AUDIT](_ev(audit=_trace(*acts), kernels_defined=defined, own_kernels=built))
    assert f.status is status, f


def test_a_trace_without_the_markers_fails_closed():
    f = REGISTRY[CheckId.KERNEL_AUDIT](_ev(audit={"activities": [IN_ORDER], "dropped": 0}))
    assert f.status is Status.FAIL and "marker" in f.summary
    assert classify({"activities": [IN_ORDER]}) is None


def test_not_run_and_cpu_are_skips():
    assert REGISTRY[CheckId.KERNEL_AUDIT](_ev()).status is Status.SKIP
    assert REGISTRY[CheckId.KERNEL_AUDIT](_ev("cpu")).status is Status.SKIP


def test_defined_kernels_finds_triton_and_cuda_kernels():
    source = '''
import triton
@triton.jit
def add_kernel(x): pass
@triton.autotune(configs=[], key=[])
@triton.jit
def tuned(x): pass
def helper(): pass
CUDA = """
template <int T> __global__ void __launch_bounds__(256) gemm_tiled(float* c) {}
__global__ void scale(float* x) {}
"""
'''
    assert set(defined_kernels(source)) == {"add_kernel", "tuned", "gemm_tiled", "scale"}
    assert defined_kernels("def broken(:") == ()



def _rnn_trace(steps: int) -> list[dict]:
    """The gate, `steps` cuDNN kernels in order (an RNN's time steps), then the end marker: corr in launch order."""
    kernels = [_act(f"cudnn::rnn_step_kernel_{i % 3}", 7, 1100 + 10 * i, 1105 + 10 * i, 2 + i) for i in range(steps)]
    end = 1200 + 10 * steps
    return [_act(SPIN, 7, 0, 1000, 1), *kernels, _act(SPIN, 7, end, end + 10, steps + 2)]


def _on_the_wire(body: dict) -> dict:
    """What the judge reads of a worker's `audited` body: the wire's kinds, then trace.expand."""
    from kernelvet import protocol, wire
    assert wire.REPLIES["audited"].problem(body) is None
    assert len(json.dumps(body)) < protocol.MAX_HEADER_BYTES
    return trace.expand(body)


def test_a_call_of_many_kernels_keeps_its_markers_and_passes():
    """A 6-layer LSTM over 512 steps runs more than 10,000 kernels in one call: its trace crosses the
    wire whole, as rows beside one table of names, and the audit finds the markers around it."""
    audit = _on_the_wire(trace.encode(_rnn_trace(12000), None))
    assert len(audit["activities"]) == 12002 and audit["dropped"] == 0 and audit["malformed"] == 0
    f = REGISTRY[CheckId.KERNEL_AUDIT](_ev(audit=audit))
    assert f.status is Status.PASS and "12000 kernels ran" in f.summary, f


def test_beyond_the_limit_the_markers_stay_and_what_is_left_out_is_counted(monkeypatch):
    monkeypatch.setattr(trace, "AUDIT_MAX", 100)
    audit = _on_the_wire(trace.encode(_rnn_trace(500), None))
    assert [a["name"] for a in audit["activities"]].count(SPIN) == 2 and audit["dropped"] == 400
    c = classify(audit)
    assert c is not None and len(c["kernels"]) == 100 and not c["late"]   # the earliest by launch order
    f = REGISTRY[CheckId.KERNEL_AUDIT](_ev(audit=audit))
    assert f.status is Status.PASS and f.evidence["left_out"] == 400


def test_a_trace_too_big_for_the_header_is_cut_to_fit(monkeypatch):
    monkeypatch.setattr(trace, "BODY_BYTES", 20000)
    body = trace.encode(_rnn_trace(5000), None)
    audit = _on_the_wire(body)
    assert len(json.dumps(body)) <= 20000 and audit["dropped"] > 0
    assert [a["name"] for a in audit["activities"]].count(SPIN) == 2


def test_cpu_events_cross_as_rows_and_come_back_as_attribution_reads_them():
    events = [{"kind": "op", "name": "aten::conv2d", "tid": 3, "start_ns": 10, "end_ns": 90, "corr": 4},
              {"kind": "launch", "name": "cudaLaunchKernel", "tid": 3, "start_ns": 20, "end_ns": 30, "corr": 5}]
    audit = _on_the_wire(trace.encode(_rnn_trace(2), events))
    assert audit["cpu_events"] == events and audit["cpu_dropped"] == 0
    from kernelvet.checks import attribution
    assert attribution.allowed_launches(audit["cpu_events"], frozenset({"conv2d"})) == {5}


@pytest.mark.parametrize("row", [[99, 7, 0, 10, 3], [0, 7, 0], [0, 7, 0, 10, 3, 4]])
def test_a_row_not_as_the_format_says_is_counted_and_fails_the_audit(row):
    """A worker's trace is its claim: a row naming no name, or of the wrong length, counts for
    nothing, and a trace with such rows is not an account the judge can read."""
    body = trace.encode(_rnn_trace(3), None)
    body["activities"].insert(2, row)
    audit = _on_the_wire(body)
    assert audit["malformed"] == 1 and len(audit["activities"]) == 5
    f = REGISTRY[CheckId.KERNEL_AUDIT](_ev(audit=audit))
    assert f.status is Status.FAIL and "not as the trace format says" in f.summary


def test_rows_of_the_wrong_kind_are_a_protocol_violation():
    from kernelvet import wire
    body = trace.encode(_rnn_trace(1), None)
    for field, bad in (("activities", [["0", 7, 0, 10, 3]]), ("names", [1]), ("cpu_events", [[0, 1.5]])):
        assert field in wire.REPLIES["audited"].problem({**body, field: bad})
