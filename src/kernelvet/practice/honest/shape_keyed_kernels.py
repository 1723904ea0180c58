"""Honest: a compiled-kernel cache keyed on shape and dtype. The first call with a new
(shape, dtype) generates a kernel's source for it (the K loop unrolled with that shape's block
size) and compiles it; later calls with the same key reuse the compiled kernel, on their own
inputs. `caching` must pass it: kernels may be cached, answers may not."""

import torch
from torch import nn

_kernels = {}


def _generate(m, n, k, dtype):
    block = 64 if k % 64 == 0 else 32 if k % 32 == 0 else 1
    lines = [f"def kernel(A, B):",
             f"    out = torch.zeros({m}, {n}, dtype=A.dtype, device=A.device)"]
    lines += [f"    out += (A[:, {lo}:{lo + block}, None] * B[None, {lo}:{lo + block}, :]).sum(1)"
              for lo in range(0, k, block)]
    lines.append("    return out")
    scope = {"torch": torch}
    exec(compile("\n".join(lines), f"<kernel {m}x{n}x{k} {dtype}>", "exec"), scope)
    return scope["kernel"]


class ModelNew(nn.Module):
    def forward(self, A, B):
        key = (A.shape[0], B.shape[1], A.shape[1], A.dtype)
        if key not in _kernels:
            _kernels[key] = _generate(*key)
        return _kernels[key](A, B)
