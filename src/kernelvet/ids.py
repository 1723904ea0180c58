"""Stable check ids. Users name them in `--allow`; reports carry them; tests assert on them."""

from __future__ import annotations

import enum


class CheckId(str, enum.Enum):
    STREAMS = "streams"
    THREADS = "threads"
    OUTPUT_TYPE = "output-type"
    TIMERS = "timers"
    IDENTITY = "identity"
    UNWRITTEN_OUTPUT = "unwritten-output"
    DETERMINISM = "determinism"
    PRECISION = "precision"
    CACHING = "caching"
    LIBRARY_CALL = "library-call"
    INPUTS_UNCHANGED = "inputs-unchanged"
    GLOBAL_STATE = "global-state"
    KERNEL_AUDIT = "kernel-audit"
    PARAMETERS = "parameters"
    WORKER = "worker"
    ALIASING = "aliasing"

    def __str__(self) -> str:  # so f-strings and JSON show "streams", not "CheckId.STREAMS"
        return self.value


ALL_CHECKS: tuple[CheckId, ...] = tuple(CheckId)

# How the profiler's kernel audit (CUDA) runs: `auto` only for a candidate every other check passed.
AUDIT_MODES = ("auto", "always", "never")

# What `aliasing` does with a call that returns the storage of an earlier output (a static output
# buffer, overwritten by the next call): `allow` records it (KernelBench accepts it, CUDA-graph code
# does it), `reject` makes it a finding.
REUSED_OUTPUT_MODES = ("allow", "reject")

# `worker` cannot be waived: without a worker that ended normally there is nothing to judge.
UNWAIVABLE = frozenset({CheckId.WORKER})


def parse_check_id(text: str) -> CheckId:
    """Map a user-written id to a CheckId, or raise ValueError naming the valid ids."""
    try:
        return CheckId(text.strip())
    except ValueError:
        valid = ", ".join(c.value for c in ALL_CHECKS)
        raise ValueError(f"unknown check id {text!r}; valid ids: {valid}") from None
