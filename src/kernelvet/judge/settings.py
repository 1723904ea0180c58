"""What a vet may be told (Settings), and the keys of its input sets."""

from __future__ import annotations

import dataclasses

from .. import spares


@dataclasses.dataclass(frozen=True)
class Settings:
    fresh_sets: int = 3           # independent random inputs checked for correctness (at least 3)
    unseen_sets: int = 5          # inputs the candidate has never seen, timed once each among the seen
    budget_ms: float = 100.0      # timing budget for the seen sets (as do_bench's `rep`)
    min_reps: int = 10
    max_reps: int = 1000
    warmup_calls: int = 3
    warmup_ms: float = 25.0       # and at least this long (as do_bench's warm-up): compile, autotune, clocks
    null_reps: int = 20           # drain-clock baseline reps (CUDA)
    loop_ms: float = 60.0         # how long the judge-clocked loop should run
    settle_s: float = 0.02        # wait before re-reading an output (work finishing after return; work
                                  # finishing later leaves a wrong output when the judge reads it)
    flush_factor: float = spares.FLUSH_FACTOR   # L2 flush buffer, in multiples of the device's L2 (at least 256 MiB)
    early_exit: bool = True       # stop the plan as soon as a check fails (no timing of a rejected candidate)
    reps_per_sync: int = 32       # timed reps between syncs, at most; each sync reads their clocks (CUDA:
                                  # device-wide) and verifies, then frees, their outputs (CPU too)
    reused_output: str = "allow"  # a call returning an earlier output's storage: "allow" (recorded) or "reject"


_WARMUP, _OVERWRITE, _PROBE = 0, 1000, 2000
_UNSEEN_AGAIN = 3000   # first key of the re-measurements' unseen inputs
_LOOP = 4000           # first key of the judge-clocked loops' inputs (never seen before their loop)
_CONTROL = 5000        # first key of the control requests' copies of seen values (host clock)
_NULL_PAIR = 6000      # the trusted null pair request's copy of seen values (judge/null_prices.py)
LOOP_ATTEMPTS = 3
UNSEEN_AGAIN = 2       # re-measurements of pairs that said "remembers answers", at most
