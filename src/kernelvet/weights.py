"""Weights are secret inputs: the reference's floating parameters and buffers get fresh values
drawn from the judge's secret seed, and the candidate gets the same values.

A candidate whose weights are right only while they hold the module's init (ones and zeros for a
norm's affine weights, declared with the wrong shape) cannot foresee them, as it cannot foresee
the inputs. Values keep the scale of the module's own init (its mean and spread; a constant c
becomes a value in [c/2, 3c/2], zero a small spread), so the problem stays as well conditioned as
it was. Buffers whose values are all integers (masks, index tables) keep them: they are part of
what the problem computes, not weights.

The judge draws (`redraw`); the worker hands the values to the model it built (`hand_over`): by
name and shape, else by order and shape, or through the candidate's own
`load_reference_state(state_dict)` when ModelNew defines it (for a candidate that renames,
transposes or fuses its weights).
"""

from __future__ import annotations

import torch

HOOK = "load_reference_state"
ZERO_SPREAD = 0.1   # the spread of a weight whose init is all zeros (a bias, a shift)


def redraw(model: torch.nn.Module, seed: int) -> list[tuple[str, torch.Tensor, bool]]:
    """Fresh values for `model`'s floating parameters and non-integer buffers, set in place;
    returns (name, value, is_parameter) in state_dict order."""
    gen = torch.Generator().manual_seed(seed)
    params = {id(p) for p in model.parameters()}
    out = []
    with torch.no_grad():
        for name, t in model.state_dict(keep_vars=True).items():
            if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
                continue
            is_param = id(t) in params
            if not is_param and _all_integers(t):
                continue
            t.copy_(_fresh(t.detach(), gen))
            out.append((name, t.detach().clone().contiguous(), is_param))
    return out


def _all_integers(t: torch.Tensor) -> bool:
    v = t.detach().to(torch.float64)
    return bool(torch.isfinite(v).all() and torch.equal(v, v.round()))


def _fresh(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """New values of `t`'s scale, drawn in float32 (float64 for a float64 tensor) and scaled in
    place: a 8192 x 8192 Linear took 5 s of the judge's host drawing and scaling in float64, with
    two temporaries of twice its size. The CPU's reductions accumulate float32 in double."""
    dtype = torch.float64 if t.dtype == torch.float64 else torch.float32
    std, mean = torch.std_mean(t) if t.numel() > 1 else (torch.zeros(()), t.reshape(-1)[0])
    spread = float(std)
    if spread > 0:
        return torch.randn(t.shape, generator=gen, dtype=dtype).mul_(spread).add_(float(mean))
    c = float(t.reshape(-1)[0])
    if c == 0:
        return torch.randn(t.shape, generator=gen, dtype=dtype).mul_(ZERO_SPREAD)
    # a constant (ones of a norm's weight, a variance): keep its sign and order
    return torch.rand(t.shape, generator=gen, dtype=dtype).add_(0.5).mul_(c)


def hand_over(model, state: list[tuple[str, torch.Tensor]], reference: bool) -> dict:
    """Give `model` the judge's values (worker side). Returns what was matched, for the judge:
    {"hook": bool, "matched": [reference names], "unmatched_shapes": {name: [candidate shapes]}}."""
    if not state:
        return {"hook": False, "matched": [], "left": []}
    if not reference and callable(getattr(type(model), HOOK, None)):
        getattr(model, HOOK)({name: value for name, value in state})
        return {"hook": True, "matched": [name for name, _ in state], "left": []}
    if not isinstance(model, torch.nn.Module):
        return {"hook": False, "matched": [], "left": []}
    own = [(n, t) for n, t in model.state_dict(keep_vars=True).items()
           if isinstance(t, torch.Tensor) and t.is_floating_point()]
    free = dict(own)
    pairs = {}
    for name, value in state:   # by name and shape
        t = free.get(name)
        if t is not None and tuple(t.shape) == tuple(value.shape):
            pairs[name] = free.pop(name)
    for name, value in state:   # else by order and shape
        if name in pairs:
            continue
        for n, t in list(free.items()):
            if tuple(t.shape) == tuple(value.shape):
                pairs[name] = free.pop(n)
                break
    with torch.no_grad():
        for name, value in state:
            if name in pairs:
                pairs[name].copy_(value.to(pairs[name].device, pairs[name].dtype))
    return {"hook": False, "matched": sorted(pairs), "left": [[n, list(t.shape)] for n, t in free.items()][:20]}
