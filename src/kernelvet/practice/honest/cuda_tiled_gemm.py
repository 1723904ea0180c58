"""Honest (CUDA): a classic shared-memory tiled float32 GEMM in CUDA C++, built with load_inline.
The first import compiles it (about a minute); `--timeout` covers compilation."""

from torch import nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#define TILE 32

__global__ void tiled_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && t + threadIdx.y < K) ? B[(t + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

torch::Tensor gemm(torch::Tensor A, torch::Tensor B) {
    auto a = A.contiguous();
    auto b = B.contiguous();
    int M = a.size(0), K = a.size(1), N = b.size(1);
    auto C = torch::empty({M, N}, a.options());
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    tiled_gemm<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), C.data_ptr<float>(), M, N, K);
    return C;
}
"""

_ext = load_inline(name="kernelvet_tiled_gemm", cpp_sources="torch::Tensor gemm(torch::Tensor A, torch::Tensor B);",
                   cuda_sources=_CUDA, functions=["gemm"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.gemm(A, B)
