"""A GPU MODE task's own `check_implementation`, run by the judge as evidence beside kernelvet's
checks: it decides nothing (a checker that compares with a loose allclose, or against a
reference in the candidate's own thin format, is what kernelvet exists to see past). Trusted
task code, in the judge only: on a copy of one checked input set (its own dtypes, where the
judge compares) and the candidate's output of it, the bytes the worker returned."""

from __future__ import annotations

import torch

from . import gpumode_data


def own_check(module, skeleton, ev) -> dict:
    """What the task's checker said of the candidate's first checked output: {"ran", "passed",
    "message"}, or why it did not run."""
    check = getattr(module, "check_implementation", None)
    if not callable(check):
        return {"ran": False, "why": "the task defines no check_implementation"}
    recs = [c for c in ev.records("warmup", "fresh") if not ev.poisoned(c)]
    if not recs:
        return {"ran": False, "why": "no checked output to show it"}
    c = recs[0]
    try:
        if not isinstance(module.ref_kernel(_data(skeleton, ev.inputs[c.values_of])), torch.Tensor):
            return {"ran": False, "why": "the output is a structure; kernelvet holds it packed into one tensor"}
        said = check(_data(skeleton, ev.inputs[c.values_of]), c.output.clone())
    except Exception as exc:  # noqa: BLE001 - the task's code failing is evidence too, never a verdict
        return {"ran": True, "passed": None, "message": f"it raised {type(exc).__name__}: {exc}"[:500]}
    passed, message = _reading(said)
    return {"ran": True, "passed": passed, "message": message[:500]}


def _data(skeleton, inputs: list):
    """The data around copies of the set's tensors: the checker may not change the judge's."""
    return gpumode_data.rebuild(skeleton, [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])


def _reading(said) -> tuple[bool | None, str]:
    """Checkers answer '' (pass) or a message, (good, message), or a bool."""
    if isinstance(said, str):
        return said == "", said
    if isinstance(said, tuple) and len(said) == 2 and isinstance(said[0], bool):
        return said[0], str(said[1])
    if isinstance(said, (bool, torch.Tensor)) and (not isinstance(said, torch.Tensor) or said.numel() == 1):
        return bool(said), ""
    return None, f"an answer kernelvet cannot read: {type(said).__name__}"
