"""What a vet checks: the waived checks, the library policy as it applies, when the kernel audit
runs, and whether a check already fails on the evidence so far (the plan's early stop)."""

from __future__ import annotations

from .. import checks
from ..checks import library_policy as policies
from ..errors import UsageError
from ..evidence import Evidence
from ..ids import CheckId, UNWAIVABLE, parse_check_id
from ..problem import Problem
from . import memory_beside


def _parse_allow(allow) -> frozenset[CheckId]:
    out = set()
    for item in allow:
        try:
            cid = item if isinstance(item, CheckId) else parse_check_id(str(item))
        except ValueError as exc:
            raise UsageError(f"--allow: {exc}") from None
        if cid in UNWAIVABLE:
            raise UsageError(f"--allow {cid}: this check cannot be waived")
        out.add(cid)
    return frozenset(out)


def _early_failure(ev: Evidence, waived) -> str | None:
    """A check that already fails on the evidence so far: the rest of the plan cannot save the
    candidate, so it is not run (an early reject costs a fraction of a full vet)."""
    f = ev.with_room(lambda: checks.first_failure(ev, waived, memory_beside.JUDGES_OWN))
    return str(f.check) if f is not None else None


def _policy_needs_trace(ev: Evidence) -> bool:
    """own-kernels on CUDA decides on the audit's trace: it runs whenever library-call is on."""
    policy = ev.library_policy
    return (ev.device.type == "cuda" and policy is not None and policy.needs_trace
            and CheckId.LIBRARY_CALL in ev.enabled)


# Source-scan names of code below the dispatcher, forbidden whenever any op is: the dispatch trace
# cannot see them, so there the scan's hit decides (checks/library_policy.py, below_dispatcher).
_BELOW_DISPATCHER = frozenset({"cublas*", "cublasLt*", "cudnn*", "cutlass", "rocblas*", "hipblas*", "cublas-link",
                               "cudnn-link", "rocblas-link", "hipblas-link", "at::cuda::blas", "at::native",
                               "flash_attn*", "xformers*", "blas-symbol"})


def _library_policy(level, dev, allow_ops, prob: Problem, waived):
    """The library policy as it applies, and the waived checks (`off` waives library-call)."""
    try:
        level = policies.parse_level(level, dev.type)
    except ValueError as exc:
        raise UsageError(f"--library-policy: {exc}") from None
    if level == "off":
        waived = waived | {CheckId.LIBRARY_CALL}
    elif CheckId.LIBRARY_CALL in waived:
        level = "off"
    named = [*(allow_ops or ()), *prob.allowed_ops]
    for op in named:
        if not isinstance(op, str) or not policies.base_name(op).isidentifier():
            raise UsageError(f"--allow-op {op!r}: expected an op name such as conv2d or aten::mm")
    return policies.make_policy(level, dev.type, named), waived


def _audit_wanted(ev: Evidence, audit: str, waived) -> bool:
    if ev.device.type != "cuda" or audit == "never" or CheckId.KERNEL_AUDIT not in ev.enabled:
        return False
    if audit == "always":
        return True
    return _early_failure(ev, waived) is None   # auto: the second tier, for a candidate nothing failed
