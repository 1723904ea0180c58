"""The worker: the only process that imports candidate code.

It is forked by the launcher (never by the judge), serves the judge's requests over one socket,
and reports observations as data. It decides nothing: every verdict is the judge's. Everything
the worker uses to observe the candidate (clocks, syncs, tensor methods) is bound in `_Bound`
before the candidate is imported, so later monkeypatching neither fools the worker nor goes
unnoticed (`integrity()` compares the bindings).

Its modules, by job: `serve` (the request table and its handlers, `main`), `reps` (the timing
engine), `bindings` (what the worker observes with, bound first; the integrity state),
`observe` (threads, traces, the candidate's binaries). `python -m kernelvet.worker FD` serves
one socket without a launcher.
"""

from .bindings import _Bound, _bits_differ, _same_bits, global_state
from .observe import _AtenTrace, _own_binaries
from .reps import _Reps
from .serve import REQUESTS, Worker, main

__all__ = ["REQUESTS", "Worker", "main", "global_state", "_Bound", "_bits_differ", "_same_bits", "_AtenTrace",
           "_own_binaries", "_Reps"]
