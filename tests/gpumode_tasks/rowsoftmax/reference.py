"""Softmax over each row of a float32 matrix, after scaling by a configured factor."""

import torch
from task import input_t, output_t
from utils import make_match_reference


def ref_kernel(data: input_t) -> output_t:
    x, config = data
    return torch.softmax(x * config["scale"], dim=-1)


def generate_input(rows: int, cols: int, scale: float, seed: int) -> input_t:
    gen = torch.Generator().manual_seed(seed)
    x = 3.0 * torch.randn(rows, cols, generator=gen)
    return x, {"scale": scale, "note": "rows"}


check_implementation = make_match_reference(ref_kernel, rtol=2e-4, atol=1e-6)
