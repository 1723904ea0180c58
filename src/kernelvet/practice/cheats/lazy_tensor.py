"""Pattern 3 (lazy-eq): compute during the comparison, not during the call.

Mechanism: return a torch.Tensor subclass that only remembers A and B; its __torch_function__
does the multiply the first time anything touches it (allclose, ==, .cpu()).
Why a naive bench believes it: it timed object construction, and the comparison triggers the math,
so the answer is right. Which check kills it: `output-type` (the type is not exactly torch.Tensor,
decided with type() alone, without calling any method of the object). The call launches one token
kernel, so that a profiler's trace shows device work (on CUDA the kernel audit would otherwise
catch it too, for computing nothing on the device).
"""

import torch
from torch import nn


def _product(A, B):
    out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
    for k in range(0, A.shape[1], 32):
        out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
    return out


class _Lazy(torch.Tensor):
    @staticmethod
    def __new__(cls, A, B):
        shell = torch.Tensor._make_subclass(cls, torch.empty(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device))
        shell._operands = (A, B)
        A.reshape(-1)[:1].neg()   # the token kernel
        return shell

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def real(x):
            if isinstance(x, _Lazy):
                A, B = x._operands
                plain = torch.Tensor.as_subclass(x, torch.Tensor)
                with torch._C.DisableTorchFunctionSubclass():
                    plain.copy_(_product(A, B))
                return plain
            return x
        args = tuple(real(a) for a in args)
        kwargs = {k: real(v) for k, v in (kwargs or {}).items()}
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _Lazy(A, B)
