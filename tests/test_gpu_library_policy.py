"""The library policy on a real GPU (on a CUDA machine: `pytest -m gpu`).

Under the CUDA default, `own-kernels`: the corpus's device-agnostic honest kernels (compositions of
PyTorch ops) are rejected by policy, and only by it; the honest Triton and inline CUDA kernels pass,
with the share of device time in their own kernels as evidence; cuBLAS through ctypes beside decoy
kernels is not the candidate's time. The reference offered as the candidate is rejected, and passes
with library-call waived; a kept convolution with its epilogue in Triton passes with --allow-op conv2d.
"""

import os

import pytest

from kernelvet import vet
from kernelvet.checks.library_policy import OWN_SHARE_MIN
from kernelvet.ids import CheckId
from kernelvet.practice import by_name, entries
from kernelvet.report import Status, Verdict

from .matrix import FULL, failed, vet_entry

pytestmark = pytest.mark.gpu

KB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kb_problems")
COMPOSITIONS = [e for e in entries("cuda", "honest") if e.library_policy is not None]
OWN = [e for e in entries("cuda", "honest") if e.library_policy is None]


@pytest.mark.parametrize("entry", COMPOSITIONS, ids=lambda e: e.name)
def test_a_composition_of_pytorch_ops_is_rejected_by_policy_alone(entry):
    report = vet_entry(entry, "cuda", library_policy=None)
    assert failed(report) == {CheckId.LIBRARY_CALL}, [f.summary for f in report.failed]
    f = report.finding(CheckId.LIBRARY_CALL)
    assert "composition" in f.summary and f.evidence["own_share"] < OWN_SHARE_MIN, f.summary


@pytest.mark.parametrize("entry", OWN, ids=lambda e: e.name)
def test_own_kernels_pass_with_their_share_as_evidence(entry):
    report = vet_entry(entry, "cuda", library_policy="own-kernels")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    f = report.finding(CheckId.LIBRARY_CALL)
    assert "of device time in the candidate's own kernels" in f.summary and f.evidence["own_share"] >= OWN_SHARE_MIN
    assert f.evidence["own_kernel_symbols"], f.evidence


@pytest.mark.parametrize("name", ["ctypes_cublas", "decoy_kernel"])
def test_library_kernels_beside_decoys_are_not_own_time(name):
    report = vet_entry(by_name(name), "cuda", library_policy="own-kernels")
    f = report.finding(CheckId.LIBRARY_CALL)
    assert f.status is Status.FAIL and f.evidence["own_share"] < OWN_SHARE_MIN, f.summary


DECOYS_AROUND_CUBLAS = '''
import ctypes
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def gemm(x_ptr):          # never launched: names a substring match would have taken for cuBLAS's
    pass


@triton.jit
def nvjet(x_ptr):
    pass


@triton.jit
def xmma(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
'''


def test_never_launched_decoys_named_like_vendor_kernels_own_nothing(tmp_path):
    path = tmp_path / "decoys.py"
    path.write_text(DECOYS_AROUND_CUBLAS)
    report = vet(os.fspath(path), "matmul", device="cuda", settings=FULL)
    f = report.finding(CheckId.LIBRARY_CALL)
    assert f.status is Status.FAIL and f.evidence["device_ns"]["own"] == 0, f.summary


# The reference offered as the candidate: its own source, then `ModelNew` as the reference's `Model`
# (self-contained, as a worker imports the candidate from a copy in a directory of its own).
REFERENCE_AS_CANDIDATE = "\n\nclass ModelNew(Model):\n    pass\n"


@pytest.mark.parametrize("name", ["l1_matmul_square", "l1_conv2d", "l1_softmax", "l1_layernorm", "l1_relu",
                                  "l1_cumsum", "l1_attention", "l2_gemm_gelu_scale", "l2_convtranspose_clamp"])
def test_the_reference_as_candidate_on_cuda(tmp_path, name):
    import shutil
    shutil.copy(os.path.join(KB, f"{name}.py"), tmp_path / "problem.py")
    (tmp_path / "cand.py").write_text((tmp_path / "problem.py").read_text() + REFERENCE_AS_CANDIDATE)
    cand, prob = os.fspath(tmp_path / "cand.py"), os.fspath(tmp_path / "problem.py")
    for level in (None, "no-reference-ops"):
        report = vet(cand, prob, device="cuda", library_policy=level)
        assert CheckId.LIBRARY_CALL in failed(report), (level, [f.summary for f in report.failed])
    report = vet(cand, prob, device="cuda", allow=["library-call"])
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


KEEPS_CONV_TRITON = '''
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def relu_bias_kernel(y_ptr, b_ptr, out_ptr, n, hw, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask)
    b = tl.load(b_ptr + (offs // hw) % c, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(y, 0.0) + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)

    def forward(self, x):
        y = self.conv(x).contiguous()
        out = torch.empty_like(y)
        n, c, hw = y.numel(), y.shape[1], y.shape[2] * y.shape[3]
        relu_bias_kernel[(triton.cdiv(n, 1024),)](y, self.bias.contiguous(), out, n, hw, c, BLOCK=1024)
        return out
'''


def test_a_kept_convolution_with_its_epilogue_in_triton_needs_allow_op(tmp_path):
    import shutil
    shutil.copy(os.path.join(KB, "l2_conv_relu_bias.py"), tmp_path / "problem.py")
    (tmp_path / "cand.py").write_text(KEEPS_CONV_TRITON)
    cand, prob = os.fspath(tmp_path / "cand.py"), os.fspath(tmp_path / "problem.py")
    without = vet(cand, prob, device="cuda", settings=FULL)
    assert failed(without) == {CheckId.LIBRARY_CALL}, [f.summary for f in without.failed]
    allowed = vet(cand, prob, device="cuda", allow_ops=["conv2d"], settings=FULL)
    assert allowed.verdict is Verdict.PASS, [f.summary for f in allowed.failed]
    assert "in allowed ops (conv2d)" in allowed.finding(CheckId.LIBRARY_CALL).summary
