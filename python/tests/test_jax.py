"""luaptx.jax on CPU arrays (the emulator): ffi_call eagerly, under jit,
vmap and grad through a custom VJP."""
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed (make test-python installs it)")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import luaptx.jax as lj  # noqa: E402


@pytest.fixture(autouse=True)
def on_cpu(request):
    """Arrays on the CPU (the emulator's kernels), even where jax has a GPU;
    the gpu-marked tests place theirs on it."""
    if request.node.get_closest_marker("gpu"):
        yield
        return
    with jax.default_device(jax.devices("cpu")[0]):
        yield


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
    # the C binding's words, as a launch from Lua, C or torch says them (one owner: luaptx_kernel_bind)
    with pytest.raises(ValueError, match=r'kernel "rms_norm_fwd" \(.*rms_norm\.lua:\d+\): dimension N is 24 from input 1 '
                                         r'\(shape 4x24\) but 12 from input 2 \(shape 12\)'):
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


# y[b, j] = x[b, j] * s[b] + w[j], and its batched form: every tensor gains a
# leading batch dim V, which the grid covers in z (ctaid.z picks the batch).
BATCH_SRC = r"""
local pyptx = require "pyptx"
local reg, ptx, Tile, T = pyptx.reg, pyptx.ptx, pyptx.Tile, pyptx.types
local function body(batched)
  return function(X, S, W, Y, v)
    local px, ps, pw, py = ptx.global_ptrs(X, S, W, Y)
    local row = reg.from(ptx.special.ctaid.x(), T.u32):fma(32, reg.from(ptx.special.tid.x(), T.u32))
    if batched then
      local z = reg.from(ptx.special.ctaid.z(), T.u32)
      px, ps = px + z:mul_wide(v.B * v.N * 4), ps + z:mul_wide(v.B * 4)
      pw, py = pw + z:mul_wide(v.N * 4), py + z:mul_wide(v.B * v.N * 4)
    end
    ptx.if_(row:lt(v.B), function()
      local first = row:mul_wide(v.N * 4)
      local s = reg.scalar(T.f32)
      ptx.ld.global(s, ptx.addr(ps + row:mul_wide(4)))
      ptx.range(0, v.N, function(j)
        local x, w = reg.scalar(T.f32), reg.scalar(T.f32)
        ptx.ld.global(x, ptx.addr(px + first + j:mul_wide(4)))
        ptx.ld.global(w, ptx.addr(pw + j:mul_wide(4)))
        ptx.st.global(ptx.addr(py + first + j:mul_wide(4)), x * s + w)
      end)
    end)
    ptx.ret()
  end
end
local function rows(v) return math.max(1, math.ceil(v.B / 32)) end
return {
  pyptx.kernel "scale_rows" { arch = "auto", block = { 32, 1, 1 },
    in_specs = { Tile("B", "N", T.f32), Tile("B", T.f32), Tile("N", T.f32) }, out_specs = { Tile("B", "N", T.f32) },
    grid = function(v) return { rows(v), 1, 1 } end, body(false) },
  pyptx.kernel "scale_rows_batched" { arch = "auto", block = { 32, 1, 1 },
    in_specs = { Tile("V", "B", "N", T.f32), Tile("V", "B", T.f32), Tile("V", "N", T.f32) },
    out_specs = { Tile("V", "B", "N", T.f32) },
    grid = function(v) return { rows(v), 1, v.V } end, body(true) },
}
"""


@pytest.fixture(scope="module")
def bk():
    import luaptx
    return luaptx.load_string(BATCH_SRC, "=scale_rows.lua", device="emu")


def scale_rows_ref(x, s, w):
    return x * s[:, None] + w


def batch_data(v=3, b=5, n=8):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(7), 3)
    return (jax.random.normal(k1, (v, b, n), jnp.float32), jax.random.normal(k2, (v, b), jnp.float32),
            jax.random.normal(k3, (n,), jnp.float32))


def test_batched_vmap_launches_the_batched_kernel_once_on_the_whole_batch(bk):
    xs, ss, w = batch_data()
    seq = jax.jit(jax.vmap(lambda x, s: lj.call(bk.scale_rows, x, s, w)))
    bat = jax.jit(jax.vmap(lambda x, s: lj.call(bk.scale_rows, x, s, w, batched=bk.scale_rows_batched)))
    want = jax.vmap(lambda x, s: scale_rows_ref(x, s, w))(xs, ss)
    np.testing.assert_allclose(bat(xs, ss), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(bat(xs, ss), seq(xs, ss), rtol=0, atol=0)
    # one custom call on the batch (3x5x8), not a loop over 5x8 slices
    text = bat.lower(xs, ss).as_text()
    assert "tensor<3x5x8xf32>" in text.split("@luaptx")[1].split("\n")[0]
    assert "tensor<3x5x8xf32>" not in seq.lower(xs, ss).as_text().split("@luaptx")[1].split("\n")[0]


def test_batched_vmap_broadcasts_unbatched_operands_and_folds_nested_vmaps(bk):
    xs, ss, w = batch_data(v=6)
    ws = jnp.stack([w + i for i in range(6)])
    f = lambda x, s, w: lj.call(bk.scale_rows, x, s, w, batched=bk.scale_rows_batched)
    np.testing.assert_allclose(jax.vmap(f)(xs, ss, ws), jax.vmap(scale_rows_ref)(xs, ss, ws), rtol=1e-6, atol=1e-6)
    x4, s4, w4 = xs.reshape(2, 3, 5, 8), ss.reshape(2, 3, 5), ws.reshape(2, 3, 8)
    nested = jax.jit(jax.vmap(jax.vmap(f)))(x4, s4, w4)
    np.testing.assert_allclose(nested, jax.vmap(jax.vmap(scale_rows_ref))(x4, s4, w4), rtol=1e-6, atol=1e-6)
    # outside vmap the unbatched kernel runs
    np.testing.assert_allclose(f(xs[0], ss[0], w), scale_rows_ref(xs[0], ss[0], w), rtol=1e-6, atol=1e-6)


def test_a_batched_kernel_of_other_tensors_is_refused(bk, ks):
    xs, ss, w = batch_data()
    with pytest.raises(ValueError, match=r'batched kernel "rms_norm_fwd" \(.*rms_norm\.lua:\d+\) must take the tensors of '
                                         r'"scale_rows" \(scale_rows\.lua:\d+\) with a leading batch dim, in order: Tile\(V, B, N, f32\)'):
        lj.call(bk.scale_rows, xs[0], ss[0], w, batched=ks.rms_norm_fwd)


def _jax_gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


@pytest.mark.gpu
@pytest.mark.skipif(_jax_gpu() is None, reason="needs jax with a CUDA GPU (pip install 'jax[cuda13]'); PyPI's plain jax is CPU-only")
def test_jit_on_the_cuda_platform_runs_on_xla_stream(ks_cuda):
    gpu = _jax_gpu()
    x, w = jax.device_put(data(8, 64), gpu)
    f = jax.jit(lambda x, w: lj.call(ks_cuda.rms_norm_fwd, x, w)[0] * 2)
    y = f(x, w)
    assert y.devices() == {gpu}
    np.testing.assert_allclose(np.asarray(y), 2 * np.asarray(rms_ref(x, w)), rtol=1e-5, atol=1e-6)
    xs = jnp.stack([x, -x, x + 1])
    ys = jax.jit(jax.vmap(lambda x: lj.call(ks_cuda.rms_norm_fwd, x, w)[0]))(xs)
    np.testing.assert_allclose(np.asarray(ys), np.asarray(jax.vmap(lambda x: rms_ref(x, w))(xs)), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(_jax_gpu() is None, reason="needs jax with a CUDA GPU (pip install 'jax[cuda13]'); PyPI's plain jax is CPU-only")
def test_batched_vmap_on_the_cuda_platform():
    import luaptx
    gk = luaptx.load_string(BATCH_SRC, "=scale_rows.lua", device="cuda")
    xs, ss, w = jax.device_put(batch_data(), _jax_gpu())
    f = jax.jit(jax.vmap(lambda x, s: lj.call(gk.scale_rows, x, s, w, batched=gk.scale_rows_batched)))
    want = jax.vmap(lambda x, s: scale_rows_ref(x, s, w))(xs, ss)
    np.testing.assert_allclose(np.asarray(f(xs, ss)), np.asarray(want), rtol=1e-6, atol=1e-6)


LIFETIMES = r"""
import gc, sys
import jax, jax.numpy as jnp, numpy as np
import luaptx, luaptx.jax as lj
RMS = sys.argv[1]
x, w = jnp.linspace(-1, 1, 16, dtype=jnp.float32).reshape(2, 8), jnp.full(8, 1.5, jnp.float32)
ks = luaptx.load(RMS, device="emu")
f = jax.jit(lambda x, w: lj.call(ks.rms_norm_fwd, x, w)[0])
a = f(x, w).block_until_ready()
ks = luaptx.load(RMS, device="emu")      # a notebook cell loading the script again
gc.collect()
b = f(x, w).block_until_ready()          # the executable compiled before the reload
g = jax.jit(lambda x, w: lj.call(luaptx.load(RMS, device="emu").rms_norm_fwd, x, w)[0])
c = g(x, w).block_until_ready()          # the script loaded (and dropped) inside the traced function
gc.collect()
d = g(x, w).block_until_ready()
print("same", all(np.array_equal(a, y) for y in (b, c, d)))
"""


def test_executables_outlive_the_kernels_they_were_traced_with():
    # the HLO named the kernel by address: a reload freed it under the executable (exit -11)
    from conftest import RMS, run_python
    r = run_python(LIFETIMES, RMS)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "same True" in r.stdout


def test_the_hlo_names_the_kernel_by_key_not_by_address(ks):
    x, w = data(2, 8)
    text = jax.jit(lambda x, w: lj.call(ks.rms_norm_fwd, x, w, eps=0.5)).lower(x, w).as_text()
    key = ks.rms_norm_fwd.specialize(eps=0.5).key
    assert key == f"rms_norm.lua#{ks.digest}:rms_norm_fwd:eps=0.5" and f'kernel = "{key}"' in text
    assert " : i64" not in text.split("@luaptx")[1].split("\n")[0]


EXPORTED = r"""
import sys
import jax, jax.numpy as jnp, numpy as np
import luaptx, luaptx.jax as lj
path, rms = sys.argv[1], sys.argv[2]
exp = jax.export.deserialize(bytearray(open(path, "rb").read()))
x, w = jnp.linspace(-1, 1, 16, dtype=jnp.float32).reshape(2, 8), jnp.full(8, 1.5, jnp.float32)
try:
    exp.call(x, w)
    print("ran without the kernel")
except Exception as e:
    print("before loading:", str(e).splitlines()[0][:400])
ks = luaptx.load(rms, device="emu")
lj.register(ks.rms_norm_fwd)
y = exp.call(x, w)
print("max diff", float(jnp.abs(y - ks.rms_norm_fwd(np.asarray(x), np.asarray(w))[0] * 2).max()))
"""


def test_an_exported_function_runs_in_a_fresh_process_once_its_script_is_loaded(ks, tmp_path):
    from conftest import RMS, run_python
    pytest.importorskip("flatbuffers", reason="jax.export's serialization needs flatbuffers (make test-python installs it)")
    x, w = data(2, 8)
    f = jax.jit(lambda x, w: lj.call(ks.rms_norm_fwd, x, w)[0] * 2)
    exp = jax.export.export(f, disabled_checks=[jax.export.DisabledSafetyCheck.custom_call("luaptx")])(x, w)
    (tmp_path / "f.jax").write_bytes(exp.serialize())
    r = run_python(EXPORTED, str(tmp_path / "f.jax"), RMS)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "is not loaded for the cpu platform in this process" in r.stdout and "luaptx.jax.register" in r.stdout
    assert "max diff 0.0" in r.stdout


def test_jax_arrays_are_never_outputs(ks):
    x, w = data(3, 40)
    z, r = jnp.zeros((3, 40), jnp.float32), jnp.zeros(3, jnp.float32)
    alias = z
    with pytest.raises(ValueError, match=r'rms_norm\.lua:\d+\): output 1 is a JAX array, which is immutable'):
        ks.rms_norm_fwd(np.asarray(x), np.asarray(w), z, np.zeros(3, np.float32))
    assert not alias.any() and not r.any()


def test_a_scalar_where_an_array_goes_names_the_argument(ks):
    x, w = data()
    with pytest.raises(TypeError, match=r"rms_norm\.lua:\d+\): input 2 must be an array \(jax, numpy\), got float; "
                                        r"a scalar is a template value"):
        lj.call(ks.rms_norm_fwd, x, 1.0)
