"""The seed examples under jax.jit.

Run: python samples/scripts/seed_jax.py
"""

import jax
import jax.numpy as jnp


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
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    d, h = 64, 128
    x = jax.random.normal(k[0], (32, d))
    w1, w2 = jax.random.normal(k[1], (d, h)), jax.random.normal(k[2], (h, d))
    g1 = jax.random.normal(k[3], (d, h))
    gamma, beta = jnp.ones(d), jnp.zeros(d)
    jax.jit(mlp)(x, w1, w2).block_until_ready()
    jax.jit(activation_chain)(x).block_until_ready()
    jax.jit(complex_activation)(x).block_until_ready()
    jax.jit(post_norm_block)(x, w1, w2, gamma, beta).block_until_ready()
    jax.jit(mlp_dead_gate)(x, w1, w2, g1).block_until_ready()
    print("seed_jax: done on", jax.devices()[0].platform)


if __name__ == "__main__":
    main()
