"""A JAX training step of the size people compile: an MLP with SGD, a lax.scan RNN and a vmap.

Run: python samples/scripts/jax_train.py [--steps 3] [--flax | --flax-only]   (flax.linen + optax)
     [--profile DIR]   (jax.profiler over the flax steps after the first, written under DIR)
"""

import argparse

import jax
import jax.numpy as jnp


def init_mlp(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (a, b)) / jnp.sqrt(a), jnp.zeros(b))
            for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


@jax.jit
def train_step(params, x, y):
    """One SGD step on a squared error."""
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((mlp(p, x) - y) ** 2))(params)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), loss


@jax.jit
def rnn(w, xs):
    """An Elman RNN over a sequence with lax.scan."""
    def cell(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.sum()
    return jax.lax.scan(cell, jnp.zeros(xs.shape[-1]), xs)


@jax.jit
def batched_norms(xs):
    """Per-row layer norms through vmap."""
    def norm(x):
        return (x - x.mean()) / jnp.sqrt(x.var() + 1e-5)
    return jax.vmap(norm)(xs)


def flax_step(steps: int, profile: str | None = None):
    import flax.linen as nn
    import optax

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            for width in (256, 256):
                x = nn.gelu(nn.Dense(width)(x))
            return nn.Dense(1)(x)

    model, tx = Model(), optax.adam(1e-3)
    x, y = jnp.ones((64, 128)), jnp.zeros((64, 1))
    params = model.init(jax.random.PRNGKey(0), x)
    state = tx.init(params)

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((model.apply(p, x) - y) ** 2))(params)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    params, state, loss = step(params, state)  # the compile, outside any profile window
    if profile:
        jax.profiler.start_trace(profile)
    for _ in range(steps - 1):
        params, state, loss = step(params, state)
    loss.block_until_ready()
    if profile:
        jax.profiler.stop_trace()
    return loss


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--flax", action="store_true")
    ap.add_argument("--flax-only", action="store_true", help="the flax/optax steps alone")
    ap.add_argument("--profile", help="a jax.profiler trace of the flax steps, written here")
    args = ap.parse_args()
    if args.flax_only:
        print(f"jax_train: flax {float(flax_step(args.steps, args.profile)):.4f}")
        return
    key = jax.random.PRNGKey(0)
    params = init_mlp(key, [128, 512, 512, 512, 1])
    x, y = jax.random.normal(key, (256, 128)), jnp.zeros((256, 1))
    for _ in range(args.steps):
        params, loss = train_step(params, x, y)
    _, sums = rnn(jax.random.normal(key, (128, 128)) * 0.1, jax.random.normal(key, (64, 128)))
    norms = batched_norms(jax.random.normal(key, (32, 256)))
    extra = float(flax_step(args.steps, args.profile)) if args.flax else 0.0
    print(f"jax_train: loss {float(loss):.4f} rnn {float(sums[-1]):.3f} "
          f"norm {float(norms.mean()):.3f} flax {extra:.4f}")


if __name__ == "__main__":
    main()
