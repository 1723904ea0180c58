"""Numbers the checks are decided on. Pure functions of tensors the judge owns (never candidate objects)."""

from __future__ import annotations

import dataclasses
import math

import torch

from . import crossing

# Relative Frobenius error allowed per declared output dtype. float32 sits between honest float32
# (1e-7 at 256^3, 1.2e-6 at 4096^3, measured on an H200) and the thinnest cheat (float16 operands:
# 3.6e-4, TF32 7.7e-4, bfloat16 2.9e-3): a factor 7 below the cheats, 40 above honest work.
TOLERANCE = {torch.float64: 1e-12, torch.float32: 5e-5, torch.float16: 1.5e-3, torch.bfloat16: 1e-2}
# A candidate may be a few times less accurate than the reference implementation itself.
REFERENCE_SLACK = 8.0

# Integer dtype of each element width: the view under which bit patterns are compared.
INT_OF_WIDTH = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def tolerance(dtype: torch.dtype, reference_error: float | None, declared: float | None = None) -> float:
    """The bound: the one the problem declares (TOLERANCE, or a GPU MODE task's checker), else its
    dtype's; never below a few times the reference implementation's own error."""
    base = TOLERANCE.get(dtype, 0.0) if declared is None else declared
    if reference_error is not None and math.isfinite(reference_error):
        base = max(base, REFERENCE_SLACK * reference_error)
    return base


# The most the reference implementation may miss its float64 result by, in units of its dtype's
# bound, and still be the yardstick (judge/reference.py), on the sets it ran on or any other.
REFERENCE_CEILING = 10.0


def on_set(dtype: torch.dtype, set_error: float | None, declared: float | None = None) -> float:
    """The bound on one input set from the reference implementation's own error on that set
    (judge/own_error.py), capped at REFERENCE_CEILING times the dtype's or declared bound."""
    if set_error is None or not math.isfinite(set_error):
        return tolerance(dtype, None, declared)
    base = TOLERANCE.get(dtype, 0.0) if declared is None else declared
    return tolerance(dtype, min(set_error, REFERENCE_CEILING * base), declared)


def widest_on_set(dtype: torch.dtype, declared: float | None = None) -> float:
    """The widest bound any set's own reference error can give (`on_set` at the ceiling)."""
    base = TOLERANCE.get(dtype, 0.0) if declared is None else declared
    return on_set(dtype, REFERENCE_CEILING * base, declared)


def rel_error(out: torch.Tensor, ref64: torch.Tensor, floor: float = 0.0) -> float:
    """||out - ref|| / max(||ref||, floor) in float64 (inf when out has non-finite values where ref
    is finite). `floor` (see `error_floor`) keeps an output that is truly zero from turning the
    float32 rounding of its arithmetic into an enormous relative error. Integer and bool outputs
    are compared exactly: the fraction of elements that differ.
    Computed where the reference is (each function here: on its last tensor's device), but for a
    big output on an accelerator against a reference on the host (`_compared_on`)."""
    if not ref64.is_floating_point():
        if out.shape != ref64.shape:
            return math.inf
        if out.is_floating_point():   # a float where an index or a flag belongs is never exact
            return 1.0
        ties = getattr(ref64, "index_ties", None)   # an argmax/argmin: any index of the extreme (index_ties.py)
        if ties is not None:
            from .index_ties import mismatches
            differ = mismatches(out, ref64, ties)
        else:
            differ = torch.ne(out.to(ref64.device, ref64.dtype), ref64).sum().item()
        return differ / max(ref64.numel(), 1)
    if ref64.numel() > CHUNK and out.shape == ref64.shape:
        num, ref_norm, o_finite, ref_finite = _chunked_norms(out, ref64)
    else:
        o = out.to(ref64.device, torch.float64)
        o_finite, ref_finite = bool(torch.isfinite(o).all()), bool(torch.isfinite(ref64).all())
        ref_norm = torch.linalg.vector_norm(ref64, dtype=torch.float64).item()
        num = torch.linalg.vector_norm(o - ref64).item()
    if not o_finite and ref_finite:
        return math.inf
    denom = max(ref_norm, floor)
    if denom == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / denom


# Elements a comparison converts to float64 at once. A big problem's outputs (6 GiB and more,
# judged on the host) compared whole would hold two or three float64 temporaries of their size
# beside everything the vet keeps; in slices of this many they hold 128 MiB each.
CHUNK = 1 << 24
# On the host, slices this small (2 MiB in float64) stay in the CPU's caches and reuse the
# allocator's blocks: a 25M-element comparison took 0.41 s in CHUNK slices and 0.03 s in these
# (2 cores). A device keeps CHUNK: each slice there costs a launch and a synchronisation.
HOST_SLICE = 1 << 18


def _slices(n: int, step: int):
    return (slice(i, min(i + step, n)) for i in range(0, n, step))


def _slice_for(t: torch.Tensor, row: int = 1) -> int:
    """Rows of `row` elements a slice of `t` holds: HOST_SLICE elements on the host, CHUNK elsewhere."""
    return max(1, (HOST_SLICE if t.device.type == "cpu" else CHUNK) // max(row, 1))


def _chunked_norms(out: torch.Tensor, ref: torch.Tensor, nan_as_inf: bool = False,
                   on: torch.device | None = None) -> tuple[float, float, bool, bool]:
    """(||out - ref||, ||ref||, out all finite, ref all finite) in float64, slice by slice, where
    `_compared_on` says (`on`: for two tensors on the host, this accelerator instead, each slice
    crossing to it); `nan_as_inf`: a NaN in the difference counts as infinitely far. With a finite
    reference, out is finite exactly when the difference's norm is (read from the norms, not from
    a pass of its own); a reference with non-finite values has each side's finiteness read slice
    by slice."""
    o_flat, r_flat = out.reshape(-1), ref.reshape(-1)
    at = on if on is not None and o_flat.device.type == r_flat.device.type == "cpu" else _compared_on(o_flat, r_flat)
    diff, ref_norm, _, _ = _sliced_norms(o_flat, r_flat, nan_as_inf, False, at)
    if not math.isfinite(ref_norm):
        return _sliced_norms(o_flat, r_flat, nan_as_inf, True, at)
    return diff, ref_norm, math.isfinite(diff), True


def _sliced_norms(o_flat: torch.Tensor, r_flat: torch.Tensor, nan_as_inf: bool, flags: bool, at: torch.device):
    """The norms of `_chunked_norms`, and (`flags`) each side's finiteness, else True for both."""
    diff_sq = ref_sq = 0.0
    o_finite = r_finite = True
    for o, r in _slice_pairs(o_flat, r_flat, 1, at):
        r = r.to(torch.float64)
        o = o.to(torch.float64)
        if flags:
            o_finite = o_finite and bool(torch.isfinite(o).all())
            r_finite = r_finite and bool(torch.isfinite(r).all())
        d = torch.nan_to_num(o - r, nan=math.inf) if nan_as_inf else o - r
        diff_sq += torch.linalg.vector_norm(d).item() ** 2
        ref_sq += torch.linalg.vector_norm(r).item() ** 2
    return math.sqrt(diff_sq), math.sqrt(ref_sq), o_finite, r_finite


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One pass over an output and its float64 reference (`compare`), all that `rel_error` and
    `row_errors` read of them: a big problem's output judged on the host costs seconds a pass, and
    the checks ask for its error with and without the floor, and row by row."""

    diff: float          # ||out - ref||; not finite where out has a non-finite value
    ref_norm: float      # ||ref|| (finite: `compare` applies to finite references only)
    rows: tuple[torch.Tensor, torch.Tensor] | None = None   # per row (as_rows): ||out_i - ref_i||, ||ref_i||


def compare(out: torch.Tensor, ref64: torch.Tensor) -> Comparison | None:
    """The norms of `rel_error` in one pass, slice by slice where `_compared_on` says. None where the
    pass does not apply (integer or bool outputs, shapes that differ, a reference with non-finite
    values): `rel_error` decides those itself."""
    return _compare(out, ref64, rows=False)


def compare_rows(out: torch.Tensor, ref64: torch.Tensor) -> Comparison | None:
    """`compare`, with the per-row norms `row_errors` reads, in the same pass."""
    return _compare(out, ref64, rows=True)


def _compare(out: torch.Tensor, ref64: torch.Tensor, rows: bool) -> Comparison | None:
    if not ref64.is_floating_point() or out.shape != ref64.shape:
        return None
    o_all, r_all = (as_rows(out), as_rows(ref64)) if rows else (out.reshape(-1), ref64.reshape(-1))
    unit = r_all.shape[1] if rows else 1    # elements a slice's unit (a row, or an element) holds
    diff_sq = ref_sq = 0.0
    row_parts: list[tuple[torch.Tensor, torch.Tensor]] = []
    for o, r in _slice_pairs(o_all, r_all, unit, _compared_on(out, ref64)):
        r = r.to(torch.float64)
        d = o.to(torch.float64) - r
        if rows:   # a NaN in an output row is infinitely far from its finite reference row (a NaN
            # norm would compare as within any bound); the whole norm needs no mapping: NaN or
            # inf, it is not finite, which rel_error_of reads as inf
            d = torch.nan_to_num(d, nan=math.inf, posinf=math.inf, neginf=math.inf)
            row_parts.append((torch.linalg.vector_norm(d, dim=1), torch.linalg.vector_norm(r, dim=1)))
        else:
            diff_sq += torch.linalg.vector_norm(d).item() ** 2
            ref_sq += torch.linalg.vector_norm(r).item() ** 2
    by_row = None
    if rows:
        empty = torch.zeros(0, dtype=torch.float64, device=ref64.device)
        by_row = (torch.cat([d for d, _ in row_parts]).to(ref64.device) if row_parts else empty,
                  torch.cat([r for _, r in row_parts]).to(ref64.device) if row_parts else empty)
        diff_sq = torch.linalg.vector_norm(by_row[0]).item() ** 2
        ref_sq = torch.linalg.vector_norm(by_row[1]).item() ** 2
    if not math.isfinite(ref_sq):
        return None
    return Comparison(math.sqrt(diff_sq), math.sqrt(ref_sq), by_row)


def _compared_on(out: torch.Tensor, ref64: torch.Tensor) -> torch.device:
    """Where a pass over an output and its reference runs: on the output's device where the output
    is on an accelerator and its reference on the host (a big problem judged on the host, the output
    in the buffer the judge lent for it: the reference crosses a chunk at a time, and the float64
    arithmetic runs on the device rather than the host's cores); else the reference's."""
    return out.device if ref64.device.type == "cpu" and out.device.type != "cpu" else ref64.device


def _slice_pairs(o_all: torch.Tensor, r_all: torch.Tensor, unit: int, at: torch.device):
    """(out slice, reference slice) pairs over the first dimension, both on `at`: the side that is
    elsewhere moved there CHUNK elements at a time (one copy each, not one per slice), compared in
    slices `_slice_for` `at`."""
    n = r_all.shape[0]
    step = _slice_for(o_all if o_all.device == at else r_all, unit)
    outer = n if o_all.device == r_all.device else step * max(1, CHUNK // (step * max(unit, 1)))
    for osl in _slices(n, outer):
        o_part, r_part = crossing.moved_to(o_all[osl], at), crossing.moved_to(r_all[osl], at)
        for sl in _slices(r_part.shape[0], step):
            yield o_part[sl], r_part[sl]


def error_and_rows(out: torch.Tensor, ref64: torch.Tensor, floor: float) -> tuple[float, torch.Tensor | None]:
    """rel_error(out, ref64, floor) and row_errors(out, ref64) (None for an output that has no
    rows to compare: not floating, or not the reference's shape), from one pass where it applies."""
    rowed = out.is_floating_point() and ref64.is_floating_point() and out.shape == ref64.shape
    c = compare_rows(out, ref64) if rowed else None
    if c is None:
        return rel_error(out, ref64, floor), row_errors(out, ref64) if rowed else None
    return rel_error_of(c, floor), row_errors_of(c)


def rel_error_of(c: Comparison, floor: float = 0.0) -> float:
    """`rel_error` from a `compare` pass."""
    if not math.isfinite(c.diff):
        return math.inf
    denom = max(c.ref_norm, floor)
    if denom == 0.0:
        return 0.0 if c.diff == 0.0 else math.inf
    return c.diff / denom


def row_errors_of(c: Comparison) -> torch.Tensor:
    """`row_errors` from a `compare_rows` pass (its reference is finite)."""
    diff, denom = c.rows
    err = diff / denom
    err[(diff == 0) & (denom == 0)] = 0.0
    return err


# An output's error is measured against at least this fraction of the size it would have at the
# inputs' own scale: a mean after a normalisation is zero up to rounding, and its float32 rounding
# (1e-7 of the summands) must read as the rounding it is, not as a relative error of 1e8.
FLOOR_FRACTION = 1e-3


def error_floor(inputs: list, ref64: torch.Tensor) -> float:
    """The norm below which an output counts as zero: FLOOR_FRACTION x sqrt(its elements) x the
    RMS of the problem's floating inputs (0 without any: purely relative)."""
    if not ref64.is_floating_point():
        return 0.0
    total, count = 0.0, 0
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
            sq, n = _finite_squares(x)
            total, count = total + sq, count + n
    if not count:
        return 0.0
    return FLOOR_FRACTION * math.sqrt(ref64.numel()) * math.sqrt(total / count)


def _finite_squares(x: torch.Tensor) -> tuple[float, int]:
    """The sum of squares of `x`'s finite elements, and their count, in float64 slice by slice
    (a mask indexing the whole would hold an int64 index per element and dimension: 40 GiB for
    a 4 GiB 5-D input set)."""
    flat = x.reshape(-1)
    total, count = 0.0, 0
    for sl in _slices(flat.numel(), _slice_for(flat)):
        part = flat[sl].to(torch.float64)
        finite = torch.isfinite(part)
        total += torch.linalg.vector_norm(torch.where(finite, part, 0.0)).item() ** 2
        count += int(finite.sum().item())
    return total, count


ROW_MIN = 256   # elements a row holds at least (trailing dims merged): fewer, and chance decides


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """`t` as a 2-D (rows, elements) view: the trailing dimensions merged until a row holds at
    least ROW_MIN elements (a tensor smaller than that is one row)."""
    length, i = 1, t.dim()
    while i > 0 and length < ROW_MIN:
        i -= 1
        length *= t.shape[i]
    return t.reshape(-1, max(length, 1)) if t.numel() else t.reshape(0, 1)


def row_errors(out: torch.Tensor, ref64: torch.Tensor) -> torch.Tensor:
    """||out_i - ref_i|| / ||ref_i|| per row (`as_rows`), in float64: 0 where both rows are zero,
    inf where only the reference's is, or where out has non-finite values the reference has not."""
    o_rows, r_rows = as_rows(out), as_rows(ref64)
    step = _slice_for(ref64, r_rows.shape[1])   # rows a slice holds
    parts = [_row_errors(o_rows[sl].to(ref64.device, torch.float64), r_rows[sl].to(torch.float64))
             for sl in _slices(r_rows.shape[0], step)]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64, device=ref64.device)


def _row_errors(o: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    diff = torch.linalg.vector_norm(torch.nan_to_num(o - r, nan=math.inf), dim=1)
    denom = torch.linalg.vector_norm(r, dim=1)
    err = diff / denom
    err[(diff == 0) & (denom == 0)] = 0.0
    return torch.where(torch.isfinite(r).all(dim=1), err, torch.zeros_like(err))


def ulp_stats(out: torch.Tensor, ref64: torch.Tensor, dtype: torch.dtype) -> dict:
    """Per-element error in units of the declared dtype's epsilon, relative to |ref|."""
    if not dtype.is_floating_point:
        return {}
    eps = torch.finfo(dtype).eps
    o_flat, r_flat = out.reshape(-1), ref64.reshape(-1)
    n = r_flat.numel()
    if n > CHUNK and out.shape == ref64.shape:   # the floor from every element, the statistics from a strided sample
        abs_sum = sum(r_flat[sl].to(torch.float64).abs().sum().item() for sl in _slices(n, _slice_for(ref64)))
        floor = max(abs_sum / n * 1e-3, torch.finfo(dtype).tiny)
        step = n // _SAMPLE + 1
        o, ref = o_flat[::step].to(ref64.device, torch.float64), r_flat[::step].to(torch.float64)
    else:
        o, ref = out.to(ref64.device, torch.float64), ref64.to(torch.float64)
        floor = max(ref.abs().mean().item() * 1e-3, torch.finfo(dtype).tiny)
    ulps = ((o - ref).abs() / (eps * ref.abs().clamp_min(floor))).flatten()
    ulps = ulps[torch.isfinite(ulps)]
    if ulps.numel() == 0:
        return {"ulp_median": math.inf, "ulp_p99": math.inf}
    if ulps.numel() > _SAMPLE:  # quantile has a size limit; a strided sample is plenty
        ulps = ulps[:: ulps.numel() // _SAMPLE + 1]
    q = torch.quantile(ulps, torch.tensor([0.5, 0.99], dtype=torch.float64, device=ulps.device))
    return {"ulp_median": q[0].item(), "ulp_p99": q[1].item()}


_SAMPLE = 1_000_000   # elements the ULP statistics are taken over, at most


def norm(t: torch.Tensor) -> float:
    """||t|| in float64 (slice by slice)."""
    flat = t.reshape(-1)
    return math.sqrt(sum(torch.linalg.vector_norm(flat[sl].to(torch.float64)).item() ** 2
                         for sl in _slices(flat.numel(), _slice_for(t))))


def bitwise_differences(a: torch.Tensor, b: torch.Tensor) -> tuple[int, float]:
    """How many elements of two tensors differ, and the largest |a - b| among them in float64
    (inf where a NaN stands against a number, or where the sizes differ), slice by slice: two
    6 GiB outputs read whole as float64 would take 36 GiB."""
    fa, fb = a.contiguous().view(-1), b.contiguous().view(-1)
    if fa.numel() != fb.numel():
        return max(fa.numel(), fb.numel()), math.inf
    count, most = 0, 0.0
    for sl in _slices(fa.numel(), _slice_for(fa)):
        x, y = fa[sl], fb[sl].to(fa.device)
        count += int((x != y).sum().item())
        d = (x.to(torch.float64) - y.to(torch.float64)).abs().nan_to_num(nan=math.inf)
        most = max(most, d.max().item())
    return count, most


def rel_distance(a: torch.Tensor, b: torch.Tensor, on: torch.device | None = None) -> float:
    """||a - b|| / ||b||, both read as float64; inf when shapes cannot be compared. `on`: an
    accelerator where two big tensors on the host are compared (each slice crossing to it)."""
    if a.numel() != b.numel():
        return math.inf
    if b.numel() > CHUNK and a.numel() == b.numel():
        num, denom, _, _ = _chunked_norms(a, b, nan_as_inf=True, on=on)
    else:
        a64, b64 = a.reshape(-1).to(b.device, torch.float64), b.reshape(-1).to(torch.float64)
        denom = torch.linalg.vector_norm(b64).item()
        num = torch.linalg.vector_norm(torch.nan_to_num(a64 - b64, nan=math.inf)).item()
    return num / denom if denom else (0.0 if num == 0 else math.inf)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal; `a` crossing to `b`'s device a slice at a time where they are apart (a big
    output on an accelerator against one kept on the host)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    if a.dtype != torch.bool:
        w = INT_OF_WIDTH[a.element_size()]
        a, b = a.contiguous().view(w), b.contiguous().view(w)
    if a.device == b.device or a.numel() <= CHUNK:
        return bool(torch.equal(a.to(b.device), b))
    fa, fb = a.reshape(-1), b.reshape(-1)
    return all(torch.equal(fa[sl].to(b.device), fb[sl]) for sl in _slices(fa.numel(), CHUNK))


def poison_count(out: torch.Tensor, words: tuple[int, ...]) -> int:
    """Elements whose bit pattern is one of the poison words painted before the call."""
    if out.numel() == 0 or out.dtype == torch.bool:
        return 0
    bits = out.contiguous().view(INT_OF_WIDTH[out.element_size()]).reshape(-1)
    count = 0
    for sl in _slices(bits.numel(), _slice_for(bits)):
        part = bits[sl]
        hit = torch.zeros(part.shape, dtype=torch.bool, device=part.device)
        for w in words:
            hit |= part == w
        count += int(hit.sum().item())
    return count


def to_signed(word: int, width: int) -> int:
    bits = 8 * width
    word &= (1 << bits) - 1
    return word - (1 << bits) if word >= 1 << (bits - 1) else word


def nan_poison_word(dtype: torch.dtype, rand: int) -> int:
    """A quiet NaN of `dtype` with a secret payload (never produced by arithmetic on our inputs)."""
    if dtype == torch.float32:
        return to_signed(0x7FC00000 | (rand % 0x3FFFFF + 1), 4)
    if dtype == torch.float64:
        return to_signed(0x7FF8000000000000 | (rand % 0x7FFFFFFFFFFFF + 1), 8)
    if dtype == torch.float16:
        return to_signed(0x7E00 | (rand % 0x1FF + 1), 2)
    if dtype == torch.bfloat16:
        return to_signed(0x7FC0 | (rand % 0x3F + 1), 2)
    width = torch.tensor([], dtype=dtype).element_size()
    return to_signed(rand, width)


def repeated_byte_word(byte: int, width: int) -> int:
    return to_signed(int.from_bytes(bytes([byte & 0xFF]) * width, "little"), width)
