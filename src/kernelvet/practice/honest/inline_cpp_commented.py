"""Honest (CPU), an inline C++ kernel whose comments name library calls it does not make.

The C++ body is a plain blocked loop over the float32 operands. Its comments say what a reader
might compare it with ("same result as at::matmul", a cuBLAS routine): comments call nothing,
and the scan blanks them before it reads a C/C++ string.
"""

from torch import nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>

// same result as at::matmul(a, b), written as a plain loop
// (on a GPU, cublasSgemm would be the library's way; this is not it)
torch::Tensor loop_gemm(torch::Tensor a, torch::Tensor b) {
    auto A = a.contiguous(), B = b.contiguous();
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    auto C = torch::zeros({M, N}, A.options());
    const float* pa = A.data_ptr<float>();
    const float* pb = B.data_ptr<float>();
    float* pc = C.data_ptr<float>();
    /* i-k-j order: the inner loop walks rows of B and C contiguously */
    for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) {
            const float aik = pa[i * K + k];
            for (int64_t j = 0; j < N; ++j) pc[i * N + j] += aik * pb[k * N + j];
        }
    return C;
}
"""

_ext = load_inline(name="kernelvet_loop_gemm", cpp_sources=_CPP, functions=["loop_gemm"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.loop_gemm(A, B)
