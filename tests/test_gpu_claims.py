"""The worker's numbers are claims, on a real GPU (on a CUDA machine: `pytest -m gpu`): the
attacks of test_claims.py that rewrite the worker from inside it, on a Triton GEMM that passes
everything alone, under the default confinement and the CUDA default library policy. A recorder
swapped to shrink its event times, and a judge-clocked loop swapped to skip its calls, fail
`timers`; a read-ahead of every set the worker holds is slow on the unseen ones (`caching`), and a
memo whose worker reports its pairs' unseen reps at their seen reps' times is slow on them by the
judge's clock (`caching`)."""

import pytest

from kernelvet import spawn, vet
from kernelvet.ids import CheckId
from kernelvet.problem import load_problem
from kernelvet.report import Status, Verdict

from .test_claims import FORGE_PAIR_REPLIES, PRECOMPUTE, SHRINK_RECORDER, SKIP_LOOP
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


def _vet(write, launcher, name, text, problem="matmul", **kw):
    return vet(write(f"{name}.py", text), problem, device="cuda", timeout=300, launcher=launcher, **kw)


GEMM_2048 = load_problem("matmul", (2048, 2048, 2048))


def test_the_triton_gemm_the_attacks_are_built_on_passes(launcher, write):
    report = _vet(write, launcher, "gemm", TRITON_GEMM)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


@pytest.mark.parametrize("attack", [SHRINK_RECORDER, SKIP_LOOP], ids=["shrunk_recorder", "skipped_loop"])
def test_a_swapped_worker_method_fails_timers_on_cuda(launcher, write, attack):
    # at 2048^3 a call (about a millisecond) stands above the launch slack the judge's clock allows
    # per call (0.15 ms); at 256^3 a recorder shrunk 300x stays under it (and fails a roofline)
    report = _vet(write, launcher, "swapped", "import torch\n" + attack + TRITON_GEMM, problem=GEMM_2048)
    timers = report.finding(CheckId.TIMERS)
    assert report.verdict is Verdict.REJECT and timers.status is Status.FAIL, [f.summary for f in report.failed]
    assert_judge_healthy(launcher)


def test_inputs_read_ahead_from_the_workers_frames_are_slow_when_unseen_on_cuda(launcher, write):
    # the product is the Triton GEMM, at 4096^3: on an 80 GB H100 at 2048^3 a miss (1.0-1.2 ms) was
    # only 2.4-2.9x a hit (the frame walk, four sums read back, a copy: 0.3-0.5 ms), at caching's
    # 2.5x threshold, and the test went either way; at 256^3 the sums cost more than a product saves.
    # The copy of a remembered answer is a PyTorch op, and the claim under test is caching's, so the
    # library policy is off
    text = ("import torch\nfrom torch import nn\nfrom kernelvet.practice import kernels\n" + PRECOMPUTE
            + "\ndef _product(A, B):\n    return kernels.matmul(A, B, ieee=True)\n")
    report = _vet(write, launcher, "precompute", text, problem=load_problem("matmul", (4096,) * 3),
                  library_policy="off")
    caching = report.finding(CheckId.CACHING)
    assert report.verdict is Verdict.REJECT and caching.status is Status.FAIL, [f.summary for f in report.failed]
    assert_judge_healthy(launcher)


# A value-keyed memo around the Triton GEMM (a hit: four sums read back; a miss: the product),
# whose worker reports each pair's unseen rep at its seen rep's time.
FORGED_PAIRS_GEMM = "import torch\nfrom torch import nn\nfrom kernelvet.practice import kernels\n" + FORGE_PAIR_REPLIES + """
_answers = {}
class ModelNew(nn.Module):
    def forward(self, A, B):
        key = (float(A.sum()), float(B.sum()), float(A[::7].sum()), float(B[:, ::5].sum()))
        hit = _answers.get(key)
        if hit is None:
            hit = _answers[key] = kernels.matmul(A, B, ieee=True)
        return hit.clone()
"""


def test_forged_pair_times_are_slow_by_the_judges_clock_on_cuda(launcher, write):
    # at 4096^3 a miss (the IEEE GEMM, 3.3 ms on the H200) is 14 hits (four sums read back and a
    # copy, 0.23 ms); at 2048^3 it is 2 (0.41 against 0.22 ms), which caching does not call
    # remembering on any clock. The hits are PyTorch ops, and the claim under test is caching's:
    # the library policy is off
    report = _vet(write, launcher, "forged_pairs", FORGED_PAIRS_GEMM, problem=load_problem("matmul", (4096,) * 3),
                  library_policy="off")
    caching = report.finding(CheckId.CACHING)
    # where it passes, what each clock made of the pairs: the judge's bound, its unseen reps, the controls
    said = {k: caching.evidence.get(k) for k in ("judge_pairs", "pairs", "controls", "net_pairs")}
    assert report.verdict is Verdict.REJECT and caching.status is Status.FAIL, ([f.summary for f in report.failed], said)
    assert caching.evidence.get("by_judge_clock"), caching.summary
    assert_judge_healthy(launcher)
