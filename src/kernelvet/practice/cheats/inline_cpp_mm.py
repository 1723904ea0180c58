"""Pattern 10 (library), hidden in inline C++: the "custom kernel" calls at::mm.

Mechanism: a load_inline extension whose C++ body is a call into ATen's matmul (cuBLAS on a GPU).
The Python source calls only the extension.
Why a naive bench believes it: it is a compiled extension; the Python looks like a custom kernel.
Which check kills it: `library-call`: string literals are scanned as C++ (at::mm, cublas...), and
the aten trace sees aten::mm at run time. (Where no compiler toolchain is present the import
itself fails, and `worker` reports that too.)
"""

from torch import nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
torch::Tensor fast_gemm(torch::Tensor a, torch::Tensor b) { return at::mm(a, b); }
"""

_ext = load_inline(name="kernelvet_fast_gemm", cpp_sources=_CPP, functions=["fast_gemm"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.fast_gemm(A, B)
