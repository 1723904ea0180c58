"""Torch dispatch modes without torch._dynamo's import on their first use.

torch wraps every dispatch mode's `__torch_dispatch__` so that Dynamo never compiles inside it,
and the wrapper imports torch._dynamo on its first call: 1.3 s on a 2-core CPU machine, paid by the
launcher's first aten trace and by the judge's first FLOP count (a cold `kernelvet check` paid
both). Until something else has imported Dynamo (torch.compile does), no frame can be under its
compiler, and the plain method is the same thing; from then on, torch's own Dynamo-disabled
function runs it.

The harness's trace machinery must never be traced itself: a candidate compiled with
torch.compile, called under the worker's aten trace, would otherwise have Dynamo inline this
module's code (and fail on it). So once Dynamo is loaded, `settle` (called by the harness before
it enters a mode) hands torch's wrapper the Dynamo-disabled method it would have built, and the
deferring function, should Dynamo meet it first, only calls that disabled method: no mutation
Dynamo cannot trace, and a call Dynamo knows to leave alone.
"""

from __future__ import annotations

import sys

_CACHE_ATTR = "__dynamo_disable"   # where torch._disable_dynamo caches its Dynamo-disabled function
_DISABLED: dict = {}               # raw __torch_dispatch__ -> torch._dynamo.disable(raw)


def defer_dynamo(mode_cls) -> None:
    """Make `mode_cls.__torch_dispatch__` import Dynamo only once something else has. A torch
    version that wraps differently (no `__wrapped__`) is left alone: slower, never wrong."""
    wrapper = mode_cls.__dict__.get("__torch_dispatch__")
    raw = getattr(wrapper, "__wrapped__", None)
    if raw is None or hasattr(raw, _CACHE_ATTR):
        return

    def until_dynamo(*args, **kwargs):
        if "torch._dynamo" in sys.modules:
            return _disabled(raw)(*args, **kwargs)
        return raw(*args, **kwargs)
    setattr(raw, _CACHE_ATTR, until_dynamo)


def settle(mode_cls) -> None:
    """Before the harness enters `mode_cls`: once Dynamo is loaded, torch's wrapper gets the
    Dynamo-disabled method, as it would have built it itself."""
    raw = getattr(mode_cls.__dict__.get("__torch_dispatch__"), "__wrapped__", None)
    if raw is not None and "torch._dynamo" in sys.modules:
        setattr(raw, _CACHE_ATTR, _disabled(raw))


def _disabled(raw):
    fn = _DISABLED.get(raw)
    if fn is None:
        import torch._dynamo
        fn = _DISABLED[raw] = torch._dynamo.disable(raw, recursive=True, wrapping=False)
    return fn
