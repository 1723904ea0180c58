"""CUDA-specific endings on a real GPU (`pytest -m gpu` on a CUDA machine).

An illegal address poisons the CUDA context of the process that made it: the worker can do
nothing more on the device, the judge must say so, and the next candidate, in a fresh worker on
the same GPU, vets normally. Device out-of-memory is a reject with the reason, too.
"""

import textwrap

import pytest

from kernelvet import vet
from kernelvet.ids import CheckId
from kernelvet.practice import by_name
from kernelvet.report import Status, Verdict

pytestmark = pytest.mark.gpu

ILLEGAL_ADDRESS = '''
    import torch, triton, triton.language as tl
    from torch import nn

    @triton.jit
    def wild_store(out_ptr, far):
        tl.store(out_ptr + far, 1.0)   # 8 TB past the output: outside every mapping

    class ModelNew(nn.Module):
        def forward(self, A, B):
            out = torch.empty(A.shape[0], B.shape[1], device=A.device)
            wild_store[(1,)](out, 1 << 40)
            return out
'''

DEVICE_OOM = '''
    import torch
    from torch import nn

    class ModelNew(nn.Module):
        def forward(self, A, B):
            hoard = []
            while True:   # until the device says no
                hoard.append(torch.empty(8 << 30, dtype=torch.uint8, device=A.device))
'''


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _healthy_next():
    honest = by_name("triton_gemm_ieee")
    report = vet(honest.path, "matmul", device="cuda", audit="never")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


@pytest.mark.parametrize("source, words", [(ILLEGAL_ADDRESS, ("illegal", "ended")),
                                           (DEVICE_OOM, ("out of memory", "ended"))], ids=["illegal-address", "device-oom"])
def test_cuda_ending_is_a_reject_and_the_next_vet_is_healthy(tmp_path, source, words):
    report = vet(_write(tmp_path, "candidate.py", source), "matmul", device="cuda", timeout=120)
    assert report.verdict is Verdict.REJECT
    worker = report.finding(CheckId.WORKER)
    assert worker.status is Status.FAIL
    assert any(w in worker.summary.lower() for w in words), worker.summary
    _healthy_next()
