"""Built-in problems, written in the KernelBench format (Model, get_inputs, get_init_inputs).

`make(name, shape, dtype)` returns a module-like namespace, so the judge, the reference worker
and a KernelBench file all go through one code path.
"""

from __future__ import annotations

import types

import torch
from torch import nn

BUILTIN = ("matmul", "softmax")

# What each problem does, in numbers the judge reports (FLOPs, minimum bytes moved).
_DEFAULT_SHAPES = {"matmul": (256, 256, 256), "softmax": (256, 4096)}


def default_shape(name: str) -> tuple[int, ...]:
    return _DEFAULT_SHAPES[name]


def make(name: str, shape: tuple[int, ...] | None = None, dtype: torch.dtype = torch.float32) -> types.SimpleNamespace:
    if name not in BUILTIN:
        raise KeyError(name)
    shape = tuple(shape) if shape else _DEFAULT_SHAPES[name]
    return {"matmul": _matmul, "softmax": _softmax}[name](shape, dtype)


def _matmul(shape, dtype):
    if len(shape) != 3:
        raise ValueError("matmul takes --shape M,N,K")
    m, n, k = shape

    class Model(nn.Module):
        """C = A @ B with A of shape (M, K) and B of shape (K, N)."""

        def forward(self, A, B):
            return torch.matmul(A, B)

    def get_inputs():
        return [torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)]

    size = torch.tensor([], dtype=dtype).element_size()
    return types.SimpleNamespace(
        Model=Model, get_inputs=get_inputs, get_init_inputs=lambda: [],
        FLOPS=2.0 * m * n * k, BYTES=float(size * (m * k + k * n + m * n)),
        NAME=f"matmul M={m} N={n} K={k} {str(dtype).removeprefix('torch.')}",
    )


def _softmax(shape, dtype):
    if len(shape) != 2:
        raise ValueError("softmax takes --shape ROWS,COLS")
    rows, cols = shape

    class Model(nn.Module):
        """Row-wise softmax over the last dimension."""

        def forward(self, x):
            return torch.softmax(x, dim=-1)

    def get_inputs():
        # Logits with a spread, so that a kernel that forgets to subtract the row max overflows.
        return [torch.randn(rows, cols, dtype=dtype) * 4.0]

    size = torch.tensor([], dtype=dtype).element_size()
    return types.SimpleNamespace(
        Model=Model, get_inputs=get_inputs, get_init_inputs=lambda: [],
        FLOPS=5.0 * rows * cols, BYTES=float(2 * size * rows * cols),
        NAME=f"softmax {rows}x{cols} {str(dtype).removeprefix('torch.')}",
    )
