"""Honest: the softmax written out (max, exp, sum, divide), in float32."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, config = data
    z = x * config["scale"]
    e = torch.exp(z - z.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
