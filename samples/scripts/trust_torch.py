"""Programs whose compiled kernels exercise every figure irscope rolls up (a GPU sample's source).

Run: python samples/scripts/trust_torch.py [--device cuda|cpu]

- a training step of a small block (forward + backward graphs, one compile);
- the same block in float32 and bfloat16 (Inductor gives their kernels the same names);
- ``sincos``: sin/cos of large arguments (their range reduction keeps a local array, which is
  local memory but no spill);
- a recompilation (a new batch size);
- on a GPU, hand-written Triton kernels: a loop with a tail (rotated loops in the PTX) and
  atomic adds (RED/ATOMG in the SASS).
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """LayerNorm, a GELU MLP and a residual: the shape of a transformer's MLP half."""

    def __init__(self, width: int = 64):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def sincos(x):
    """sin and cos of arguments far from zero."""
    return torch.sin(x * 1000.0) * torch.cos(x * 1000.0) + x


def train_step(block, x, dtype):
    block = block.to(dtype)
    step = torch.compile(lambda inp: block(inp).float().pow(2).mean())
    loss = step(x.to(dtype))
    loss.backward()
    return loss


def triton_kernels(device: str):
    import triton
    import triton.language as tl

    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        """Sum each row in BLOCK-wide steps: a loop whose trip count is known only at run time."""
        row = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0))

    @triton.jit
    def histogram_kernel(x_ptr, bins_ptr, n, NUM_BINS: tl.constexpr, BLOCK: tl.constexpr):
        """Count values into bins with atomic adds to global memory."""
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        index = tl.minimum(tl.maximum((x * NUM_BINS).to(tl.int32), 0), NUM_BINS - 1)
        tl.atomic_add(bins_ptr + index, 1, mask=mask)

    x = torch.rand(64, 1000, device=device)
    out = torch.empty(64, device=device)
    row_sum_kernel[(64,)](x, out, 1000, BLOCK=128)
    bins = torch.zeros(16, dtype=torch.int32, device=device)
    histogram_kernel[(triton.cdiv(x.numel(), 1024),)](x, bins, x.numel(), NUM_BINS=16,
                                                       BLOCK=1024)
    torch.testing.assert_close(out, x.sum(dim=1), rtol=1e-4, atol=1e-3)
    assert int(bins.sum()) == x.numel()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(32, 64, device=args.device)
    block = Block().to(args.device)
    train_step(block, x, torch.float32)
    train_step(Block().to(args.device), x, torch.bfloat16)
    compiled = torch.compile(sincos)
    compiled(x)
    compiled(torch.randn(48, 64, device=args.device))  # a recompilation
    if args.device == "cuda":
        triton_kernels(args.device)
    print("trust_torch: done on", args.device)


if __name__ == "__main__":
    main()
