"""Runtime scalars: raw_params of one number passed per call, positional
after the tensors or as keywords, checked by the C binding, without a
new specialisation per value (docs/python.md, "Runtime scalars")."""
import numpy as np
import pytest

import luaptx

SCALE = '''
local pyptx = require "pyptx"
local reg, ptx, Tile, T = pyptx.reg, pyptx.ptx, pyptx.Tile, pyptx.types
return pyptx.kernel "scale" {
  arch = "sm_80",
  in_specs = { Tile("N", T.f32) }, out_specs = { Tile("N", T.f32) },
  raw_params = { { "f32", "alpha" }, { "u32", "n" } },
  block = { 32 }, grid = function(p) return { math.ceil(p.N / 32) } end,
  function(X, Y)
    local px, py = ptx.global_ptrs(X, Y)
    local alpha, n = ptx.param("alpha", T.f32), ptx.param("n", T.u32)
    local i = reg.from(ptx.special.ctaid.x(), T.u32):fma(32, reg.from(ptx.special.tid.x(), T.u32))
    ptx.if_(i:lt(n), function()
      local off, x = i:mul_wide(4), reg.scalar(T.f32)
      ptx.ld.global(x, ptx.addr(px + off))
      ptx.st.global(ptx.addr(py + off), x * alpha)
    end)
    ptx.ret()
  end,
}
'''


@pytest.fixture(scope="module")
def ks():
    return luaptx.load_string(SCALE, "=scale.lua", device="emu")


def test_positional_and_keyword_scalars_reuse_one_specialisation(ks):
    x = np.arange(64, dtype=np.float32)
    n0 = len(ks.scale._specs)
    for alpha in (0.5, 2.0, -3.0, 7.25):
        np.testing.assert_array_equal(ks.scale(x, alpha, 64), x * alpha)
        np.testing.assert_array_equal(ks.scale(x, alpha=alpha, n=64), x * alpha)
        np.testing.assert_array_equal(ks.scale(x, alpha, n=64), x * alpha)
    assert len(ks.scale._specs) == max(n0, 1)      # one trace for every value
    y = np.zeros(64, np.float32)
    ks.scale(x, y, np.float32(3), np.uint32(10))           # numpy scalars, outputs given
    np.testing.assert_array_equal(y[:10], x[:10] * 3)
    assert not y[10:].any()               # n bounds the kernel: a runtime value


def test_scalar_errors_name_the_scalar(ks):
    x = np.ones(8, np.float32)
    with pytest.raises(TypeError, match=r'kernel "scale" \(scale.lua:\d+\): scalar n is 1.5, a float, but raw_params\[2\] is u32'):
        ks.scale(x, 1.0, 1.5)
    with pytest.raises(ValueError, match=r"scalar n is -1 but raw_params\[2\] is u32; valid: 0..4294967295"):
        ks.scale(x, 1.0, -1)
    with pytest.raises(ValueError, match=r"scalar n is 4294967296 .*valid: 0..4294967295"):
        ks.scale(x, 1.0, n=2 ** 32)
    with pytest.raises(ValueError, match=r"scalar 2 is above 2\^64-1; valid: an integer of 64 bits"):
        ks.scale(x, 1.0, 2 ** 70)
    with pytest.raises(ValueError, match=r"scalar n \(raw_params\[2\]\) has no value"):
        ks.scale(x, 1.0)
    with pytest.raises(TypeError, match=r"scalar alpha is a bool"):
        ks.scale(x, True, 8)
    with pytest.raises(TypeError, match=r"takes 2 runtime scalar\(s\) \(alpha, n\), got 3 positional"):
        ks.scale(x, 1.0, 8, 9)
    with pytest.raises(TypeError, match=r"scalar alpha given positionally and as a keyword"):
        ks.scale(x, 1.0, 8, alpha=2.0)


def test_template_value_still_sets_a_scalar(ks):
    """A raw param given as a template value (the old way) still works;
    a runtime value overrides it for one call."""
    x = np.arange(8, dtype=np.float32)
    k = ks.scale.specialize(n=8)
    np.testing.assert_array_equal(k.launch((x,), scalars=(2.0, None))[0], x * 2)
    np.testing.assert_array_equal(k.launch((x,), scalars=(2.0, 4))[0][:4], x[:4] * 2)


def test_torch_op_takes_runtime_scalars_eager_and_compiled(ks):
    torch = pytest.importorskip("torch")
    import luaptx.torch as lt
    op = lt.op(ks.scale, name="scalartest::scale")
    x = torch.arange(32, dtype=torch.float32)
    assert torch.equal(op(x, 2.0, 32), x * 2) and torch.equal(op(x, alpha=3.0, n=32), x * 3)
    n0 = len(ks.scale._specs)
    f = torch.compile(lambda x, a: op(x, a, 32), fullgraph=True)
    for a in (0.5, 4.0, -1.0):
        assert torch.equal(f(x, a), x * a)
    assert len(ks.scale._specs) == n0
    with pytest.raises(TypeError, match=r"scalar n is 1.5, a float"):
        op(x, 2.0, 1.5)
    with pytest.raises(TypeError, match=r"unknown keyword\(s\) beta; valid: its runtime scalars \(alpha, n\) and stream"):
        op(x, 2.0, 32, beta=1)
    op16 = lt.op(ks.scale, name="scalartest::scale16", n=16)     # n a template value: the default
    y = op16(x, 2.0)
    assert torch.equal(y[:16], x[:16] * 2)
    g = torch.compile(lambda x: op16(x, 0.5), fullgraph=True)
    assert torch.equal(g(x)[:16], x[:16] * 0.5)
    assert torch.equal(op16(x, 2.0, 32), x * 2)


def test_jax_call_passes_runtime_scalars_as_attributes(ks):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import luaptx.jax as lj
    x = jnp.arange(32, dtype=jnp.float32)
    np.testing.assert_array_equal(lj.call(ks.scale, x, 2.0, 32), np.asarray(x) * 2)
    n0 = len(ks.scale._specs)
    f = jax.jit(lambda x, a: lj.call(ks.scale, x, a, n=32), static_argnums=1)
    for a in (0.5, 4.0):
        np.testing.assert_array_equal(f(x, a), np.asarray(x) * a)
    assert len(ks.scale._specs) == n0
    with pytest.raises(TypeError, match=r"a runtime scalar is a traced value; .*static_argnums"):
        jax.jit(lambda x, a: lj.call(ks.scale, x, a, 32))(x, 1.0)
    with pytest.raises(ValueError, match=r"scalar n is -2 but raw_params\[2\] is u32"):
        lj.call(ks.scale, x, 1.0, -2)
