"""A function recompiled three times: each new batch size fails the guards of every compile
before it (Dynamo's recompile_reasons lists one failed guard per earlier compile)."""
import torch


@torch.compile(dynamic=False, backend="eager")
def scale(x):
    return torch.sin(x) * 2


for rows in (2, 3, 4, 5):
    scale(torch.ones(rows, 4))
