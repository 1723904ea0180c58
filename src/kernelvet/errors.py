"""The two ways kernelvet itself can fail, as opposed to a candidate failing a check.

A candidate that misbehaves is never an exception: it is a `reject` verdict with findings.
"""

import os
import traceback


class UsageError(Exception):
    """The user gave us something we cannot work with (bad flag, missing file, malformed problem).

    The CLI prints the message on one line and exits with code 2; never a traceback.
    """


class MachineOutOfMemory(UsageError):
    """The judge's own work for a problem (a float64 reference, an input draw) ran out of the
    memory of the machine doing it: a machine too small for the problem's sizes."""


class ReferenceOutOfMemory(MachineOutOfMemory):
    """The float64 reference ran out of the memory of the machine that made it: a usage mistake
    (a machine too small for the problem's sizes) unless a slice of fewer rows fits
    (judge/row_slices.py makes it again in halves)."""


class OutOfMemoryBesideCandidate(MachineOutOfMemory):
    """The judge ran out of memory while a candidate's worker held part of the same memory, no
    more than the problem's plan gives it (judge/memory_beside.py): the problem does not fit this
    machine beside this candidate. Another candidate of the problem may fit, so it says nothing
    about them (a batch vets them on their own)."""


class HarnessError(Exception):
    """kernelvet or the problem itself failed (not the candidate). Exit code 3, verdict `error`."""


class ProblemError(HarnessError):
    """The problem file's own reference fails or is nondeterministic on its own inputs.

    Not the candidate's fault and not a usage mistake: an `error` verdict about the problem (exit 3),
    whose message names the problem file.
    """


def raised_at(exc: BaseException) -> str:
    """' at kernelvet/FILE:LINE in FUNCTION': the innermost frame of kernelvet's own that raised
    `exc` (what a report of the fault needs; the rest of the traceback is not kept); '' if none."""
    root = os.path.dirname(os.path.abspath(__file__))
    ours = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename).startswith(root + os.sep)]
    if not ours:
        return ""
    f = ours[-1]
    return f" at kernelvet/{os.path.relpath(f.filename, root)}:{f.lineno} in {f.name}"
