import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x):
        return self.bn(x)

def get_inputs():
    return [torch.rand(64, 64, 128, 128)]

def get_init_inputs():
    return [64]
