"""luaptx's core Python API on numpy arrays (CPU, the emulator)."""
import re

import numpy as np
import pytest

import luaptx
from conftest import RMS

WHERE = re.escape("rms_norm.lua:") + r"\d+"


def rms_ref(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def inputs(b=3, n=40, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((b, n)).astype(dtype), (rng.random(n) + 0.5).astype(dtype)


def test_load_lists_the_kernels_by_name(ks):
    assert list(ks) == ["rms_norm_fwd", "rms_norm_fwd_f64", "rms_norm_bwd", "rms_norm_bwd_f64", "noop"]
    assert ks["noop"] is ks.noop and "noop" in ks and len(ks) == 5
    assert "emu" in ks.device
    assert re.search(WHERE, ks.rms_norm_fwd.where)


def test_an_unknown_kernel_names_the_ones_there(ks):
    with pytest.raises(KeyError, match="no kernel named 'nope'.*it defines: rms_norm_fwd, "):
        ks["nope"]
    with pytest.raises(AttributeError, match="nope"):
        ks.nope


def test_forward_allocates_outputs_and_matches_numpy(ks):
    x, w = inputs()
    y, r = ks.rms_norm_fwd(x, w)
    assert y.shape == x.shape and y.dtype == np.float32 and r.shape == (3,)
    np.testing.assert_allclose(y, rms_ref(x, w), rtol=1e-5, atol=1e-6)


def test_given_outputs_are_written_in_place(ks):
    x, w = inputs(5, 17, np.float64)
    y, r = np.full_like(x, np.nan), np.full(5, np.nan)
    out = ks.rms_norm_fwd_f64(x, w, y, r)
    assert out[0] is y and out[1] is r
    np.testing.assert_allclose(y, rms_ref(x, w), rtol=1e-12)
    np.testing.assert_allclose(r, 1 / np.sqrt((x * x).mean(1) + 1e-6), rtol=1e-12)


def test_template_values_specialise_the_kernel(ks):
    x, w = inputs()
    y, _ = ks.rms_norm_fwd(x, w, eps=0.5)
    np.testing.assert_allclose(y, rms_ref(x, w, 0.5), rtol=1e-5, atol=1e-6)
    assert ks.rms_norm_fwd.specialize(eps=0.5) is ks.rms_norm_fwd.specialize(eps=0.5)


def test_backward_matches_finite_differences(ks):
    x, w = inputs(4, 9, np.float64, seed=3)
    dy = np.random.default_rng(1).standard_normal(x.shape)
    _, r = ks.rms_norm_fwd_f64(x, w)
    dx, dw = ks.rms_norm_bwd_f64(x, w, r, dy)
    loss = lambda x, w: (rms_ref(x, w) * dy).sum()
    h = 1e-6
    for idx in [(0, 0), (2, 5), (3, 8)]:
        e = np.zeros_like(x); e[idx] = h
        assert dx[idx] == pytest.approx((loss(x + e, w) - loss(x - e, w)) / (2 * h), rel=1e-6, abs=1e-8)
    for j in [0, 4, 8]:
        e = np.zeros_like(w); e[j] = h
        assert dw[j] == pytest.approx((loss(x, w + e) - loss(x, w - e)) / (2 * h), rel=1e-6, abs=1e-8)


def test_ptx_of_a_specialisation(ks):
    text = ks.noop.ptx(N=4)
    assert ".entry noop(" in text and ".target sm_80" in text
    assert ".entry rms_norm_fwd(" in ks.rms_norm_fwd.ptx(B=2, N=8)


def test_check_reports_ptxas_resources_or_says_ptxas_is_missing(ks):
    try:
        report = ks.rms_norm_fwd.check(B=2, N=8)
    except luaptx.LuaError as e:
        assert "ptxas" in str(e)
        pytest.skip(f"no ptxas here: {e}")
    target = ks.rms_norm_fwd.ptx(B=2, N=8).split(".target ")[1].split()[0]   # arch "auto": the device's
    assert report["arch"] == target and report["registers"] > 0 and report["spills"] == 0


def test_a_wrong_dtype_is_a_type_error_naming_the_argument_and_the_spec(ks):
    x, w = inputs()
    with pytest.raises(TypeError, match=r'kernel "rms_norm_fwd" \(.*' + WHERE + r'\): input 1 is f64 but in_specs\[1\] is Tile\(B, N, f32\)'):
        ks.rms_norm_fwd(x.astype(np.float64), w)
    with pytest.raises(TypeError, match=r"input 2 is s32 but in_specs\[2\] is Tile\(N, f32\)"):
        ks.rms_norm_fwd(x, w.astype(np.int32))
    with pytest.raises(TypeError, match=r"input 1 is DLPack dtype \(code 5, 64 bits, 1 lanes\)"):
        ks.rms_norm_fwd(x.astype(np.complex64), w)


def test_shape_mismatches_are_value_errors(ks):
    x, w = inputs()
    with pytest.raises(ValueError, match=WHERE + r"\): dimension N is 40 from input 1 \(shape 3x40\) but 20 from input 2 \(shape 20\)"):
        ks.rms_norm_fwd(x, w[:20])
    with pytest.raises(ValueError, match=r"input 2 has rank 2 \(shape 3x40\) but in_specs\[2\] is Tile\(N, f32\)"):
        ks.rms_norm_fwd(x, x)
    with pytest.raises(ValueError, match=r"dimension B is 3 from input 1 \(shape 3x40\) but 2 from output 1 \(shape 2x40\)"):
        ks.rms_norm_fwd(x, w, np.empty((2, 40), np.float32), np.empty(3, np.float32))
    with pytest.raises(ValueError, match=r"dimension N is 4 \(a given value\) but 5 from input 1 \(shape 5\)"):
        ks.noop(np.zeros(5, np.float32), N=4)


def test_strided_and_read_only_tensors_are_refused(ks):
    x, w = inputs(3, 80)
    with pytest.raises(ValueError, match=r"input 1 is not compact row-major: strides 80x2 \(elements\), expected 40x1"):
        ks.rms_norm_fwd(x[:, ::2], w[:40])
    y, r = np.empty_like(x), np.empty(3, np.float32)
    y.flags.writeable = False
    with pytest.raises((ValueError, BufferError), match="read-only|readonly|writ"):
        ks.rms_norm_fwd(x, w, y, r)


def test_wrong_counts_and_non_tensors_are_type_errors(ks):
    x, w = inputs()
    with pytest.raises(TypeError, match=r"takes 2 input\(s\), then 2 output\(s\) \(left out: allocated and returned\); got 3 tensor\(s\)"):
        ks.rms_norm_fwd(x, w, x)
    with pytest.raises(TypeError, match=r"input 2 must be a tensor with __dlpack__.*got list"):
        ks.rms_norm_fwd(x, [1.0])
    with pytest.raises(TypeError, match="eps=None"):
        ks.rms_norm_fwd(x, w, eps=None)


class Legacy:
    """A producer of DLPack 0.x capsules only (no max_version)."""

    def __init__(self, a):
        self.a, self.calls = a, []

    def __dlpack__(self, stream=None):
        self.calls.append(stream)
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class Versioned(Legacy):
    """A producer recording that it was asked for DLPack 1.0."""

    def __dlpack__(self, stream=None, max_version=None):
        self.calls.append(max_version)
        return self.a.__dlpack__(max_version=max_version)


def test_dlpack_0x_producers_still_cross(ks):
    x, w = inputs()
    y, r = np.empty_like(x), np.empty(3, np.float32)
    lx = Legacy(x)
    ks.rms_norm_fwd(lx, Legacy(w), Legacy(y), Legacy(r))
    assert lx.calls == [None]
    np.testing.assert_allclose(y, rms_ref(x, w), rtol=1e-5, atol=1e-6)


def test_versioned_capsules_are_asked_for_first(ks):
    x, w = inputs()
    y, r = np.empty_like(x), np.empty(3, np.float32)
    vx = Versioned(x)
    ks.rms_norm_fwd(vx, w, Versioned(y), r)
    assert vx.calls == [(1, 0)]
    np.testing.assert_allclose(y, rms_ref(x, w), rtol=1e-5, atol=1e-6)


def test_lua_errors_are_lua_errors_with_the_lua_message(tmp_path):
    with pytest.raises(luaptx.LuaError, match=r"broken\.lua:1: unexpected symbol near '<eof>'"):
        luaptx.load_string("return 1 +", "=broken.lua")
    bad = tmp_path / "bad.lua"
    bad.write_text('local p = require "pyptx"\nreturn p.kernel "k" { in_specs = 3, function() end }\n')
    with pytest.raises(luaptx.LuaError, match=r"bad\.lua:2: kernel \"k\": option 'in_specs' must be a table"):
        luaptx.load(bad, device="emu")
    with pytest.raises(luaptx.LuaError, match="/no/such/script.lua"):
        luaptx.load("/no/such/script.lua", device="emu")
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        luaptx.load(RMS, device="gpu")
    assert issubclass(luaptx.LuaError, RuntimeError)


def test_an_unbound_output_dim_says_how_to_bind_it():
    ks = luaptx.load_string('local p = require "pyptx"\nreturn p.kernel "grow" { arch = "sm_80",\n'
                            '  in_specs = { p.Tile("N", p.types.f32) }, out_specs = { p.Tile("M", p.types.f32) },\n'
                            '  function() p.ptx.ret() end }\n', "=grow.lua", device="emu")
    with pytest.raises(ValueError, match=r"grow\.lua:2\): out_specs\[1\] dim 1 is M, which no input binds; pass it as a parameter \(M=\.\.\.\)"):
        ks.grow(np.zeros(4, np.float32))
    assert ks.grow(np.zeros(4, np.float32), M=6).shape == (6,)


def test_calls_alternating_shapes_reuse_and_replace_launch_plans(ks):
    # the C API keeps up to 8 plans per kernel (one per shape): 10 shapes
    # twice over replaces them, and every call still binds its own shape
    for _ in range(2):
        for b in range(1, 11):
            x, w = inputs(b, 8 + b)
            y, r = ks.rms_norm_fwd(x, w)
            assert y.shape == (b, 8 + b) and r.shape == (b,)
            np.testing.assert_allclose(y, rms_ref(x, w), rtol=1e-5, atol=1e-6)


def test_a_strided_tensor_is_refused_after_its_shape_was_planned(ks):
    x, w = inputs(4, 8)
    ks.rms_norm_fwd(x, w)
    strided = np.empty((8, 4), np.float32).T
    strided[...] = x
    with pytest.raises(ValueError, match=r"input 1 is not compact row-major: strides 1x4 \(elements\), expected 8x1"):
        ks.rms_norm_fwd(strided, w)


def check_the_output_shape_cache(call, make, close, copies=False):
    """Calls allocating their outputs reuse the outputs' shapes bound by
    the last call on inputs of the same shapes (_core.c's cache): a call
    whose shapes, dtypes or strides change gets its own shapes and its own
    errors. make(b, n, dtype, transposed) -> (x, w); close(y, x, w);
    copies: non-contiguous inputs are copied (lt.op), not refused."""
    for b, n in ((4, 8), (3, 16), (3, 8), (1, 5), (3, 16)):     # new shapes, the same rank; back again
        x, w = make(b, n, "f32", False)
        y, r = call(x, w)
        assert tuple(y.shape) == (b, n) and tuple(r.shape) == (b,)
        close(y, x, w)
    strided, _ = make(3, 16, "f32", True)                        # the cached shapes, other strides
    if copies:
        close(call(strided, w)[0], strided, w)
    else:
        with pytest.raises(ValueError, match=r"input 1 is not compact row-major"):
            call(strided, w)
    wide, _ = make(3, 16, "f64", False)                          # the cached shapes, another dtype
    with pytest.raises(TypeError, match=r"input 1 is f64 but in_specs\[1\] is Tile\(B, N, f32\)"):
        call(wide, w)
    with pytest.raises(ValueError, match=r"dimension N is 16 from input 1 \(shape 3x16\) but 8 from input 2"):
        call(x, make(3, 8, "f32", False)[1])                     # input 1 as cached, input 2 not
    y, _ = call(x, w)                                            # and the cached shapes still serve
    close(y, x, w)


def test_allocated_outputs_follow_each_calls_shapes_dtypes_and_strides(ks):
    def make(b, n, dtype, transposed):
        x, w = inputs(b, n, np.float64 if dtype == "f64" else np.float32, seed=b * 100 + n)
        return (np.asfortranarray(x) if transposed else x), w
    check_the_output_shape_cache(ks.rms_norm_fwd, make,
                                 lambda y, x, w: np.testing.assert_allclose(y, rms_ref(x, w), rtol=1e-5, atol=1e-6))


def test_size_one_dims_take_any_stride_as_numpy_says(ks):
    # a (1, 40) that is the transpose of a (40, 1): strides (4, 4) bytes, C-contiguous for numpy
    x = np.ascontiguousarray(np.linspace(-1, 1, 40, dtype=np.float32).reshape(40, 1)).T
    w = (np.arange(40) * 0.01 + 0.5).astype(np.float32)
    assert x.flags.c_contiguous and x.strides == (4, 4)
    y, r = ks.rms_norm_fwd(x, w)
    np.testing.assert_allclose(y, rms_ref(x, w), rtol=1e-5, atol=1e-6)


def test_a_launch_over_zero_elements_returns_empty_outputs(ks):
    y, r = ks.rms_norm_fwd(np.empty((0, 8), np.float32), np.ones(8, np.float32))
    assert y.shape == (0, 8) and r.shape == (0,)
    y, r = ks.rms_norm_fwd(np.empty((4, 0), np.float32), np.ones(0, np.float32))   # r is not empty: it runs
    assert y.shape == (4, 0) and r.shape == (4,)


def test_unknown_template_keywords_are_type_errors_naming_them(ks):
    x, w = inputs()
    with pytest.raises(TypeError, match=WHERE + r"\): unknown template value\(s\) esp; valid: B, N, arch, eps"):
        ks.rms_norm_fwd(x, w, esp=0.5)
    with pytest.raises(TypeError, match=r"unknown template value\(s\) stream; .*stream= is a launch option"):
        ks.rms_norm_fwd.specialize(stream=0)
    y, _ = ks.rms_norm_fwd(x, w, eps=0.5, N=40)        # declared params and symbolic dims are template values
    np.testing.assert_allclose(y, rms_ref(x, w, 0.5), rtol=1e-5, atol=1e-6)


def test_specialisations_are_bounded_least_recently_used_first():
    ks = luaptx.load(RMS, device="emu")
    k = ks.rms_norm_fwd
    first = k.specialize(eps=0.0)
    for i in range(luaptx.MAX_SPECIALIZATIONS + 10):
        k.specialize(eps=1.0 + i)
        k.specialize(eps=0.0)                          # kept: used most recently
    assert len(k._specs) == luaptx.MAX_SPECIALIZATIONS
    assert k.specialize(eps=0.0) is first and k.specialize() is k._default


def test_read_only_outputs_are_refused_naming_the_argument(ks):
    x, w = inputs()
    y, r = np.empty_like(x), np.empty(3, np.float32)
    r.flags.writeable = False
    with pytest.raises(ValueError, match=WHERE + r"\): output 2 is read-only \(numpy writeable=False\)"):
        ks.rms_norm_fwd(x, w, y, r)


def test_cuda_without_a_gpu_fails_at_load():
    if "cuda" in luaptx.load(RMS, device="auto").device:
        pytest.skip("a GPU is here")
    with pytest.raises(luaptx.LuaError, match=r'^luaptx: device="cuda": no CUDA') as e:
        luaptx.load(RMS, device="cuda")
    assert "pyptx/" not in str(e.value)


PICKLED = r"""
import pickle, sys
import numpy as np
k, script = pickle.loads(bytes.fromhex(sys.stdin.read()))
x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
y, _ = k(x, np.full(8, 1.5, np.float32))
print("y", float(y.sum()), script.noop.name, k.script is not script)
"""


def test_scripts_and_kernels_pickle_by_reference(ks, tmp_path):
    import pickle
    import subprocess
    import sys
    text = open(RMS).read()
    s2 = luaptx.load_string(text, "=inline.lua", device="emu")
    data = pickle.dumps((ks.rms_norm_fwd, s2))
    assert len(data) < len(text) + 2000                    # a reference, not a state
    r = subprocess.run([sys.executable, "-c", PICKLED], input=data.hex(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    want = ks.rms_norm_fwd(x, np.full(8, 1.5, np.float32))[0].sum()
    assert r.stdout.split() == ["y", str(float(want)), "noop", "True"]
    copy = tmp_path / "k.lua"
    copy.write_text(text)
    data = pickle.dumps(luaptx.load(copy, device="emu").noop)
    copy.write_text(text + "\n-- changed\n")
    with pytest.raises(luaptx.LuaError, match=r"k\.lua: the script changed since it was pickled"):
        pickle.loads(data)


def test_a_stream_on_the_emulator_is_accepted_and_validated(ks):
    ks.noop(np.zeros(1, np.float32), stream=7)       # the emulator: done on return, a stream orders nothing
    with pytest.raises(TypeError, match=r"stream='7': valid values are None"):
        ks.noop(np.zeros(1, np.float32), stream="7")
