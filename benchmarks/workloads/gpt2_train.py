"""GPT-2 (12 layers, from its config, random weights) under torch.compile: forward + a training step.

Run on a CUDA machine with transformers installed:  python gpt2_train.py [--layers 12] [--steps 2]
"""

import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=args.layers)
    model = GPT2LMHeadModel(config).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    compiled = torch.compile(model)
    ids = torch.randint(0, config.vocab_size, (4, 256), device="cuda")
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = compiled(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print(f"gpt2: {args.layers} layers, loss {loss.item():.3f}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
