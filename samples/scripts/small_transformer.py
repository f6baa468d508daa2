"""A small GPT-style transformer in plain PyTorch under torch.compile: forward and training steps.

Run: python samples/scripts/small_transformer.py [--device cpu|cuda] [--layers 6] [--steps 2]
     [--dtype float32|bfloat16] [--recompile]

Random weights, no downloads. Each layer is pre-norm attention (scaled dot-product) and a GELU
MLP; the compiled training step gives Inductor a forward and a backward graph, an inference
call an inference graph, and ``--recompile`` calls it again with a new sequence length.
"""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """Pre-norm attention + MLP block."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        shape = (batch, seq, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class TinyGPT(nn.Module):
    """Token and position embeddings, ``layers`` blocks, a final norm and a tied head."""

    def __init__(self, vocab: int = 512, width: int = 128, heads: int = 4, layers: int = 6,
                 context: int = 128):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=1 / math.sqrt(width))

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.norm(x) @ self.tokens.weight.t()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--recompile", action="store_true", help="infer again with a new length")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = TinyGPT(layers=args.layers).to(args.device, getattr(torch, args.dtype))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    compiled = torch.compile(model)
    ids = torch.randint(0, 512, (4, 64), device=args.device)
    for _ in range(args.steps):
        logits = compiled(ids)
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    with torch.no_grad():
        compiled(ids)
        if args.recompile:
            compiled(ids[:, :32])
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
