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

import concurrent.futures
import hashlib
import os

import torch

HOOK = "load_reference_state"
ZERO_SPREAD = 0.1   # the spread of a weight whose init is all zeros (a bias, a shift)


def redraw(model: torch.nn.Module, seed: int) -> list[tuple[str, torch.Tensor, bool]]:
    """Fresh values for `model`'s floating parameters and non-integer buffers, set in place;
    returns (name, value, is_parameter) in state_dict order."""
    params = {id(p) for p in model.parameters()}
    out = []
    with torch.no_grad():
        for k, (name, t) in enumerate(model.state_dict(keep_vars=True).items()):
            if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
                continue
            is_param = id(t) in params
            if not is_param and _all_integers(t):
                continue
            value = _fresh(t.detach(), seed, k)
            t.copy_(value)
            out.append((name, value, is_param))
    return out


def _all_integers(t: torch.Tensor) -> bool:
    v = t.detach().to(torch.float64)
    return bool(torch.isfinite(v).all() and torch.equal(v, v.round()))


def _fresh(t: torch.Tensor, seed: int, k: int) -> torch.Tensor:
    """New values of `t`'s scale (its `k`-th entry), of its dtype. The CPU's reductions
    accumulate float32 in double."""
    std, mean = torch.std_mean(t) if t.numel() > 1 else (torch.zeros(()), t.reshape(-1)[0])
    spread, c = float(std), float(t.reshape(-1)[0])
    if spread > 0:
        return _drawn(t, seed, k, lambda x, g: x.normal_(float(mean), spread, generator=g))
    if c == 0:
        return _drawn(t, seed, k, lambda x, g: x.normal_(0.0, ZERO_SPREAD, generator=g))
    # a constant (ones of a norm's weight, a variance): keep its sign and order
    lo, hi = sorted((0.5 * c, 1.5 * c))
    return _drawn(t, seed, k, lambda x, g: x.uniform_(lo, hi, generator=g))


CHUNK = 1 << 22   # elements drawn by one generator


def _drawn(t: torch.Tensor, seed: int, k: int, fill) -> torch.Tensor:
    """A new tensor of `t`'s shape and dtype, filled in chunks, each by a generator of its own
    seeded from (seed, k, chunk), on a few threads: the same values whatever the threads do.
    One generator drawing an 8192 x 8192 Linear took 0.5 s of the host (5 s in float64 with
    temporaries); a 32768 x 32768 one is 16 times that."""
    out = torch.empty(t.shape, dtype=t.dtype)
    flat = out.view(-1)
    spans = range(0, flat.numel(), CHUNK)

    def one(lo: int) -> None:
        g = torch.Generator().manual_seed(_chunk_seed(seed, k, lo // CHUNK))
        fill(flat[lo:lo + CHUNK], g)
    if len(spans) == 1:
        one(0)
    else:
        with concurrent.futures.ThreadPoolExecutor(min(len(spans), os.cpu_count() or 1, 16)) as pool:
            list(pool.map(one, spans))
    return out


def _chunk_seed(seed: int, k: int, j: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{k}:{j}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


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


# -- the reference's worker, built without running its init -----------------------------------

def whole_state(model: torch.nn.Module, state: list) -> list[tuple[str, torch.Tensor]]:
    """Judge side: every parameter and buffer of the reference `model` that `state` (the fresh
    weights) does not hold, by name: with `state`, all a copy of the model needs besides its code.
    Empty where some tensor is shared under two names (a copy built apart would not share it)."""
    drawn = {name for name, _t, _p in state}
    tensors = _named_tensors(model)
    if _shares(tensors):
        return []
    return [(name, t.detach()) for name, t in tensors if name not in drawn]


def build_whole(make, values: dict[str, torch.Tensor], device) -> torch.nn.Module | None:
    """Worker side: the trusted reference Model built on the meta device (its init draws and
    writes nothing: 16 s of a 2-core host for a 32768 x 32768 Linear), its storage then made on
    `device` and every parameter and buffer set from `values` (the judge's, by name). None where
    that cannot give the model the judge has: tensors kept outside parameters and buffers, names
    other than the judge's, shapes or dtypes that differ, an init that needs values."""
    try:
        with torch.device("meta"):
            model = make()
    except Exception:  # noqa: BLE001 - an init that reads values: built on the host instead
        return None
    if not isinstance(model, torch.nn.Module) or _tensors_outside(model):
        return None
    own = _named_tensors(model)
    if _shares(own) or {n for n, _t in own} != set(values) or any(
            tuple(t.shape) != tuple(values[n].shape) or t.dtype != values[n].dtype for n, t in own):
        return None
    model = model.to_empty(device=device)
    with torch.no_grad():
        for name, t in _named_tensors(model):
            t.copy_(values[name])
    return model


def _named_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every parameter and buffer, non-persistent ones included, under each name it has."""
    return [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]


def _shares(tensors: list) -> bool:
    """Whether one tensor appears under two names (tied weights)."""
    return len({id(t) for _n, t in tensors}) != len(tensors)


def _tensors_outside(model: torch.nn.Module) -> bool:
    """A tensor held by a module other than as a parameter or buffer (directly, or in a list,
    tuple or dict): to_empty would leave it on the meta device."""
    def holds(x, depth=0) -> bool:
        if isinstance(x, torch.Tensor):
            return True
        if depth < 3 and isinstance(x, (list, tuple)):
            return any(holds(v, depth + 1) for v in x)
        if depth < 3 and isinstance(x, dict):
            return any(holds(v, depth + 1) for v in x.values())
        return False
    return any(holds(v) for m in model.modules() for k, v in vars(m).items()
               if k not in ("_parameters", "_buffers", "_modules"))
