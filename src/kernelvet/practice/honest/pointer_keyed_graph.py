"""Honest (CUDA): a blocked matmul captured once per input-pointer pair as a CUDA graph and
replayed on every later call with those pointers. A replay reads whatever the inputs hold now, so
it recomputes on new values; the graph's static output is returned, and overwritten by the next
call on the same pointers (as CUDA-graph code does: `aliasing` records it, and passes by default).
`caching` must pass it: its seen/unseen pairs put new values at seen pointers, where the graph
replays, instead of timing a capture on new pointers against a replay."""

import torch
from torch import nn


def _matmul(A, B, out):
    out.zero_()
    for k in range(0, A.shape[1], 64):
        out.add_((A[:, k:k + 64, None] * B[None, k:k + 64, :]).sum(1))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._graphs = {}   # (A ptr, B ptr, shapes, dtype) -> (graph, static output)

    def forward(self, A, B):
        key = (A.data_ptr(), B.data_ptr(), tuple(A.shape), tuple(B.shape), A.dtype)
        if key not in self._graphs:
            out = torch.empty(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):   # warm-up before capture, as torch.cuda.graphs advises
                _matmul(A, B, out)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _matmul(A, B, out)
            self._graphs[key] = (graph, out)
        graph, out = self._graphs[key]
        graph.replay()
        return out
