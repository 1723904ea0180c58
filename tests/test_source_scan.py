"""Static library-call scan: every spelling it must see, and the honest code it must leave alone."""

from __future__ import annotations

import keyword
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelvet.checks.source_scan import DEFAULT_FORBIDDEN, SourceHit, forbidden_for_aten_ops, scan_source


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _ops(source: str, forbidden=DEFAULT_FORBIDDEN) -> list[tuple[str, int, str]]:
    return [(h.op, h.line, h.how) for h in scan_source(source, forbidden)]


# (source, canonical op, line, how): each must appear among the hits.
FOUND = [
    # plain torch spellings
    ("import torch\ny = torch.mm(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = torch.matmul(a, b)\n", "torch.matmul", 2, "call"),
    ("import torch\ny = torch.bmm(a, b)\n", "torch.bmm", 2, "call"),
    ("import torch\ny = torch.einsum('ik,kj->ij', a, b)\n", "torch.einsum", 2, "call"),
    ("import torch\ny = torch.addmm(c, a, b)\n", "torch.addmm", 2, "call"),
    ("import torch\ny = torch.baddbmm(c, a, b)\n", "torch.baddbmm", 2, "call"),
    ("import torch\ny = torch.tensordot(a, b, 1)\n", "torch.tensordot", 2, "call"),
    ("import torch\ny = torch.mv(a, v)\n", "torch.mv", 2, "call"),
    ("import torch\ny = torch.dot(u, v)\n", "torch.dot", 2, "call"),
    ("import torch\ny = torch.inner(u, v)\n", "torch.inner", 2, "call"),
    ("import torch\ny = torch.linalg.matmul(a, b)\n", "torch.linalg.matmul", 2, "call"),
    ("import torch\ny = torch.chain_matmul(a, b, c)\n", "torch.chain_matmul", 2, "call"),
    ("import torch\ny = torch.linalg.multi_dot([a, b])\n", "torch.linalg.multi_dot", 2, "call"),
    ("import torch\ny = torch.nn.functional.linear(x, w)\n", "F.linear", 2, "call"),
    ("import torch\ny = torch.nn.functional.bilinear(x, z, w)\n", "F.bilinear", 2, "call"),
    ("import torch\nself.fc = torch.nn.Linear(4, 4)\n", "nn.Linear", 2, "call"),
    ("import torch.nn as nn\nclass M(nn.Linear):\n    pass\n", "nn.Linear", 2, "attribute"),
    ("import torch\ny = torch.Tensor.mm(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = torch._C._nn.linear(x, w)\n", "F.linear", 2, "call"),
    # tensor methods, whatever the receiver
    ("y = x.matmul(w)\n", "torch.matmul", 1, "call"),
    ("y = x.mm(w)\n", "torch.mm", 1, "call"),
    ("y = x.bmm(w)\n", "torch.bmm", 1, "call"),
    ("y = c.addmm(a, b)\n", "torch.addmm", 1, "call"),
    ("c.addmm_(a, b)\n", "torch.addmm", 1, "call"),
    ("y = x.__matmul__(w)\n", "torch.matmul", 1, "call"),
    ("y = x.__rmatmul__(w)\n", "torch.matmul", 1, "call"),
    ("y = self.weight.t().mm(x)\n", "torch.mm", 1, "call"),
    ("y = x.mm.__call__(w)\n", "torch.mm", 1, "call"),
    ("f = x.matmul\n", "torch.matmul", 1, "attribute"),
    # operators
    ("y = a @ b\n", "@", 1, "operator"),
    ("y = (a\n     @ b)\n", "@", 2, "operator"),
    ("a @= b\n", "@", 1, "operator"),
    # aten
    ("import torch\ny = torch.ops.aten.mm(a, b)\n", "aten.mm", 2, "call"),
    ("import torch\ny = torch.ops.aten.mm.default(a, b)\n", "aten.mm", 2, "call"),
    ("import torch\ny = torch.ops.aten.addmm.default(c, a, b)\n", "aten.addmm", 2, "call"),
    ("import torch\nf = torch.ops.aten._scaled_mm\n", "aten._scaled_mm", 2, "attribute"),
    ("from torch.ops import aten\ny = aten.bmm.out(a, b, out=c)\n", "aten.bmm", 2, "call"),
    # aliases
    ("import torch as t\ny = t.mm(a, b)\n", "torch.mm", 2, "call"),
    ("from torch import mm as foo\ny = foo(a, b)\n", "torch.mm", 2, "call"),
    ("from torch import mm as foo\ny = foo(a, b)\n", "torch.mm", 1, "import"),
    ("import torch.nn.functional as F\ny = F.linear(x, w)\n", "F.linear", 2, "call"),
    ("from torch.nn import functional as fn\ny = fn.linear(x, w)\n", "F.linear", 2, "call"),
    ("from torch.nn.functional import linear\ny = linear(x, w)\n", "F.linear", 2, "call"),
    ("from torch import nn\nfc = nn.Linear(4, 4)\n", "nn.Linear", 2, "call"),
    ("def f():\n    import torch as tt\n    return 1\ny = tt.bmm(a, b)\n", "torch.bmm", 4, "call"),
    ("import torch\nt = torch\ny = t.mm(a, b)\n", "torch.mm", 3, "call"),
    ("import torch\nF = torch.nn.functional\ny = F.linear(x, w)\n", "F.linear", 3, "call"),
    ("from torch import *\ny = mm(a, b)\n", "torch.mm", 2, "call"),
    ("y = torch.mm(a, b)\n", "torch.mm", 1, "call"),   # torch never imported: still torch
    # dynamic spellings
    ("import torch\ny = getattr(torch, 'mm')(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = getattr(torch, 'm' + 'm')(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = getattr(torch, f'mm')(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = getattr(torch, ''.join(['m', 'm']))(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = getattr(torch, str.join('', ('m', 'm')))(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = getattr(torch, 'MM'.lower())(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = getattr(torch, 'mm'[::1])(a, b)\n", "torch.mm", 2, "call"),
    ("import torch\nname = 'm' * 2\ny = getattr(torch, name)(a, b)\n", "torch.mm", 3, "call"),
    ("import torch\ny = getattr(torch.ops.aten, 'mm')(a, b)\n", "aten.mm", 2, "call"),
    ("import torch\ny = getattr(torch.nn.functional, 'lin' 'ear')(x, w)\n", "F.linear", 2, "call"),
    ("import torch\ny = torch.__dict__['mm'](a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = vars(torch)['mm'](a, b)\n", "torch.mm", 2, "call"),
    ("import torch\ny = torch.__getattribute__('mm')(a, b)\n", "torch.mm", 2, "call"),
    ("y = getattr(x, 'matmul')(w)\n", "torch.matmul", 1, "call"),
    ("import operator\ny = operator.matmul(a, b)\n", "@", 2, "call"),
    ("import operator\nf = operator.imatmul\n", "@", 2, "attribute"),
    ("from operator import matmul\ny = matmul(a, b)\n", "@", 2, "call"),
    ("import operator, torch\ny = operator.attrgetter('mm')(torch)(a, b)\n", "torch.mm", 2, "call"),
    ("import operator\ny = operator.methodcaller('mm', b)(a)\n", "torch.mm", 2, "call"),
    ("import functools, torch\nf = functools.partial(torch.mm)\n", "torch.mm", 2, "attribute"),
    ("import torch\nops = [torch.mm]\n", "torch.mm", 2, "attribute"),
    ("import importlib\ny = importlib.import_module('torch').mm(a, b)\n", "torch.mm", 2, "call"),
    ("import importlib\nm = importlib.import_module('torch')\ny = m.mm(a, b)\n", "torch.mm", 3, "call"),
    ("y = __import__('torch').mm(a, b)\n", "torch.mm", 1, "call"),
    ("import sys\ny = sys.modules['torch'].mm(a, b)\n", "torch.mm", 2, "call"),
    ("y = eval('torch.mm(a, b)')\n", "torch.mm", 1, "call"),
    ("exec('import torch as q\\ny = q.mm(a, b)')\n", "torch.mm", 1, "call"),
    ("exec('y = ' + 'a @ b')\n", "@", 1, "operator"),
    ("code = 'torch.matmul(a, b)'\ny = eval(code)\n", "torch.matmul", 2, "call"),
    ("exec('torch.mm(a, b')\n", "torch.mm", 1, "string"),          # does not parse: scanned as text
    ("exec(\"eval('torch.bmm(a, b)')\")\n", "torch.bmm", 1, "call"),
    # numpy / scipy / cupy
    ("import numpy as np\ny = np.dot(a, b)\n", "numpy.dot", 2, "call"),
    ("import numpy\ny = numpy.matmul(a, b)\n", "numpy.matmul", 2, "call"),
    ("import numpy as np\ny = np.einsum('ij,jk', a, b)\n", "numpy.einsum", 2, "call"),
    ("import numpy as np\ny = np.tensordot(a, b)\n", "numpy.tensordot", 2, "call"),
    ("import numpy as np\ny = np.inner(a, b)\n", "numpy.inner", 2, "call"),
    ("import numpy as np\ny = np.vdot(a, b)\n", "numpy.vdot", 2, "call"),
    ("import numpy as np\ny = np.linalg.multi_dot([a, b])\n", "numpy.linalg.multi_dot", 2, "call"),
    ("import scipy.linalg.blas\n", "scipy.linalg.blas", 1, "import"),
    ("from scipy.linalg.blas import sgemm\n", "scipy.linalg.blas", 1, "import"),
    ("import scipy\ny = scipy.linalg.blas.sgemm(1.0, a, b)\n", "scipy.linalg.blas", 2, "call"),
    ("from scipy.linalg import blas\ny = blas.dgemm(1.0, a, b)\n", "scipy.linalg.blas", 2, "call"),
    ("import cupy\ny = cupy.matmul(a, b)\n", "cupy.matmul", 2, "call"),
    ("import cupy as cp\ny = cp.dot(a, b)\n", "cupy.dot", 2, "call"),
    ("import cupy.cublas\n", "cupy.cublas", 1, "import"),
    ("import cupy\ny = cupy.cublas.gemm('N', 'N', a, b)\n", "cupy.cublas", 2, "call"),
    ("from cupy_backends.cuda.libs import cublas\n", "cupy.cublas", 1, "import"),
    ("import importlib\nb = importlib.import_module('scipy.linalg.blas')\n", "scipy.linalg.blas", 2, "import"),
    # C/C++ in strings
    ("src = 'cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k);'\n", "cublasSgemm", 1, "string"),
    ("src = 'cublasGemmEx(h);'\n", "cublasGemmEx", 1, "string"),
    ("src = 'cublasLtMatmul(lt, desc);'\n", "cublasLtMatmul", 1, "string"),
    ("src = 'cudnnConvolutionForward(h);'\n", "cudnnConvolutionForward", 1, "string"),
    ("src = 'using G = cutlass::gemm::device::Gemm<float>;'\n", "cutlass", 1, "string"),
    ("src = 'rocblas_sgemm(h);'\n", "rocblas_sgemm", 1, "string"),
    ("src = 'hipblasSgemm(h);'\n", "hipblasSgemm", 1, "string"),
    ("src = 'return at::mm(a, b);'\n", "at::mm", 1, "string"),
    ("src = 'return at::bmm(a, b);'\n", "at::bmm", 1, "string"),
    ("src = 'return at::addmm(c, a, b);'\n", "at::addmm", 1, "string"),
    ("src = 'return at::linear(x, w);'\n", "at::linear", 1, "string"),
    ("src = 'return torch::matmul(a, b);'\n", "at::matmul", 1, "string"),
    ("src = 'return torch::mm(a, b);'\n", "at::mm", 1, "string"),
    ("src = 'at::mm_out(c, a, b);'\n", "at::mm", 1, "string"),
    ("src = 'return a.mm(b);'\n", "at::mm", 1, "string"),
    ("src = 'return a.matmul(b);'\n", "at::matmul", 1, "string"),
    ("src = 'auto h = at::cuda::getCurrentCUDABlasHandle();'\n", "at::cuda::blas", 1, "string"),
    ("src = 'at::cuda::blas::gemm<float>(...);'\n", "at::cuda::blas", 1, "string"),
    ("src = 'cub' + 'lasSgemm(h);'\n", "cublasSgemm", 1, "string"),
    ("src = b'cublasSgemm(h);'\n", "cublasSgemm", 1, "string"),
    ("src = f'cublasSgemm(h, {m}, {n});'\n", "cublasSgemm", 1, "string"),
    ("src = '''\nvoid f() {\n  cublasSgemm(h);\n}\n'''\n", "cublasSgemm", 3, "string"),
    ("ext = load_inline('x', '', extra_ldflags=['-lcublas'])\n", "cublas-link", 1, "string"),
    ("ext = load_inline('x', '', extra_ldflags=['-lcublasLt'])\n", "cublas-link", 1, "string"),
    ("ext = load_inline('x', '', libraries=['cublas'])\n", "cublas-link", 1, "string"),
    ("import ctypes\nlib = ctypes.CDLL('libcublas.so.12')\n", "cublas-link", 2, "string"),
    ("import ctypes\nlib = ctypes.CDLL(name)\nlib.cublasSgemm_v2(h)\n", "cublasSgemm_v2", 3, "call"),
    # third-party wrappers over the same op
]


@pytest.mark.parametrize("source, op, line, how", FOUND, ids=[f"{i}:{c[1]}" for i, c in enumerate(FOUND)])
def test_spelling_is_found(source, op, line, how):
    assert (op, line, how) in _ops(source)


# Each must produce no hit at all.
CLEAN = [
    # A function of a module the candidate imports is that module's own (the aten trace sees what it calls).
    "from kernelvet.practice import kernels\nc = kernels.matmul(a, b)\n",
    "import einops\ny = einops.einsum(a, b, 'i k, k j -> i j')\n",
    "import triton.language as tl\nacc += tl.dot(a, b)\n",
    "import triton\nacc = triton.language.dot(a, b)\n",
    "acc = tl.dot(a, b)\n",                                   # tl never imported: still Triton's
    "self.mm_block = 64\ncomm = 3\nx = self.mm_block + comm\n",
    "def matmul(a, b):\n    return a\ny = matmul(a, b)\n",
    "def mm(a, b):\n    return a\ny = mm(a, b)\n",
    '"""Faster than torch.mm; no cublasSgemm here."""\nx = 1\n',
    "def f():\n    '''Calls torch.matmul in prose; at::mm too.'''\n    return 1\n",
    "class C:\n    '''cublasSgemm and torch.mm in a class docstring.'''\n",
    "# torch.mm(a, b)  cublasSgemm\nx = 1  # a @ b\n",
    "msg = 'expected shapes like torch.mm(a, b)'\n",          # Python spelling in prose: not scanned
    "msg = 'use x.mm(y) instead'\n",                          # not C++-looking text
    "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n",
    "import torch\ntorch.set_float32_matmul_precision('high')\n",
    "import torch\ntorch.backends.cudnn.benchmark = True\n",
    "import torch\nx = torch.empty(3).sum()\n",
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport numpy as np\n",
    "y = x.mm_tile(w)\n",
    "class M:\n    def matmul(self, a, b):\n        return a\n"
    "    def forward(self, a, b):\n        return self.matmul(a, b)\n",
    "class M:\n    def __init__(self, k):\n        self.matmul = k\n"
    "    def forward(self, a, b):\n        return self.matmul(a, b)\n",
    "ext = load_inline(name='m', cpp_sources='', functions=['matmul'])\ny = ext.matmul(a, b)\n",
    "class M:\n    def __init__(self):\n        self.ext = load_inline(name='m', cpp_sources='')\n"
    "    def forward(self, a, b):\n        return self.ext.mm(a, b)\n",
    "msg = 'no cublas and no cudnn were harmed'\n",         # library names in prose, not symbols
]


@pytest.mark.parametrize("source", CLEAN)
def test_honest_code_is_clean(source):
    assert scan_source(source) == []


TRITON_GEMM = _src('''
    """A Triton GEMM: the kind of candidate that must pass."""
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl


    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
            acc += tl.dot(a, b)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


    def matmul(a, b):
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        return c


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.mm_block = 64
            torch.backends.cuda.matmul.allow_tf32 = True

        def forward(self, A, B):
            return matmul(A.contiguous(), B.contiguous())
''')


def test_triton_gemm_candidate_is_clean():
    assert scan_source(TRITON_GEMM) == []


_INLINE = '''
    import torch
    import torch.nn as nn
    from torch.utils.cpp_extension import load_inline

    cuda_src = """
    #include <torch/extension.h>
    #include <cublas_v2.h>
    torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b) {
        auto c = torch::empty({a.size(0), b.size(1)}, a.options());
        BODY
        return c;
    }
    """
    cpp_src = "torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b);"
    matmul = load_inline(name="matmul", cpp_sources=cpp_src, cuda_sources=cuda_src,
                         functions=["matmul_cuda"], verbose=False)


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.matmul = matmul

        def forward(self, A, B):
            return self.matmul.matmul_cuda(A, B)
'''


def _inline(body: str) -> str:
    return _src(_INLINE.replace("BODY", body))


def test_load_inline_with_cublas_is_a_string_hit():
    source = _inline("cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n);")
    line = next(i for i, t in enumerate(source.splitlines(), 1) if "cublasSgemm" in t)
    hits = scan_source(source)
    assert [(h.op, h.line, h.how) for h in hits] == [("cublasSgemm", line, "string")]
    assert hits[0].text.startswith("cublasSgemm(handle")


def test_load_inline_with_at_matmul_is_a_string_hit():
    source = _inline("c = at::matmul(a, b);")
    line = next(i for i, t in enumerate(source.splitlines(), 1) if "at::matmul" in t)
    assert _ops(source) == [("at::matmul", line, "string")]


def test_honest_load_inline_candidate_is_clean():
    body = "matmul_kernel<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>());"
    assert scan_source(_inline(body)) == []


def test_hit_fields():
    source = "import torch\n\nclass ModelNew:\n    def forward(self, a, b):\n        return torch.mm(a, b)   # fast\n"
    assert scan_source(source) == [SourceHit("torch.mm", 5, 15, "return torch.mm(a, b)   # fast", "call")]


def test_text_is_capped_and_columns_count_characters():
    source = "é = 1; y = a @ b  # " + "x" * 200 + "\n"
    (hit,) = scan_source(source)
    assert hit.col == source.index("@") and len(hit.text) == 120


def test_hits_are_sorted_and_unique():
    source = "import torch\ny = b @ c; z = torch.mm(a, b)\nw = x.bmm(y)\nv = a @ b\n"
    hits = scan_source(source)
    assert [(h.line, h.col) for h in hits] == sorted((h.line, h.col) for h in hits)
    assert len(hits) == len(set(hits)) == 4


def test_forbidden_set_is_respected():
    source = "import torch\ny = torch.softmax(x, -1)\nz = x.softmax(-1)\nw = torch.mm(a, b)\n"
    assert _ops(source, {"torch.softmax"}) == [("torch.softmax", 2, "call"), ("torch.softmax", 3, "call")]
    assert _ops(source, "torch.softmax") == _ops(source, {"torch.softmax"})   # a lone name, not its letters
    assert _ops("y = a @ b\n", {"torch.mm"}) == []
    assert _ops("import torch.nn.functional as F\nF.softmax(x, -1)\n", {"F.softmax"}) == [("F.softmax", 2, "call")]
    assert _ops("import torch\ntorch.conv2d(x, w)\n", {"torch.conv2d"}) == [("torch.conv2d", 2, "call")]
    assert _ops("import torch\ntorch.ops.aten.convolution(x)\n", {"aten.convolution"}) == \
        [("aten.convolution", 2, "call")]


def test_prefix_patterns():
    src = "s = 'cublasLtMatmul(); cudnnSoftmaxForward(); rocblas_gemm_ex(); hipblasLtMatmul();'\n"
    assert {op for op, _, _ in _ops(src)} == {"cublasLtMatmul", "cudnnSoftmaxForward", "rocblas_gemm_ex",
                                              "hipblasLtMatmul"}
    assert {op for op, _, _ in _ops(src, {"cudnn*"})} == {"cudnnSoftmaxForward"}


def test_default_forbidden_covers_the_matmul_family():
    for name in ("torch.mm", "torch.matmul", "@", "F.linear", "nn.Linear", "aten.mm", "aten.addmm",
                 "aten._scaled_mm", "at::mm", "numpy.dot", "scipy.linalg.blas", "cupy.cublas", "cublas*",
                 "cudnn*", "cutlass", "rocblas*", "hipblas*"):
        assert name in DEFAULT_FORBIDDEN
    assert "torch.softmax" not in DEFAULT_FORBIDDEN and "torch.conv2d" not in DEFAULT_FORBIDDEN


def test_forbidden_for_aten_ops():
    mm = forbidden_for_aten_ops(["aten::mm"])
    assert {"torch.mm", "torch.matmul", "@", "aten.mm", "F.linear", "nn.Linear", "at::mm", "cublas*"} <= mm
    assert forbidden_for_aten_ops(["aten.addmm.default"]) == mm == forbidden_for_aten_ops(["mm"])
    assert forbidden_for_aten_ops(["torch.ops.aten.bmm.default", "aten::linear"]) == mm
    sm = forbidden_for_aten_ops(["aten::_softmax"])
    assert {"torch.softmax", "F.softmax", "aten.softmax", "aten._softmax"} <= sm and "torch.mm" not in sm
    assert forbidden_for_aten_ops(["aten::frobnicate"]) == {"aten.frobnicate", "torch.frobnicate"}
    assert forbidden_for_aten_ops(["aten::relu_"]) == {"aten.relu", "torch.relu"}
    assert forbidden_for_aten_ops(["torch.mm", "cublas*"]) == {"torch.mm", "cublas*"}   # already canonical
    assert forbidden_for_aten_ops([]) == frozenset()
    # the tensor method is covered by the same name
    assert _ops("y = x.softmax(-1)\n", sm) == [("torch.softmax", 1, "call")]
    assert _ops("y = torch.ops.aten._softmax.default(x, -1, False)\n", sm) == [("aten._softmax", 1, "call")]


def test_syntax_error_propagates():
    with pytest.raises(SyntaxError):
        scan_source("def f(:\n", filename="cand.py")
    with pytest.raises(SyntaxError):
        scan_source("x = 1\x00\n")


ODD = [
    "",
    "\n\n",
    "# only a comment\n# and another\n",
    "pass\n",
    '"""only a docstring"""\n',
    "f = lambda: (lambda *a, **k: (lambda x=lambda: 0: x)())\ng = (lambda: lambda: lambda: 1)()()()\n",
    "if (n := len(xs)) > 3:\n    print(n)\n[y for x in xs if (y := x)]\n",
    _src("""
        match cmd:
            case {"k": v, **rest}:
                pass
            case [1, *others] if others:
                pass
            case Point(x=0, y=yy) | Point(x=yy, y=0):
                pass
            case torch.mm:
                pass
            case str() as s:
                pass
            case _:
                pass
    """),
    "async def f():\n    async with a as b:\n        async for x in b:\n            await x\n    yield\n",
    "try:\n    pass\nexcept ValueError as e:\n    raise\nfinally:\n    del x.y, z[0]\n",
    "x: 'torch.Tensor'\ny: int = 3\nglobal g\n",
    "def f():\n    nonlocal_x = 1\n    def g():\n        yield from range(3)\n    return g\n",
    "a[1:2, ::3, ...] = b\nprint(*a, **k)\nx = f'{a!r:>{w}}'\n",
    "class M(Base, metaclass=Meta):\n    x = y = z = 1\n    a, (b, c) = 1, (2, 3)\n",
    "getattr()\ngetattr(torch)\ngetattr(x, y)\nvars()['mm']\n__import__(name).mm\neval()\nexec(code)\n",
    "exec('1 +')\neval('')\ncompile('x', 'f', 'eval')\n",
    "x = 'a' * -1\ny = 'a' * 10**12\nz = 'ab'[::0] if 0 else 1\nw = ''.join([])\n",
    "s = 'x' * (1 << 40)\ngetattr(torch, s)\n",
    "a = b\nb = a\ngetattr(torch, a)\n",
    "s = s + 'm'\ngetattr(torch, s)\n",
    "import torch as t\nt = 3\nt.x\n",
    "from . import mm\nfrom .. import *\nfrom .x import y as z\n",
    "x = '\\x00\\uffff' + b'\\xff'.decode()\n",
    "é = 1\nπ = é + 1\n",
    "x = 1 \\\n    + 2\n",
    "x = a" + "()" * 200 + "\n",
    "x = " + " + ".join(['"a"'] * 900) + "\n",
    "y = a" + ".b" * 900 + "\n",
    "s0 = 'm'\n" + "".join(f"s{i} = s{i - 1} + s{i - 1}\n" for i in range(1, 60)) + "getattr(torch, s59)\n",
    "x = " + "(" * 150 + "1" + ")" * 150 + "\n",
    "x = f'{f\"{1}\"}'\n",
    "@decorator(torch)\nclass A:\n    @property\n    def p(self):\n        return 1\n",
]


if sys.version_info >= (3, 11):
    ODD.append("try:\n    pass\nexcept* ValueError:\n    pass\n")


@pytest.mark.parametrize("source", ODD, ids=range(len(ODD)))
def test_odd_but_valid_python_never_raises(source):
    hits = scan_source(source)
    assert all(isinstance(h, SourceHit) for h in hits)


def test_names_fold_once_each():
    chain = "s0 = 'm'\ns1 = s0 + s0\n" + "".join(f"s{i} = s{i - 1}\n" for i in range(2, 200)) + \
            "y = getattr(torch, s199)(a, b)\n"
    assert _ops(chain) == [("torch.mm", 201, "call")]
    # 2**60 characters if folded naively; each name is folded once and oversize values give up
    doubling = "s0 = 'm'\n" + "".join(f"s{i} = s{i - 1} + s{i - 1}\n" for i in range(1, 61)) + \
               "y = getattr(torch, s60)(a, b)\n"
    assert _ops(doubling) == []


def test_chained_calls_resolve_in_linear_time():
    source = "x = getattr(torch, 'mm')" + "('m')" * 40 + "\n"
    assert _ops(source) == [("torch.mm", 1, "call")]


_DENY = {"__debug__", "eval", "exec", "compile", "getattr", "vars", "__import__"}
_IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True).filter(
    lambda s: not keyword.iskeyword(s) and s not in _DENY)


@settings(max_examples=200, deadline=None)
@given(_IDENT)
def test_calling_an_unknown_name_is_never_a_hit(name):
    assert scan_source(f"{name}(a, b)\n") == []


@settings(max_examples=200, deadline=None)
@given(_IDENT)
def test_any_alias_of_torch_is_followed(alias):
    hits = scan_source(f"import torch as {alias}\n{alias}.mm(a, b)\n")
    assert [(h.op, h.line, h.how) for h in hits] == [("torch.mm", 2, "call")]
