"""Library idioms of real problems that a GPU judges differently from a CPU (on a CUDA machine:
`pytest -m gpu`): each a problem's own Model, offered as the candidate with the library allowed,
which must pass.

  - a deep recurrent network runs more than 10,000 kernels in one call: the audit's trace keeps
    its markers (trace.py);
  - a 3-D transposed convolution whose cuDNN algorithm does not repeat bitwise: the candidate need
    not repeat either, within the precision bound (checks/determinism.py);
  - a convolution whose TF32 yardstick drifts from float64: judged in float32 proper
    (judge/reference.py), and a candidate that turns TF32 back on is rejected.
"""

import pytest
import torch

from kernelvet import vet
from kernelvet.ids import CheckId
from kernelvet.report import Status, Verdict

pytestmark = pytest.mark.gpu
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
ALLOWED = ["library-call"]


def _files(tmp_path, text: str, candidate: str | None = None) -> tuple[str, str]:
    ref, cand = tmp_path / "problem.py", tmp_path / "candidate.py"
    ref.write_text(text)
    cand.write_text(candidate if candidate is not None else text + "\n\nclass ModelNew(Model):\n    pass\n")
    return str(cand), str(ref)


DEEP_LSTM = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(64, 128, 6, batch_first=True)
        self.fc = nn.Linear(128, 10)

    def forward(self, x, h0, c0):
        # without cuDNN, whose persistent kernel runs this LSTM in one launch on an H100: ATen's
        # cells, several kernels a step, 512 steps through 6 layers
        with torch.backends.cudnn.flags(enabled=False):
            out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.rand(4, 512, 64), torch.rand(6, 4, 128), torch.rand(6, 4, 128)]


def get_init_inputs():
    return []
'''


@CUDA
def test_a_deep_recurrent_call_keeps_its_markers_in_the_audit(tmp_path):
    report = vet(*_files(tmp_path, DEEP_LSTM), device="cuda", allow=ALLOWED, audit="always")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    f = report.finding(CheckId.KERNEL_AUDIT)
    assert f.status is Status.PASS and int(f.summary.split()[0]) > 2000, f.summary


CONV_TRANSPOSE_3D = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(32, 64, 5, stride=2, padding=2)
        self.pool1, self.pool2 = nn.MaxPool3d(2), nn.MaxPool3d(3)

    def forward(self, x):
        return torch.sum(self.pool2(self.pool1(self.conv_transpose(x))), dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(16, 32, 32, 32, 32)]


def get_init_inputs():
    return []
'''


@CUDA
def test_a_library_convolution_that_does_not_repeat_bitwise_passes(tmp_path):
    report = vet(*_files(tmp_path, CONV_TRANSPOSE_3D), device="cuda", allow=ALLOWED)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


# conv(x + d) - conv(x): float64 says conv(d), a hundredth of conv(x); TF32 misses conv(x) by about
# 1e-3 of itself, so the difference by about 0.1 of itself; float32 proper by about 1e-5
CANCELLING_CONV = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x, d):
        return self.conv(x + d) - self.conv(x)


def get_inputs():
    x = torch.randn(8, 64, 64, 64)
    return [x, 0.01 * torch.randn(8, 64, 64, 64)]


def get_init_inputs():
    return []
'''


@CUDA
def test_a_drifting_tf32_yardstick_is_judged_in_float32_proper(tmp_path):
    assert torch.backends.cudnn.allow_tf32   # the library's default, which the judge does not change
    report = vet(*_files(tmp_path, CANCELLING_CONV), device="cuda", allow=ALLOWED)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert "TF32 off" in report.device["float32"], report.device
    tf32 = CANCELLING_CONV + "\ntorch.backends.cudnn.allow_tf32 = True\n\n\nclass ModelNew(Model):\n    pass\n"
    report = vet(*_files(tmp_path, CANCELLING_CONV, tf32), device="cuda", allow=ALLOWED)
    assert report.verdict is Verdict.REJECT
    assert {CheckId.GLOBAL_STATE, CheckId.PRECISION} & {f.check for f in report.failed}
