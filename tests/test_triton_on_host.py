"""Triton candidates on a machine without a GPU: a host worker runs them in Triton's interpreter,
so what they compute is judged like any other candidate's, rather than failing for want of a
driver."""

import os

import pytest

from kernelvet import spawn, vet
from kernelvet.ids import CheckId
from kernelvet.report import Status, Verdict

pytest.importorskip("triton")

SOFTMAX = os.path.join(os.path.dirname(__file__), "kb_problems", "l1_softmax.py")

# A row softmax in Triton: tl.max and tl.sum are Triton's own @jit library functions, which the
# interpreter must have bound too (not only the candidate's kernel).
TRITON_SOFTMAX = '''
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, ROWS_DONE, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    width = tl.where(row < ROWS_DONE, n_cols, 0)   # the rows from ROWS_DONE on: left unwritten
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < width)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax[(x.shape[0],)](x, y, x.shape[1], {rows_done}, BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
'''


@pytest.fixture(scope="module")
def launcher():
    launcher = spawn.Launcher()
    yield launcher
    launcher.close()


def test_an_honest_triton_kernel_passes_on_the_host_in_the_interpreter(launcher, write):
    path = write("triton_softmax.py", TRITON_SOFTMAX.replace("{rows_done}", "x.shape[0]"))
    report = vet(path, SOFTMAX, device="cpu", timeout=240, launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.containment["triton"] == "interpreter"
    assert report.finding(CheckId.PRECISION).status is Status.PASS


def test_a_triton_kernel_that_leaves_rows_unwritten_is_rejected_on_the_host(launcher, write):
    path = write("triton_softmax_short.py", TRITON_SOFTMAX.replace("{rows_done}", "x.shape[0] - 3"))
    report = vet(path, SOFTMAX, device="cpu", timeout=240, launcher=launcher)
    failed = {f.check for f in report.failed}
    assert report.verdict is Verdict.REJECT and failed & {CheckId.UNWRITTEN_OUTPUT, CheckId.PRECISION}, \
        [f.summary for f in report.failed]
    assert CheckId.WORKER not in failed, [f.summary for f in report.failed]
