"""The worker's numbers are claims, on a real GPU (on a CUDA machine: `pytest -m gpu`): the
attacks of test_claims.py that rewrite the worker from inside it, on a Triton GEMM that passes
everything alone, under the default confinement and the CUDA default library policy. A recorder
swapped to shrink its event times, and a judge-clocked loop swapped to skip its calls, fail
`timers`; a read-ahead of every set the worker holds is slow on the unseen ones (`caching`)."""

import pytest

from kernelvet import spawn, vet
from kernelvet.ids import CheckId
from kernelvet.report import Status, Verdict

from .test_claims import PRECOMPUTE, SHRINK_RECORDER, SKIP_LOOP
from .test_hostile import assert_judge_healthy

pytestmark = pytest.mark.gpu

TRITON_GEMM = """
import torch
from torch import nn
from kernelvet.practice import kernels

class ModelNew(nn.Module):
    def forward(self, A, B):
        return kernels.matmul(A, B, ieee=True)
"""


@pytest.fixture(scope="module")
def launcher():
    launcher = spawn.Launcher()
    yield launcher
    launcher.close()


def _vet(write, launcher, name, text, **kw):
    return vet(write(f"{name}.py", text), "matmul", device="cuda", timeout=300, launcher=launcher, **kw)


def test_the_triton_gemm_the_attacks_are_built_on_passes(launcher, write):
    report = _vet(write, launcher, "gemm", TRITON_GEMM)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


@pytest.mark.parametrize("attack", [SHRINK_RECORDER, SKIP_LOOP], ids=["shrunk_recorder", "skipped_loop"])
def test_a_swapped_worker_method_fails_timers_on_cuda(launcher, write, attack):
    report = _vet(write, launcher, "swapped", "import torch\n" + attack + TRITON_GEMM)
    timers = report.finding(CheckId.TIMERS)
    assert report.verdict is Verdict.REJECT and timers.status is Status.FAIL, [f.summary for f in report.failed]
    assert_judge_healthy(launcher)


def test_inputs_read_ahead_from_the_workers_frames_are_slow_when_unseen_on_cuda(launcher, write):
    # its answers are PyTorch ops (the product, the copy of a remembered answer): the claim under
    # test is caching's, so the library policy is off
    text = "import torch\nfrom torch import nn\n" + PRECOMPUTE
    report = _vet(write, launcher, "precompute", text, library_policy="off")
    caching = report.finding(CheckId.CACHING)
    assert report.verdict is Verdict.REJECT and caching.status is Status.FAIL, [f.summary for f in report.failed]
    assert_judge_healthy(launcher)
