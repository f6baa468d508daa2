"""A two-layer MLP and a tiny attention, forward and backward twice under torch.compile, with a
`print` between them (a graph break): samples/inductor/mlp_attention_backward.output_code.py."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

class Attn(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        p = torch.softmax(s, dim=-1)
        return self.proj(p @ v)

class Model(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.fc1 = nn.Linear(d, 64)
        self.fc2 = nn.Linear(64, d)
        self.attn = Attn(d)

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        h = self.fc2(h) + x
        print("graph break here")
        h = torch.tanh(h) * torch.sigmoid(h)
        return self.attn(h) + h

m = Model()
cm = torch.compile(m)
x = torch.randn(2, 8, 32)
for _ in range(2):
    out = cm(x)
    out.sum().backward()
print("done", out.shape)
