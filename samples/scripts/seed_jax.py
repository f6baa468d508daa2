"""The seed examples under jax.jit.

Run: python samples/scripts/seed_jax.py
"""

import jax
import jax.numpy as jnp
import numpy as np


def mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def activation_chain(x):
    return jnp.exp(jax.nn.sigmoid(jnp.tanh(x)))


def complex_activation(x):
    y = jnp.tanh(x)
    y = jax.nn.sigmoid(y)
    y = jnp.exp(y)
    y = y * x
    y = jax.nn.relu(y)
    return y + 1.0


def post_norm_block(x, w1, w2, gamma, beta):
    h = x + jax.nn.gelu(x @ w1) @ w2
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    return (h - mean) / jnp.sqrt(var + 1e-5) * gamma + beta


def mlp_dead_gate(x, w1, w2, gating1):
    unused = x @ gating1  # noqa: F841  dead code on purpose
    return jax.nn.relu(x @ w1) @ w2


def main():
    # inputs made with NumPy so the only XLA modules are the five seed functions
    rng = np.random.default_rng(0)
    d, h = 64, 128
    x = rng.standard_normal((32, d), dtype=np.float32)
    w1 = rng.standard_normal((d, h), dtype=np.float32)
    w2 = rng.standard_normal((h, d), dtype=np.float32)
    g1 = rng.standard_normal((d, h), dtype=np.float32)
    gamma, beta = np.ones(d, np.float32), np.zeros(d, np.float32)
    jax.jit(mlp)(x, w1, w2).block_until_ready()
    jax.jit(activation_chain)(x).block_until_ready()
    jax.jit(complex_activation)(x).block_until_ready()
    jax.jit(post_norm_block)(x, w1, w2, gamma, beta).block_until_ready()
    jax.jit(mlp_dead_gate)(x, w1, w2, g1).block_until_ready()
    print("seed_jax: done on", jax.devices()[0].platform)


if __name__ == "__main__":
    main()
