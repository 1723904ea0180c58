"""Pattern 3 (lazy-eq), paced so that physics does not give it away.

Mechanism: like lazy_tensor, return a torch.Tensor subclass whose math happens inside the
comparison (__torch_function__), but spend a believable fraction of the real time in the call,
so that the implied FLOP/s stays under the device's peak and the judge's clock agrees with it.
Why a naive bench believes it: it times the call, then allclose() does the multiply.
Which check kills it: `output-type` alone (type(out) is not torch.Tensor). Like lazy_tensor, it
launches one token kernel per call.
"""

import time

from torch import nn

from kernelvet.practice.cheats.lazy_tensor import _Lazy, _product


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pace = None

    def forward(self, A, B):
        if self.pace is None:  # measure the real cost once, then pretend to be 2.5x faster
            t0 = time.perf_counter()
            _product(A, B)
            self.pace = (time.perf_counter() - t0) / 2.5
        deadline = time.perf_counter() + self.pace
        while time.perf_counter() < deadline:
            pass
        return _Lazy(A, B)
