"""The seed examples under torch.compile: the programs irscope's tests and demo inspect.

Run: python samples/scripts/seed_torch.py [--device cpu|cuda] [--dtype float32|bfloat16]
"""

import argparse

import torch
import torch.nn.functional as F


def mlp(x, w1, w2):
    """Two-matmul MLP."""
    return torch.relu(x @ w1) @ w2


def activation_chain(x):
    """tanh -> sigmoid -> exp chain (three pointwise ops, one kernel after fusion)."""
    return torch.exp(torch.sigmoid(torch.tanh(x)))


def complex_activation(x):
    """Six eager pointwise ops that Inductor fuses into one kernel."""
    y = torch.tanh(x)
    y = torch.sigmoid(y)
    y = torch.exp(y)
    y = y * x
    y = torch.relu(y)
    return y + 1.0


def post_norm_block(x, w1, w2, gamma, beta):
    """Residual MLP block followed by LayerNorm (post-norm)."""
    h = x + F.gelu(x @ w1) @ w2
    return F.layer_norm(h, (h.shape[-1],), gamma, beta)


def mlp_dead_gate(x, w1, w2, gating1):
    """MLP whose ``x @ gating1`` is computed and never used: the compiler drops it."""
    unused = x @ gating1  # noqa: F841  dead code on purpose
    return torch.relu(x @ w1) @ w2


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--recompile", action="store_true", help="call mlp again with a new shape")
    args = ap.parse_args()
    dev, dt = args.device, getattr(torch, args.dtype)
    torch.manual_seed(0)
    d, h = 64, 128
    x = torch.randn(32, d, device=dev, dtype=dt)
    w1, w2 = torch.randn(d, h, device=dev, dtype=dt), torch.randn(h, d, device=dev, dtype=dt)
    gamma, beta = torch.ones(d, device=dev, dtype=dt), torch.zeros(d, device=dev, dtype=dt)
    g1 = torch.randn(d, h, device=dev, dtype=dt)
    torch.compile(mlp)(x, w1, w2)
    torch.compile(activation_chain)(x)
    torch.compile(complex_activation)(x)
    torch.compile(post_norm_block)(x, w1, w2, gamma, beta)
    torch.compile(mlp_dead_gate)(x, w1, w2, g1)
    if args.recompile:
        compiled = torch.compile(mlp, dynamic=False)
        compiled(x, w1, w2)
        compiled(torch.randn(48, d, device=dev, dtype=dt), w1, w2)
    print("seed_torch: done on", dev, args.dtype)


if __name__ == "__main__":
    main()
