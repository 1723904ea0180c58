"""Honest: the two matrices stacked and summed, a different composition than the reference's add."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    return torch.stack((a, b)).sum(dim=0)
