"""A small MLP jitted by Lightning Thunder, one training step: forward, backward, SGD update.

    python thunder_mlp.py [--executor torch|torch_compile|nvfuser] [--device cpu|cuda]

``torch`` runs every operation through PyTorch (Thunder's default executors on the CPU),
``torch_compile`` fuses regions through torch.compile (Inductor), ``nvfuser`` through nvFuser
(a GPU and the nvfuser package).
"""

import argparse

import thunder
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--executor", choices=("torch", "torch_compile", "nvfuser"), default="torch")
parser.add_argument("--device", default="cpu")
args = parser.parse_args()

if args.executor == "torch_compile":
    from thunder.executors.torch_compile import torch_compile_ex

    executors = [torch_compile_ex]
elif args.executor == "nvfuser":
    executors = ["nvfuser"]
else:
    executors = None  # Thunder's defaults: nvFuser where there is a GPU and nvfuser, else torch

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(args.device)
step = thunder.jit(model, executors=executors) if executors else thunder.jit(model)
x = torch.randn(2, 8, device=args.device)
loss = step(x).square().mean()
loss.backward()
with torch.no_grad():
    for p in model.parameters():
        p -= 0.1 * p.grad
print(f"loss {loss.item():.6f}")
