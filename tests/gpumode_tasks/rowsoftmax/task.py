from typing import TypedDict, TypeVar

import torch


class Config(TypedDict):
    scale: float


input_t = TypeVar("input_t", bound=tuple[torch.Tensor, Config])
output_t = TypeVar("output_t", bound=torch.Tensor)
