"""A user's Triton kernel under `triton.autotune`, its steps marked with `irscope.profile()`.

Run on a CUDA machine: `irscope inspect --profile samples/scripts/triton_autotune.py`. The
first block autotunes (three configurations, each benchmarked) and the window measures the
blocks after it; outside `irscope inspect --profile` the blocks do nothing.
"""

import torch
import triton
import triton.language as tl

import irscope


@triton.autotune(configs=[triton.Config({"BLOCK": size}, num_warps=warps)
                          for size, warps in ((256, 2), (1024, 4), (4096, 8))],
                 key=["n"])
@triton.jit
def scaled_add(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + y, mask=mask)


def main(steps: int = 5) -> None:
    n = 1 << 22
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    for _ in range(steps):
        with irscope.profile():
            scaled_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, 2.0, n)
    torch.cuda.synchronize()
    print(f"triton_autotune: {float((out - (2 * x + y)).abs().max()):.3g} max error")


if __name__ == "__main__":
    main()
