"""A JAX function calling a luaptx RMS-norm kernel on CPU arrays (the
emulator), under jax.jit and jax.grad (through the forward/backward pair
as a custom VJP), checked against the same function in jax.numpy.

    build/pyvenv/bin/python examples/python/jax_rms_norm.py
"""
import os

import jax
import jax.numpy as jnp
import numpy as np

import luaptx
import luaptx.jax as lj

HERE = os.path.dirname(os.path.abspath(__file__))
ks = luaptx.load(os.path.join(HERE, "rms_norm.lua"), device="emu")
rms_norm = lj.differentiable(ks.rms_norm_fwd, ks.rms_norm_bwd,
                             save_for_backward=("input 1", "input 2", "output 2"), returns=1)


def rms_norm_ref(x, w, eps=1e-6):
    return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def layer(norm):
    """tanh(norm(x, w) @ m).sum(): a scalar to differentiate."""
    return lambda x, w, m: jnp.tanh(norm(x, w) @ m).sum()


def main():
    # The kernels run on the emulator, which takes host memory: keep the
    # arrays on JAX's CPU device even where a GPU is JAX's default.
    with jax.default_device(jax.devices("cpu")[0]):
        run()


def run():
    kx, kw, km = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(kx, (8, 64), jnp.float32)
    w = jax.random.uniform(kw, (64,), jnp.float32) + 0.5
    m = jax.random.normal(km, (64, 16), jnp.float32) / 8
    f, ref = jax.jit(layer(rms_norm)), layer(rms_norm_ref)
    np.testing.assert_allclose(f(x, w, m), ref(x, w, m), rtol=1e-5)
    print(f"jit: {float(f(x, w, m)):.6f} (jax.numpy: {float(ref(x, w, m)):.6f})")
    g = jax.jit(jax.grad(layer(rms_norm), argnums=(0, 1)))(x, w, m)
    gr = jax.grad(ref, argnums=(0, 1))(x, w, m)
    for a, b in zip(g, gr):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    print(f"grad: max diff {max(float(jnp.abs(a - b).max()) for a, b in zip(g, gr)):.2e} against jax.numpy's")


if __name__ == "__main__":
    with jax.default_device(jax.devices("cpu")[0]):   # CPU arrays (the emulator), even where jax has a GPU
        main()
