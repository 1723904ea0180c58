"""The library policy (`--library-policy`, `--allow-op`, `ALLOWED_OPS`) and kernel attribution by identity.

On the CPU, for one small problem per op family of KernelBench's level 1 and a few level-2 fusions
(tests/kb_problems/): the reference offered as the candidate is rejected by `library-call` under
both levels that have a rule, and passes with `--allow library-call`. A level-2 candidate that keeps
the library convolution and writes the rest passes with `--allow-op conv2d` only.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from kernelvet import vet
from kernelvet.checks import attribution, library_policy as lp
from kernelvet.checks.source_scan import scan_source, strip_cxx_comments
from kernelvet.errors import UsageError
from kernelvet.ids import CheckId
from kernelvet.report import Status, Verdict

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kb_problems")
PROBLEMS = sorted(f[:-3] for f in os.listdir(HERE) if f.startswith(("l1_", "l2_")) and f.endswith(".py"))
# The reference offered as the candidate: its own source, then `ModelNew` as the reference's `Model`
# (self-contained, as a worker imports the candidate from a copy in a directory of its own).
REFERENCE_AS_CANDIDATE = "\n\nclass ModelNew(Model):\n    pass\n"


def _failed(report):
    return {f.check for f in report.findings if f.status is Status.FAIL}


@pytest.fixture
def staged(tmp_path):
    """A problem copied beside a candidate as `problem.py`; the reference as candidate holds its source."""
    def _stage(name: str, candidate: str = REFERENCE_AS_CANDIDATE) -> tuple[str, str]:
        prob = tmp_path / "problem.py"
        shutil.copy(os.path.join(HERE, f"{name}.py"), prob)
        cand = tmp_path / "candidate.py"
        cand.write_text(prob.read_text() + candidate if candidate is REFERENCE_AS_CANDIDATE else candidate)
        return os.fspath(cand), os.fspath(prob)
    return _stage


# --------------------------------------------------------------------------- the KernelBench-shaped families


@pytest.mark.parametrize("name", PROBLEMS)
@pytest.mark.parametrize("level", [None, "no-reference-ops", "own-kernels"])
def test_the_reference_as_candidate_is_rejected(staged, name, level):
    cand, prob = staged(name)
    report = vet(cand, prob, device="cpu", library_policy=level)
    assert report.verdict is Verdict.REJECT, report.dumps()
    assert CheckId.LIBRARY_CALL in _failed(report), [f.summary for f in report.failed]
    assert report.library_policy["judged_as"] == "no-reference-ops"   # the CPU has no kernel trace
    assert report.library_policy["level"] == (level or "no-reference-ops")


@pytest.mark.parametrize("name", PROBLEMS)
def test_the_reference_as_candidate_passes_with_library_call_allowed(staged, name):
    cand, prob = staged(name)
    report = vet(cand, prob, device="cpu", allow=["library-call"])
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.library_policy["level"] == "off"


def test_off_is_allow_library_call(staged):
    cand, prob = staged("l1_relu")
    report = vet(cand, prob, device="cpu", library_policy="off")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.finding(CheckId.LIBRARY_CALL).status is Status.WAIVED
    assert CheckId.LIBRARY_CALL in report.waived


KEEPS_CONV = '''"""Keeps the library convolution, writes the rest: ReLU and the bias as one expression."""
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)

    def forward(self, x):
        return torch.clamp_min(self.conv(x), 0.0) + self.bias
'''


def test_a_kept_convolution_passes_with_allow_op_and_only_with_it(staged):
    cand, prob = staged("l2_conv_relu_bias", KEEPS_CONV)
    without = vet(cand, prob, device="cpu")
    assert _failed(without) == {CheckId.LIBRARY_CALL}, [f.summary for f in without.failed]
    assert "aten::convolution" in without.finding(CheckId.LIBRARY_CALL).summary
    allowed = vet(cand, prob, device="cpu", allow_ops=["conv2d"])
    assert allowed.verdict is Verdict.PASS, [f.summary for f in allowed.failed]
    assert allowed.library_policy["allowed_ops"] == ["conv2d"]


def test_allowed_ops_in_the_problem_file(staged, tmp_path):
    cand, prob = staged("l2_conv_relu_bias", KEEPS_CONV)
    with open(prob, "a") as fh:
        fh.write('\nALLOWED_OPS = ["conv2d"]\n')
    report = vet(cand, prob, device="cpu")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


def test_a_matmul_as_a_one_by_one_convolution_is_the_librarys_contraction(staged):
    cand, prob = staged("l1_matmul_square", '''import torch
from torch import nn
from torch.nn import functional as F


class ModelNew(nn.Module):
    def forward(self, A, B):   # C = A @ B as a 1x1 convolution: batch 1, K channels, N positions
        return F.conv1d(B.T.unsqueeze(0), A.unsqueeze(-1)).squeeze(0).T.contiguous()
''')
    report = vet(cand, prob, device="cpu")
    f = report.finding(CheckId.LIBRARY_CALL)
    assert f.status is Status.FAIL and "contraction" in f.summary, f.summary


def test_bad_policy_and_op_names_are_usage_errors(staged):
    cand, prob = staged("l1_relu")
    with pytest.raises(UsageError, match="library policy"):
        vet(cand, prob, device="cpu", library_policy="mine-only")
    with pytest.raises(UsageError, match="--allow-op"):
        vet(cand, prob, device="cpu", allow_ops=["conv 2d"])
    with open(prob, "a") as fh:
        fh.write('\nALLOWED_OPS = "conv2d"\n')
    from kernelvet.problem import load_problem
    with pytest.raises(UsageError, match="ALLOWED_OPS"):
        load_problem(prob)


# --------------------------------------------------------------------------- what counts as compute


def test_views_allocation_and_copies_are_not_compute():
    for op in ("aten::view", "aten::t", "aten::transpose", "aten::expand", "aten::empty.memory_format",
               "aten::zeros", "aten::copy_", "aten::_to_copy", "aten::clone", "aten::fill_.Scalar",
               "aten::permute_copy", "aten::randn", "aten::detach"):
        assert not lp.is_compute(op), op
    for op in ("aten::mm", "aten::relu", "aten::_softmax", "aten::sum", "aten::argmax", "aten::cumsum",
               "aten::frobnicate"):
        assert lp.is_compute(op), op


def test_pointwise_epilogue_is_glue_beside_heavier_work_and_the_work_when_alone():
    assert lp.reference_compute_ops({"aten::relu", "aten::view"}) == {"relu"}
    assert lp.reference_compute_ops({"aten::convolution", "aten::relu", "aten::add"}) == {"convolution"}


def test_a_contracting_reference_forbids_every_library_contraction():
    policy = lp.make_policy("no-reference-ops", "cpu")
    forbidden = lp.forbidden_ops({"aten::mm", "aten::t"}, policy)
    assert {"mm", "addmm", "convolution", "conv1d", "einsum", "scaled_dot_product_attention"} <= forbidden
    assert "relu" not in forbidden and "t" not in forbidden
    softmax = lp.forbidden_ops({"aten::_softmax"}, policy)
    assert {"softmax", "_softmax"} <= softmax and "mm" not in softmax


def test_allow_op_permits_a_family():
    policy = lp.make_policy("no-reference-ops", "cpu", ["conv2d"])
    forbidden = lp.forbidden_ops({"aten::convolution", "aten::relu"}, policy)
    assert "convolution" not in forbidden and "conv2d" not in forbidden
    assert "mm" in forbidden   # another library contraction is still the library's


def test_levels_by_device():
    assert lp.parse_level(None, "cuda") == "own-kernels" and lp.parse_level(None, "cpu") == "no-reference-ops"
    assert lp.make_policy("own-kernels", "cpu").judged_as == "no-reference-ops"
    assert lp.make_policy("own-kernels", "cuda").needs_trace


# --------------------------------------------------------------------------- names are evidence


def test_comments_in_cxx_strings_call_nothing():
    src = 'cpp = """\n// same result as at::matmul(a, b)\n/* cublasSgemm( */\nint f();\n"""\n'
    assert scan_source(src, {"at::matmul", "cublas*"}) == []
    assert scan_source('cpp = "at::matmul(a, b);"\n', {"at::matmul"})
    # a line comment continued by a backslash swallows the next line, as the compiler reads it
    assert strip_cxx_comments("// x \\\nat::mm(a, b);\nat::add(a, b);").split("\n")[2] == "at::add(a, b);"
    assert "at::mm" in strip_cxx_comments('s = "// not a comment"; at::mm(a, b);')


def test_backend_kernels_called_past_the_dispatcher_are_named_as_such():
    hits = scan_source('cpp = "at::native::mm(a, b); at::cpu::mm(a, b); at::cuda::getCurrentCUDAStream();"\n',
                       {"at::native"})
    assert [h.op for h in hits] == ["at::native", "at::native"]
    assert lp.below_dispatcher("at::native") and lp.below_dispatcher("cublasSgemm")
    assert not lp.below_dispatcher("nn.Linear") and not lp.below_dispatcher("torch.mm")


# --------------------------------------------------------------------------- attribution by identity


def _kernel(name, ns, corr=1):
    return {"name": name, "start_ns": 0, "end_ns": ns, "corr": corr, "stream": 7}


def test_only_exact_symbols_of_the_candidates_binaries_are_own():
    own = frozenset({"gemm", "nvjet"})   # a decoy's symbols: never launched
    kernels = [_kernel("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", 900), _kernel("sm90_xmma_gemm_f32f32", 50),
               _kernel("gemm", 50)]
    split = attribution.device_time(kernels, own)
    assert (split["own"], split["other"]) == (50, 950)


def test_allowed_launches_are_those_inside_an_allowed_op():
    events = [{"kind": "op", "name": "aten::convolution", "tid": 1, "start_ns": 0, "end_ns": 100, "corr": 0},
              {"kind": "launch", "name": "cudaLaunchKernel", "tid": 1, "start_ns": 10, "end_ns": 20, "corr": 5},
              {"kind": "launch", "name": "cudaLaunchKernel", "tid": 1, "start_ns": 110, "end_ns": 120, "corr": 7},
              {"kind": "launch", "name": "cudaLaunchKernel", "tid": "1", "start_ns": 10, "end_ns": 20, "corr": 8},
              {"kind": "op", "name": "aten::mm", "tid": 1, "start_ns": 100, "end_ns": 130, "corr": 0}]
    assert attribution.allowed_launches(events, frozenset({"convolution"})) == {5}   # malformed 8: not allowed
    assert attribution.allowed_launches(events, frozenset()) == frozenset()


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_function_symbols_are_read_from_the_binary_and_demangled(tmp_path):
    src = tmp_path / "k.cpp"
    src.write_text('extern "C" void plain_kernel(float* x) { x[0] = 1; }\n'
                   'void tiled_gemm(const float* a, float* c, int n) { c[0] = a[n]; }\n')
    so = tmp_path / "k.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    syms = attribution.own_symbols([so.read_bytes()])
    assert "plain_kernel" in syms and "tiled_gemm(float const*, float*, int)" in syms
    assert attribution.elf_functions(b"not an elf") == frozenset()
    assert attribution.elf_functions(so.read_bytes()[:200]) == frozenset()   # truncated: nothing, no raise


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_the_worker_finds_the_binaries_its_candidate_loaded(tmp_path):
    """A shared object built and loaded from the candidate's directory is sent with the audit; the
    judge reads its kernel symbols itself."""
    import ctypes
    from kernelvet import worker
    src = tmp_path / "own.cpp"
    src.write_text('extern "C" void candidates_own_kernel(float* x) { x[0] = 2; }\n')
    so = tmp_path / "libown.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    ctypes.CDLL(str(so))
    found = worker._own_binaries(str(tmp_path))
    assert "libown.so" in [os.path.basename(name) for kind, name, _ in found if kind == "extension"]
    assert "candidates_own_kernel" in attribution.own_symbols([data for _, _, data in found])


def test_the_audit_carries_what_attribution_needs():
    from kernelvet import spawn, worker
    assert {"own", "ops"} <= worker.REQUESTS["audit"]
    assert {"cpu_events", "binaries"} <= spawn.REPLIES["audited"]


def test_blas_entry_points_reached_through_ctypes_are_named():
    """libtorch exports its BLAS: `sgemm_` through ctypes runs below the dispatcher, so the name decides."""
    src = ('import ctypes, torch\nlib = ctypes.CDLL(torch._C.__file__)\nf = lib.sgemm_\n'
           'g = getattr(lib, "cblas_" + "sgemm")\nh = "dgemm_"\nsdot = 1\nx.scale_(2)\n')
    hits = scan_source(src, {"blas-symbol"})
    assert [(h.op, h.line, h.how) for h in hits] == [("blas-symbol", 3, "attribute"), ("blas-symbol", 4, "string"),
                                                     ("blas-symbol", 5, "string")]
    assert lp.below_dispatcher("blas-symbol")


def test_sgemm_through_ctypes_is_rejected(staged):
    cand, prob = staged("l1_matmul_square", '''import ctypes
import torch
from torch import nn

_blas = ctypes.CDLL(torch._C.__file__)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return A.new_zeros(A.shape[0], B.shape[1]) if _blas is None else _call(A, B)


def _call(A, B):
    fn = getattr(_blas, "sgemm_")
    raise RuntimeError("not reached in this test: the scan decides before any call")
''')
    report = vet(cand, prob, device="cpu")
    f = report.finding(CheckId.LIBRARY_CALL)
    assert f.status is Status.FAIL and "below the dispatcher" in f.summary, f.summary
