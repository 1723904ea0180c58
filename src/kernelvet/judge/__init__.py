"""The judge: owns the secret seed, the inputs, the float64 reference and the verdict.

It never imports candidate code. It drives a worker through a fixed plan of requests, keeps
what comes back as evidence, and lets the checks decide. The plan, in order:

  reference: load -> inputs -> two traced calls -> timing (then dropped, its memory overwritten)
  candidate: load -> inputs -> warm-up (traced) -> fresh set A -> kernel audit on A (CUDA, when
  the library policy is own-kernels: it decides on the audit's trace, so a library call in disguise
  is rejected after one fresh output) -> A again after empty_cache (determinism) -> fresh sets B, C
  -> A overwritten in place (caching) -> ordering probe (CUDA)
  -> timing on A, B, C (rotating, L2 flushed, outputs verified; bracketed by the judge's clocks,
  and the same request with a null call) -> each unseen set timed once, in a request of its own
  that carries it, paired with a seen rep (again on newly drawn sets where the pairs say
  remembered answers; the timing again where the drain says hidden work) -> N back-to-back calls
  on a never-seen set bracketed by the judge's own clock, and the same N of a null call (timers)
  -> kernel audit under the profiler (CUDA, second tier).

Every set the candidate has not seen travels inside the first request that uses it: nothing
in the worker's memory lets a candidate compute an answer ahead of the call the judge clocks.

The plan stops as soon as a check fails on the evidence so far (Settings.early_exit).

Its modules, by job: `api` (vet, prepare), `settings` (Settings, the input sets' keys),
`placement` (host or device), `reference` (the problem's side), `plan` (the candidate's
requests), `bodies` (the requests' bodies), `policy` (what is checked, the early stop),
`assembly` (the report's parts), `versions`.
"""

from .api import prepare, vet
from .assembly import _mark_not_run
from .bodies import _time_body
from .placement import HOST_JUDGE_ELEMENTS, HOST_JUDGE_FLOPS, _judged_on, host_judges, warm_judge
from .plan import (LEAD_MAX_MS, LOOP_OVERRUN, NULL_TIMING_REPS, PILOT_CALLS, _REHEARSALS,
                   _measure_drain_again, _measure_unseen_again)
from .reference import _count_flops, _prepared
from .settings import LOOP_ATTEMPTS, UNSEEN_AGAIN, Settings
from ..refcache import locked_draw

__all__ = [
    # the API
    "vet", "prepare", "warm_judge", "Settings", "host_judges", "HOST_JUDGE_FLOPS", "HOST_JUDGE_ELEMENTS",
    "LOOP_ATTEMPTS", "UNSEEN_AGAIN", "LEAD_MAX_MS", "LOOP_OVERRUN", "NULL_TIMING_REPS", "PILOT_CALLS",
    # the parts the tests take one at a time
    "_mark_not_run", "_time_body", "_judged_on", "_REHEARSALS", "_measure_drain_again", "_measure_unseen_again",
    "_count_flops", "_prepared", "locked_draw",
]
