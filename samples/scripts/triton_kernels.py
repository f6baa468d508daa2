"""Hand-written Triton kernels: vector add, row softmax, a tl.dot matmul, LayerNorm+GELU.

Used by tests (compiled ahead of time, no GPU needed) and, on a GPU, run for real:
python samples/scripts/triton_kernels.py
"""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc.to(tl.float16))


@triton.jit
def layernorm_gelu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps,
                          BLOCK: tl.constexpr):
    """LayerNorm then tanh-GELU over one row (the LoLa family's first half)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / n_cols
    y = diff / tl.sqrt(var + eps) * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
    inner = 0.7978845608028654 * (y + 0.044715 * y * y * y)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    tl.store(out_ptr + row * n_cols + cols, 0.5 * y * (1.0 + t), mask=mask)


SIGNATURES = {
    "add_kernel": ({"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                   {"BLOCK": 1024}),
    "softmax_kernel": ({"out_ptr": "*fp32", "in_ptr": "*fp32", "stride": "i32", "n_cols": "i32"},
                       {"BLOCK": 1024}),
    "matmul_kernel": ({"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32",
                       "N": "i32", "K": "i32", "stride_am": "i32", "stride_ak": "i32",
                       "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32",
                       "stride_cn": "i32"},
                      {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}),
    "layernorm_gelu_kernel": ({"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32",
                               "out_ptr": "*fp32", "n_cols": "i32", "eps": "fp32"},
                              {"BLOCK": 1024}),
}


def main():
    import torch

    dev = "cuda"
    x, y = torch.randn(4096, device=dev), torch.randn(4096, device=dev)
    out = torch.empty_like(x)
    add_kernel[(4,)](x, y, out, 4096, BLOCK=1024)
    m = torch.randn(64, 1000, device=dev)
    sm = torch.empty_like(m)
    softmax_kernel[(64,)](sm, m, m.stride(0), 1000, BLOCK=1024)
    a = torch.randn(256, 256, device=dev, dtype=torch.float16)
    b = torch.randn(256, 256, device=dev, dtype=torch.float16)
    c = torch.empty(256, 256, device=dev, dtype=torch.float16)
    matmul_kernel[(2, 2)](a, b, c, 256, 256, 256, a.stride(0), a.stride(1), b.stride(0),
                          b.stride(1), c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128,
                          BLOCK_K=32)
    w, bias = torch.ones(768, device=dev), torch.zeros(768, device=dev)
    h = torch.randn(64, 768, device=dev)
    layernorm_gelu_kernel[(64,)](h, w, bias, torch.empty_like(h), 768, 1e-5, BLOCK=1024)
    torch.cuda.synchronize()
    print("triton_kernels: done")


if __name__ == "__main__":
    main()
