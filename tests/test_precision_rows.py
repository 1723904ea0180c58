"""`precision` row by row: honest float32 summation orders pass at every size (CALIBRATION.md's
kernels: torch.mm, broadcast multiply + sum, reversed sums, split-K), on plain and on row-scaled
inputs; dropping or thinning rows that weigh little in the norm is rejected. Deterministic: the
numbers come from seeded inputs, no worker and no clock."""

import pytest
import torch

from kernelvet import metrics
from kernelvet.checks import REGISTRY
from kernelvet.evidence import Evidence
from kernelvet.ids import ALL_CHECKS, CheckId
from kernelvet.report import Status


def _broadcast(A, B, chunk=32):
    out = torch.zeros(A.shape[0], B.shape[1])
    for k in range(0, A.shape[1], chunk):
        out += (A[:, k:k + chunk, None] * B[None, k:k + chunk, :]).sum(1)
    return out


def _reversed(A, B):
    out = torch.zeros(A.shape[0], B.shape[1])
    for k in reversed(range(A.shape[1])):
        out += A[:, k:k + 1] * B[k:k + 1, :]
    return out


def _split_k(A, B, parts=4):
    step = A.shape[1] // parts
    partial = [A[:, i:i + step] @ B[i:i + step] for i in range(0, A.shape[1], step)]
    out = partial[0]
    for p in partial[1:]:   # a fixed order
        out = out + p
    return out


def _thin_rows(A, B):
    order = torch.argsort(A.abs().amax(dim=1))
    m = A.shape[0]
    out = torch.zeros(m, B.shape[1])
    thin, full = order[int(0.21 * m):int(0.61 * m)], order[int(0.61 * m):]
    out[thin] = A[thin].bfloat16().float() @ B.bfloat16().float()
    out[full] = A[full] @ B
    return out


HONEST = {"torch.mm": torch.mm, "broadcast multiply + sum": _broadcast, "reversed sum": _reversed,
          "split-K": _split_k}


def _inputs(n, scaled, seed=0):
    g = torch.Generator().manual_seed(seed)
    A, B = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    if scaled:
        A = A * 10.0 ** (-8.0 * torch.rand(n, 1, generator=g))
    return A, B


def _verdict(kernel, n, scaled):
    A, B = _inputs(n, scaled)
    ref64 = A.double() @ B.double()
    ref32 = A @ B   # the reference implementation, run in float32 as the worker runs it
    ev = Evidence(device=torch.device("cpu"), device_info={}, peaks=None, dtype=torch.float32, shape=(n, n),
                  flops=None, bytes_moved=None, inputs={1: [A, B]}, refs64={1: ref64},
                  reference_error=metrics.rel_error(ref32, ref64), poison_words=(0x7FC01234,),
                  enabled=frozenset(ALL_CHECKS))
    ev.reference_row_errors = {1: metrics.row_errors(ref32, ref64)}
    ev.add_call("fresh", 1, 1, {}, kernel(A, B))
    return REGISTRY[CheckId.PRECISION](ev)


# The reversed sum is a rank-1 update per k: at 1024 that is slow on the CPU, and 256 says the same.
CASES = [(name, n) for name in sorted(HONEST) for n in (64, 256, 1024) if (name, n) != ("reversed sum", 1024)]


@pytest.mark.parametrize("scaled", [False, True], ids=["plain", "row-scaled"])
@pytest.mark.parametrize("name, n", CASES)
def test_honest_float32_summation_orders_pass_row_by_row(name, n, scaled):
    f = _verdict(HONEST[name], n, scaled)
    assert f.status is Status.PASS, f.summary
    assert f.evidence["rows"]["rows_over"] == 0


def test_thinning_small_rows_passes_the_norm_and_fails_the_rows():
    f = _verdict(_thin_rows, 256, True)
    assert f.status is Status.FAIL and "row by row" in f.summary, f.summary
    assert f.evidence["max_rel_error"] <= f.evidence["tolerance"]   # the norm-wise bound alone: a pass
    assert f.evidence["rows"]["rows_over"] >= 100


def test_a_row_the_reference_itself_gets_wrong_allows_the_candidate_as_much():
    """Cancellation: a row whose result is tiny next to its terms is as hard for the reference."""
    ref64 = torch.ones(4, 256, dtype=torch.float64)
    ref64[2] = 1e-9
    ref_rows = torch.zeros(4, dtype=torch.float64)
    ref_rows[2] = 1e-3                                     # the reference's own float32 row error there
    out = ref64.clone()
    out[2] *= 1 + 2e-3
    errs = metrics.row_errors(out, ref64)
    assert errs[2] == pytest.approx(2e-3) and errs[0] == 0.0
    ev = Evidence(device=torch.device("cpu"), device_info={}, peaks=None, dtype=torch.float32, shape=(4, 256),
                  flops=None, bytes_moved=None, inputs={1: []}, refs64={1: ref64}, reference_error=1e-7,
                  poison_words=(0x7FC01234,), enabled=frozenset(ALL_CHECKS))
    ev.reference_row_errors = {1: ref_rows}
    ev.add_call("fresh", 1, 1, {}, out.float())
    assert REGISTRY[CheckId.PRECISION](ev).status is Status.PASS


@pytest.mark.parametrize("shape, rows", [((256, 256), 256), ((4, 8, 64), 4), ((1000,), 1), ((3,), 1), ((8, 2, 2), 1)])
def test_rows_hold_at_least_row_min_elements(shape, rows):
    assert metrics.as_rows(torch.zeros(shape)).shape[0] == rows
