"""luaptx.jax on CPU arrays (the emulator): ffi_call eagerly, under jit,
vmap and grad through a custom VJP."""
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed (make test-python installs it)")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import luaptx.jax as lj  # noqa: E402


def rms_ref(x, w, eps=1e-6):
    return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def data(b=4, n=24, dtype=jnp.float32, seed=0):
    kx, kw = jax.random.split(jax.random.PRNGKey(seed))
    return jax.random.normal(kx, (b, n), dtype), jax.random.uniform(kw, (n,), dtype) + 0.5


def test_call_runs_the_kernel_eagerly(ks):
    x, w = data()
    y, r = lj.call(ks.rms_norm_fwd, x, w)
    assert y.shape == (4, 24) and y.dtype == jnp.float32 and r.shape == (4,)
    np.testing.assert_allclose(y, rms_ref(x, w), rtol=1e-5, atol=1e-6)


def test_call_works_under_jit(ks):
    x, w = data(3, 40)
    f = jax.jit(lambda x, w: lj.call(ks.rms_norm_fwd, x, w)[0] * 2)
    np.testing.assert_allclose(f(x, w), 2 * rms_ref(x, w), rtol=1e-5, atol=1e-6)
    assert "luaptx" in f.lower(x, w).as_text()


def test_vmap_runs_the_kernel_per_batch_element(ks):
    x, w = data(2, 16)
    xs = jnp.stack([x, 2 * x + 1, -x])
    ys = jax.jit(jax.vmap(lambda x: lj.call(ks.rms_norm_fwd, x, w)[0]))(xs)
    np.testing.assert_allclose(ys, jax.vmap(lambda x: rms_ref(x, w))(xs), rtol=1e-5, atol=1e-6)


def test_grad_goes_through_the_custom_vjp(ks):
    rms = lj.differentiable(ks.rms_norm_fwd_f64, ks.rms_norm_bwd_f64,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    x, w = data(3, 8, jnp.float64, seed=2)
    loss = lambda f: (lambda x, w: (jnp.sin(f(x, w))).sum())
    gx, gw = jax.jit(jax.grad(loss(rms), argnums=(0, 1)))(x, w)
    rx, rw = jax.grad(loss(rms_ref), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, rx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw, rw, rtol=1e-10, atol=1e-12)


def test_mismatches_name_the_argument_and_the_spec(ks):
    x, w = data()
    with pytest.raises(TypeError, match=r'kernel "rms_norm_fwd" \(.*rms_norm\.lua:\d+\): input 1 is f64 but in_specs\[1\] is Tile\(B, N, f32\)'):
        lj.call(ks.rms_norm_fwd, x.astype(jnp.float64), w)
    with pytest.raises(ValueError, match=r"dimension N is 24 but 12 from input 2 \(dim 1\)"):
        lj.call(ks.rms_norm_fwd, x, w[:12])
    with pytest.raises(ValueError, match=r"input 2 has rank 2"):
        lj.call(ks.rms_norm_fwd, x, x)
    with pytest.raises(TypeError, match=r"takes 2 input\(s\), got 1"):
        lj.call(ks.rms_norm_fwd, x)


def test_a_launch_error_inside_xla_carries_the_lua_message():
    import luaptx
    ks = luaptx.load_string('local p = require "pyptx"\nreturn p.kernel "big" { arch = "sm_80",\n'
                            '  in_specs = { p.Tile("N", p.types.f32) }, out_specs = { p.Tile("N", p.types.f32) },\n'
                            '  grid = function(v) return { v.G } end, params = { G = 1 }, function() p.ptx.ret() end }\n',
                            "=big.lua", device="emu")
    with pytest.raises(Exception, match=r'kernel "big": grid \(4294967296, 1, 1\) is out of range'):
        jax.block_until_ready(lj.call(ks.big, jnp.zeros(4, jnp.float32), G=4294967296))
