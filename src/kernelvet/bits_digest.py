"""A keyed digest of a tensor's bits, computed where the tensor is.

Two tensors whose digests under one key are equal hold the same bits, but for a chance of about
2^-62 that no choice of theirs can raise without the key: each of two lanes is a linear hash
sum(a_i * w_i) mod p over the tensor's 16-bit words w_i (p = 2^31 - 1 > 2^16, so two different
words differ mod p), its coefficients a_i drawn from the key, and two different tensors collide in
one lane for exactly 1 of the p - 1 values of any coefficient at which they differ. The key is
the judge's own (drawn per vet, never sent): a candidate cannot aim an output at another's digest.

What it is for: an output bit-identical to one the judge has already compared against the same
reference compares the same, and a big problem's comparison on the device against a reference on
the host costs seconds, the reference crossing to the device (compact.py).
"""

from __future__ import annotations

import hashlib

import torch

P = (1 << 31) - 1
LANES = 2
# Words per slice: a lane's products are below 2^31, so a slice's sum stays below 2^55 (int64)
CHUNK = 1 << 24


def digest(t: torch.Tensor, key: int) -> tuple:
    """(dtype, shape, lane sums) of `t`'s bits under `key`, on `t`'s device; one host sync."""
    flat = t.detach().contiguous().reshape(-1)
    words = flat.view(torch.int16) if flat.element_size() >= 2 else flat.view(torch.uint8)
    gen = torch.Generator(device=t.device)
    acc = torch.zeros(LANES, dtype=torch.int64, device=t.device)
    for i, start in enumerate(range(0, words.numel(), CHUNK)):
        w = words[start:start + CHUNK].to(torch.int64).bitwise_and_(0xFFFF)
        for lane in range(LANES):
            gen.manual_seed(_seed(key, lane, i))
            a = torch.randint(1, P, w.shape, generator=gen, device=t.device, dtype=torch.int64)
            acc[lane] += a.mul_(w).remainder_(P).sum()
        acc.remainder_(P)
    return (str(t.dtype), tuple(t.shape), *acc.tolist())


def _seed(key: int, lane: int, chunk: int) -> int:
    """A generator seed per (key, lane, slice): the slices' coefficients independent of each other."""
    h = hashlib.blake2b(f"{key}/{lane}/{chunk}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1
