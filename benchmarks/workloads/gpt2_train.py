"""GPT-2 (from its config, random weights) under torch.compile: forward + a training step.

Run on a CUDA machine with transformers installed:
    python gpt2_train.py [--layers 12] [--steps 2] [--embd 768 --heads 12 --vocab 50257 --seq 256]
        [--profile DIR --profile-steps 3]   # torch.profiler over the last steps, a Chrome trace
        [--cupti]                           # CUPTI kernel activity over the last steps (cupti-python)
Steps are timed one by one (after a synchronize) and printed as `step_ms`, so arms that profile
can be compared with arms that do not on the same steps.
"""

import argparse
import json
import time

import torch


def cupti_window():
    """CUPTI's kernel activity records, collected while the returned context is open."""
    from contextlib import contextmanager

    from cupti import cupti

    records = []

    def requested():
        return 8 << 20, 0

    def completed(activities):
        for a in activities:
            records.append((a.name, a.end - a.start))

    @contextmanager
    def window():
        cupti.activity_register_callbacks(requested, completed)
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
        try:
            yield records
        finally:
            cupti.activity_flush_all(1)
            cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)

    return window()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--profile", help="write a torch.profiler Chrome trace of the last steps here")
    ap.add_argument("--cupti", action="store_true", help="CUPTI kernel records of the last steps")
    ap.add_argument("--profile-steps", type=int, default=3)
    args = ap.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=args.layers, n_embd=args.embd, n_head=args.heads,
                        vocab_size=args.vocab, n_positions=max(args.seq, 64))
    model = GPT2LMHeadModel(config).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    compiled = torch.compile(model)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), device="cuda")

    def step():
        loss = compiled(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    start = time.perf_counter()
    window_from = args.steps - args.profile_steps if (args.profile or args.cupti) else args.steps
    step_ms, profiled_ms, kernels = [], [], None
    for i in range(args.steps):
        if i == window_from:
            if args.profile:
                from torch.profiler import ProfilerActivity, profile
                prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
                prof.__enter__()
            else:
                window = cupti_window()
                kernels = window.__enter__()
        t = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        (profiled_ms if i >= window_from else step_ms).append(1000 * (time.perf_counter() - t))
    if args.profile:
        prof.__exit__(None, None, None)
        import os
        os.makedirs(args.profile, exist_ok=True)
        prof.export_chrome_trace(os.path.join(args.profile, "trace.json"))
    elif args.cupti:
        window.__exit__(None, None, None)
        print("cupti:", json.dumps({"kernels": len(kernels),
                                    "kernel_ns": sum(d for _, d in kernels)}))
    print("step_ms:", json.dumps({"plain": [round(x, 2) for x in step_ms],
                                  "profiled": [round(x, 2) for x in profiled_ms]}))
    print(f"gpt2: {args.layers} layers, loss {loss.item():.3f}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
