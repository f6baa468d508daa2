"""A Triton kernel called from a jitted JAX function through jax_triton (a GPU and CUDA JAX).

    python jax_triton_add.py
"""

import jax
import jax.numpy as jnp
import jax_triton as jt
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, o_ptr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + i, tl.load(x_ptr + i) + tl.load(y_ptr + i))


@jax.jit
def add(x, y):
    return jt.triton_call(x, y, kernel=add_kernel,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.size // 64,), BLOCK=64)


x = jnp.arange(1024, dtype=jnp.float32)
print("sum", float(jnp.sum(add(x, x))))  # 2 * sum(range(1024)) = 1047552
