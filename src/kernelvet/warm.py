"""Library start-up paid by a spare worker before any vet needs it, not inside a timed first call.

cuBLAS creates its handle and workspace on the first GEMM; Triton loads its driver utilities,
compiles (or loads from its cache) a launcher, and imports its compiler on the first kernel
call. Each costs a few hundred milliseconds in a fresh process. Only kernelvet's own code runs
here: the spare has seen no problem and no candidate yet.
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except Exception:  # noqa: BLE001 - no Triton (or a broken one): nothing of it to warm
    triton = None


if triton is not None:
    @triton.jit
    def _scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


def warm(device: torch.device) -> dict[str, str]:
    """Run one tiny GEMM per common dtype and one Triton kernel on `device`; what failed, by name."""
    failed = {}
    try:
        for dtype in (torch.float32, torch.bfloat16):
            a = torch.ones(16, 16, device=device, dtype=dtype)
            torch.mm(a, a)
    except Exception as exc:  # noqa: BLE001 - a warm-up that fails costs time later, nothing else
        failed["cublas"] = f"{type(exc).__name__}: {exc}"[:200]
    if triton is not None:
        try:
            x = torch.ones(64, device=device)
            _scale[(1,)](x, torch.empty_like(x), 64, BLOCK=64)
        except Exception as exc:  # noqa: BLE001
            failed["triton"] = f"{type(exc).__name__}: {exc}"[:200]
    torch.cuda.synchronize(device)
    return failed
