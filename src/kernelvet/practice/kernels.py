"""Triton building blocks shared by the CUDA practice files (so each file shows only its trick).

Plain, honest kernels: a tiled float32 GEMM (IEEE dot by default; `ieee=False` is Triton's
default TF32 dot) and a one-row-per-program softmax. With TRITON_INTERPRET=1 they run on the CPU.
"""

import torch
import triton
import triton.language as tl


# a Triton kernel takes its pointers, sizes, strides and block sizes as arguments
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, IEEE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


matmul_autotuned = triton.autotune(
    configs=[triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=s)
             for bm, bn, bk, w, s in ((64, 64, 32, 4, 3), (128, 64, 32, 4, 3), (64, 128, 32, 4, 3),
                                      (128, 128, 32, 8, 3), (32, 32, 32, 2, 2))],
    key=["M", "N", "K"],
)(matmul_kernel)


def matmul(A, B, out=None, ieee=True, block=(64, 64, 32)):
    M, K = A.shape
    N = B.shape[1]
    if out is None:
        out = torch.empty(M, N, dtype=torch.float32, device=A.device)
    bm, bn, bk = block
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    matmul_kernel[grid](A, B, out, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                        out.stride(0), out.stride(1), BM=bm, BN=bn, BK=bk, IEEE=ieee)
    return out


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sx + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * sy + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


def softmax(x, out=None, rows=None):
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x)
    softmax_kernel[(rows or n_rows,)](x, out, n_cols, x.stride(0), out.stride(0),
                                      BLOCK=triton.next_power_of_2(n_cols))
    return out
