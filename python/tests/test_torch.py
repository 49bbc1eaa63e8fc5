"""luaptx.torch on CPU tensors (the emulator): eager calls, custom ops under
torch.compile(fullgraph=True), autograd through a forward/backward pair."""
import re

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (make test-python installs it)")
import luaptx  # noqa: E402
import luaptx.torch as lt  # noqa: E402

F = torch.nn.functional


def rms_ref(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def test_a_kernel_called_on_torch_tensors_returns_torch_tensors(ks):
    x, w = torch.randn(4, 24), torch.rand(24) + 0.5
    y, r = ks.rms_norm_fwd(x, w)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and r.shape == (4,)
    torch.testing.assert_close(y, rms_ref(x, w))


def test_torch_tensors_cross_zero_copy(ks):
    x, w = torch.randn(2, 8), torch.rand(8) + 0.5
    y, r = torch.full_like(x, float("nan")), torch.empty(2)
    ptr = y.data_ptr()
    ks.rms_norm_fwd(x, w, y, r)
    assert y.data_ptr() == ptr
    torch.testing.assert_close(y, rms_ref(x, w))


def test_allocated_torch_outputs_follow_each_calls_shapes_dtypes_and_strides(ks):
    from test_core import check_the_output_shape_cache

    def make(b, n, dtype, transposed):
        g = torch.Generator().manual_seed(b * 100 + n)
        x = torch.randn(b, n, generator=g, dtype=torch.float64 if dtype == "f64" else torch.float32)
        return (x.t().contiguous().t() if transposed else x), torch.rand(n, generator=g) + 0.5
    close = lambda y, x, w: torch.testing.assert_close(y, rms_ref(x, w))    # noqa: E731
    check_the_output_shape_cache(ks.rms_norm_fwd, make, close)
    check_the_output_shape_cache(lt.op(ks.rms_norm_fwd), make, close, copies=True)    # lt.op copies


def test_the_custom_op_matches_torch_rms_norm_eagerly(ks):
    fwd = lt.op(ks.rms_norm_fwd)
    assert lt.op(ks.rms_norm_fwd) is fwd
    x, w = torch.randn(5, 32), torch.rand(32) + 0.5
    y, _ = fwd(x, w)
    torch.testing.assert_close(y, F.rms_norm(x, (32,), w, eps=1e-6))


def test_op_custom_is_the_operator_and_customopdef_methods_warn_and_forward(ks):
    fwd = lt.op(ks.rms_norm_fwd)
    key = ks.rms_norm_fwd.specialize().key
    ns, name = fwd.name.split("::")
    assert fwd.custom._opoverload is getattr(getattr(torch.ops, ns), name).default
    x, w = torch.randn(3, 8), torch.rand(8) + 0.5
    torch.testing.assert_close(fwd.custom(x, w, key)[0], F.rms_norm(x, (8,), w, eps=1e-6))
    torch.testing.assert_close(fwd._opoverload(x, w, key)[0], fwd(x, w)[0])     # the Op answers its attributes
    mine = lt.op(ks.rms_norm_fwd, name="testlib::rms_norm_vmapped")
    ran = []

    def rule(info, in_dims, x, w, key):                       # CustomOpDef's signature, forwarded
        ran.append(in_dims)
        y, r = zip(*(mine.custom._opoverload(x[i], w, key) for i in range(info.batch_size)))
        return (torch.stack(y), torch.stack(r)), (0, 0)
    with pytest.warns(DeprecationWarning, match=r"torch\.library\.register_vmap\(op\.name, \.\.\.\)"):
        mine.custom.register_vmap(rule)
    xs = torch.randn(4, 3, 8)
    torch.testing.assert_close(torch.func.vmap(lambda a: mine(a, w)[0])(xs), rms_ref(xs, w))
    assert ran == [(0, None, None)]
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        fwd.custom.nope


def test_a_plain_op_refuses_backpropagation_compiled_too(ks):
    fwd = lt.op(ks.rms_norm_fwd)
    x, w = torch.randn(3, 8, requires_grad=True), torch.rand(8) + 0.5
    torch._dynamo.reset()
    with pytest.raises(Exception, match="no autograd formula"):
        torch.compile(lambda a: fwd(a, w)[0].sum(), backend="aot_eager", fullgraph=True)(x).backward()


def test_the_fake_impl_gives_shapes_from_out_specs(ks):
    from torch._subclasses.fake_tensor import FakeTensorMode
    fwd = lt.op(ks.rms_norm_fwd)
    with FakeTensorMode():
        y, r = fwd(torch.empty(7, 16), torch.empty(16))
    assert y.shape == (7, 16) and r.shape == (7,) and y.dtype == torch.float32


def test_eager_op_calls_skip_the_dispatcher_unless_autograd_needs_it(ks, monkeypatch):
    fwd = lt.op(ks.rms_norm_fwd)
    through_dispatcher = []
    real = lt._launch
    monkeypatch.setattr(lt, "_launch", lambda spec, ts: through_dispatcher.append(1) or real(spec, ts))
    x, w = torch.randn(5, 32), torch.rand(32) + 0.5
    y, _ = fwd(x, w)                              # plain tensors: the kernel directly
    assert through_dispatcher == []
    torch.testing.assert_close(y, F.rms_norm(x, (32,), w, eps=1e-6))
    y, _ = fwd(x.t().contiguous().t(), w)         # non-contiguous: the op makes it contiguous
    assert through_dispatcher == [1]
    torch.testing.assert_close(y, F.rms_norm(x, (32,), w, eps=1e-6))
    rms = lt.differentiable(ks.rms_norm_fwd, ks.rms_norm_bwd,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    xg = x.clone().requires_grad_()
    rms(xg, w).sum().backward()                   # a gradient is needed: the pair's autograd.Function,
    assert len(through_dispatcher) == 1           # whose forward and backward run without grad: directly
    xr = x.clone().requires_grad_()
    rms_ref(xr, w).sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(rms(xg, w), rms_ref(x, w))
    assert len(through_dispatcher) == 1


class Model(torch.nn.Module):
    def __init__(self, norm, n):
        super().__init__()
        self.norm, self.lin = norm, torch.nn.Linear(n, n)
        self.w = torch.nn.Parameter(torch.rand(n) + 0.5)

    def forward(self, x):
        y, _ = self.norm(torch.relu(x), self.w)
        return self.lin(y)


def test_torch_compile_fullgraph_has_no_graph_break(ks):
    torch._dynamo.reset()
    fwd = lt.op(ks.rms_norm_fwd)
    m = Model(fwd, 32)
    x = torch.randn(6, 32)
    compiled = torch.compile(m, fullgraph=True, backend="eager")
    with torch.no_grad():
        want = m.lin(F.rms_norm(torch.relu(x), (32,), m.w, eps=1e-6))
        torch.testing.assert_close(compiled(x), want)
        explained = torch._dynamo.explain(m)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_torch_compile_with_inductor_runs_the_kernel(ks):
    torch._dynamo.reset()
    fwd = lt.op(ks.rms_norm_fwd)
    m = Model(fwd, 16)
    x = torch.randn(3, 16)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(m, fullgraph=True)(x), m(x))


def test_gradcheck_passes_for_the_rms_norm_pair(ks):
    rms = lt.differentiable(ks.rms_norm_fwd_f64, ks.rms_norm_bwd_f64,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    x = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    w = (torch.rand(7, dtype=torch.float64) + 0.5).requires_grad_()
    assert torch.autograd.gradcheck(rms, (x, w))
    y = rms(x, w)
    y.sum().backward()
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    rms_ref(xr, wr).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)


def test_the_differentiable_pair_compiles_with_its_backward(ks):
    torch._dynamo.reset()
    rms = lt.differentiable(ks.rms_norm_fwd, ks.rms_norm_bwd,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    x = torch.randn(4, 16, requires_grad=True)
    w = (torch.rand(16) + 0.5).requires_grad_()
    f = torch.compile(lambda x, w: (rms(x, w) * 2).sum(), fullgraph=True, backend="aot_eager")
    f(x, w).backward()
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    (rms_ref(xr, wr) * 2).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, wr.grad, rtol=1e-4, atol=1e-5)


def test_differentiable_refuses_a_backward_of_the_wrong_arity(ks):
    with pytest.raises(ValueError, match=r'kernel "rms_norm_bwd" \(.*rms_norm\.lua:\d+\) must take the 1 saved tensor\(s\) then 1 gradient'):
        lt.differentiable(ks.rms_norm_fwd, ks.rms_norm_bwd, save_for_backward=("input 1",), returns=1)
    with pytest.raises(ValueError, match="'input 3' is not 'input I' \\(1..2\\)"):
        lt.differentiable(ks.rms_norm_fwd, ks.rms_norm_bwd, save_for_backward=("input 3",))


def test_torch_mismatches_name_the_argument(ks):
    fwd = lt.op(ks.rms_norm_fwd)
    with pytest.raises(TypeError, match=r"rms_norm\.lua:\d+\): input 1 is f64 but in_specs\[1\] is Tile\(B, N, f32\)"):
        fwd(torch.randn(2, 8, dtype=torch.float64), torch.rand(8))
    with pytest.raises(ValueError, match=r"dimension N is 8 from input 1 \(shape 2x8\) but 4 from input 2 \(shape 4\)"):
        ks.rms_norm_fwd(torch.randn(2, 8), torch.rand(4))


needs_cuda = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                   reason="needs a CUDA GPU (CUDA tensors run on the GPU)")]


def gpu(f):
    for m in needs_cuda:
        f = m(f)
    return f


@gpu
def test_cuda_tensors_run_eagerly_on_the_current_stream(ks_cuda):
    x, w = torch.randn(4, 64, device="cuda"), torch.rand(64, device="cuda") + 0.5
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y, r = ks_cuda.rms_norm_fwd(x, w)              # allocated by torch on x's device
        y2, _ = lt.op(ks_cuda.rms_norm_fwd)(x, w)
    s.synchronize()
    assert y.is_cuda and r.is_cuda
    torch.testing.assert_close(y, rms_ref(x, w))
    torch.testing.assert_close(y2, rms_ref(x, w))
    torch.testing.assert_close(y, F.rms_norm(x, (64,), w, eps=1e-6))


@gpu
def test_cuda_launches_are_captured_and_replayed_in_a_cuda_graph(ks_cuda):
    fwd = lt.op(ks_cuda.rms_norm_fwd)
    x, w = torch.randn(8, 128, device="cuda"), torch.rand(128, device="cuda") + 0.5
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                        # warm up: the launch plan for these shapes
        fwd(x, w)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):                         # no synchronisation may happen in here
        y, _ = fwd(x, w)
        z = y * 2
    for scale in (1.0, -3.0, 0.5):
        x.copy_(torch.randn(8, 128, device="cuda") * scale)
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, rms_ref(x, w))
        torch.testing.assert_close(z, 2 * rms_ref(x, w))


@gpu
def test_torch_compile_on_cuda_matches_eager(ks_cuda):
    torch._dynamo.reset()
    m = Model(lt.op(ks_cuda.rms_norm_fwd), 64).cuda()
    x = torch.randn(6, 64, device="cuda")
    with torch.no_grad():
        want = m.lin(F.rms_norm(torch.relu(x), (64,), m.w, eps=1e-6))
        torch.testing.assert_close(torch.compile(m, fullgraph=True)(x), want)


@gpu
def test_the_differentiable_pair_on_cuda_matches_autograd(ks_cuda):
    rms = lt.differentiable(ks_cuda.rms_norm_fwd, ks_cuda.rms_norm_bwd,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    x = torch.randn(4, 32, device="cuda", requires_grad=True)
    w = (torch.rand(32, device="cuda") + 0.5).requires_grad_()
    (rms(x, w) * 3).sum().backward()
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    (rms_ref(xr, wr) * 3).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, wr.grad, rtol=1e-4, atol=1e-5)


# y = S * x and dx = S * dy: a forward and two backwards (2, and a wrong 3)
SCALE_SRC = r"""
local pyptx = require "pyptx"
local reg, ptx, Tile, T = pyptx.reg, pyptx.ptx, pyptx.Tile, pyptx.types
local function scale(name)
  return pyptx.kernel(name) { arch = "auto", block = { 32, 1, 1 }, params = { S = 2 },
    in_specs = { Tile("N", T.f64) }, out_specs = { Tile("N", T.f64) },
    grid = function(v) return { math.max(1, math.ceil(v.N / 32)), 1, 1 } end,
    function(X, Y, v)
      local px, py = ptx.global_ptrs(X, Y)
      local i = reg.from(ptx.special.ctaid.x(), T.u32):fma(32, reg.from(ptx.special.tid.x(), T.u32))
      ptx.if_(i:lt(v.N), function()
        local x = reg.scalar(T.f64)
        ptx.ld.global(x, ptx.addr(px + i:mul_wide(8)))
        ptx.st.global(ptx.addr(py + i:mul_wide(8)), x * v.S)
      end)
      ptx.ret()
    end }
end
return { scale "scale", scale "scale_grad" }
"""


@pytest.fixture(scope="module")
def sk():
    return luaptx.load_string(SCALE_SRC, "=scale.lua", device="emu")


def test_differentiable_pairs_do_not_touch_the_plain_op_or_each_other(sk):
    plain = lt.op(sk.scale)
    twice = lt.differentiable(sk.scale, sk.scale_grad, save_for_backward=())
    thrice = lt.differentiable(sk.scale, lt_kernel_with(sk, "scale_grad", S=3), save_for_backward=())
    x = torch.arange(5, dtype=torch.float64, requires_grad=True)
    twice(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((5,), 2.0, dtype=torch.float64))
    x.grad = None
    thrice(x).sum().backward()                   # its own backward, not the last one registered
    torch.testing.assert_close(x.grad, torch.full((5,), 3.0, dtype=torch.float64))
    x.grad = None
    twice(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((5,), 2.0, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="no autograd formula"):
        plain(x).sum().backward()                # the plain op stays without autograd
    assert twice.function is not thrice.function


def lt_kernel_with(script, name, **params):
    """A kernel whose default template values are `params` (a Kernel view)."""
    k = script[name]

    class Fixed:
        def __init__(self):
            self.name, self.script = k.name, k.script

        def specialize(self, **more):
            return k.specialize(**{**params, **more})
    return Fixed()


def test_op_names_are_stable_and_user_names_are_checked(ks):
    fwd = lt.op(ks.rms_norm_fwd)
    assert re.fullmatch(r"luaptx::rms_norm__rms_norm_fwd_[0-9a-f]{12}", fwd.name)
    assert lt.op(ks.rms_norm_fwd, eps=0.5).name != fwd.name
    mine = lt.op(ks.rms_norm_fwd, name="testlib::rms_norm")
    assert mine.name == "testlib::rms_norm" and lt.op(ks.rms_norm_fwd, name="testlib::rms_norm") is mine
    with pytest.raises(ValueError, match=r"testlib::rms_norm is already registered for kernel rms_norm\.lua#[0-9a-f]+:rms_norm_fwd: "
                                         r"in this process, not rms_norm\.lua#[0-9a-f]+:rms_norm_fwd_f64:"):
        lt.op(ks.rms_norm_fwd_f64, name="testlib::rms_norm")
    with pytest.raises(ValueError, match="must be 'namespace::name'"):
        lt.op(ks.rms_norm_fwd, name="rms norm")


EXPORTED = r"""
import sys
import torch, luaptx, luaptx.torch as lt
rms, path, named = sys.argv[1], sys.argv[2], sys.argv[3]
decoy = luaptx.load_string(open(rms).read().replace("eps = 1e-6", "eps = 0.5"), "=rms_norm.lua", device="emu")
lt.op(decoy.rms_norm_fwd)                              # another script's rms_norm_fwd registered first
lt.op(decoy.rms_norm_fwd, name="testlib::rms_norm")    # and under the user's name
ks = luaptx.load(rms, device="emu")
lt.op(ks.rms_norm_fwd)
x, w = torch.linspace(-1, 1, 16).reshape(2, 8), torch.full((8,), 1.5)
want = torch.nn.functional.rms_norm(x, (8,), w, eps=1e-6) * 2
y = torch.export.load(path).module()(x, w)
print("default name: max diff", float((y - want).abs().max()))
try:
    torch.export.load(named).module()(x, w)
    print("ran another kernel")
except RuntimeError as e:
    print("user name:", str(e).splitlines()[0])
"""


def test_exported_programs_run_their_own_kernel_in_a_fresh_process(ks, tmp_path):
    from conftest import RMS, run_python

    class M(torch.nn.Module):
        def __init__(self, op):
            super().__init__()
            self.op = op

        def forward(self, x, w):
            return self.op(x, w)[0] * 2
    x, w = torch.randn(2, 8), torch.rand(8) + 0.5
    torch.export.save(torch.export.export(M(lt.op(ks.rms_norm_fwd)), (x, w)), tmp_path / "m.pt2")
    torch.export.save(torch.export.export(M(lt.op(ks.rms_norm_fwd, name="testlib::rms_norm")), (x, w)), tmp_path / "n.pt2")
    r = run_python(EXPORTED, RMS, str(tmp_path / "m.pt2"), str(tmp_path / "n.pt2"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "default name: max diff 0.0" in r.stdout
    assert re.search(r"user name: luaptx: op testlib::rms_norm was recorded \(torch.export, a saved graph\) for kernel "
                     r"rms_norm\.lua#[0-9a-f]+:rms_norm_fwd:, but in this process it is kernel rms_norm\.lua#", r.stdout), r.stdout


def test_plain_calls_refuse_what_they_cannot_honour_naming_the_argument(ks):
    fwd = lt.op(ks.rms_norm_fwd)
    x, w = torch.randn(2, 8), torch.rand(8) + 0.5
    where = r'kernel "rms_norm_fwd" \(.*rms_norm\.lua:\d+\)'
    with pytest.raises(TypeError, match=where + ": input 2 requires grad, but a kernel called directly is invisible to autograd"):
        ks.rms_norm_fwd(x, w.clone().requires_grad_())
    with torch.no_grad():
        ks.rms_norm_fwd(x, w.clone().requires_grad_())     # no gradient wanted: fine
    with pytest.raises(TypeError, match=where + ": input 1 is a meta tensor"):
        ks.rms_norm_fwd(torch.empty(2, 8, device="meta"), w)
    with pytest.raises(TypeError, match=where + r": input 1 is a tensor under a torch.func transform"):
        torch.func.vmap(lambda a: ks.rms_norm_fwd(a, w)[0])(torch.randn(3, 2, 8))
    with pytest.raises(TypeError, match=where + r" as op luaptx::\w+: input 2 must be a torch.Tensor, got float"):
        fwd(x, 1.0)
    with pytest.raises(TypeError, match=r"takes 2 input\(s\), got 4; its outputs are allocated and returned"):
        fwd(x, w, torch.empty(2, 8), torch.empty(2))       # eagerly as compiled: no out= (mutates_args=())


def test_ops_pickle_by_reference(ks):
    import pickle
    fwd = lt.op(ks.rms_norm_fwd, eps=0.5)
    back = pickle.loads(pickle.dumps(fwd))
    x, w = torch.randn(2, 8), torch.rand(8) + 0.5
    assert back.name == fwd.name
    torch.testing.assert_close(back(x, w)[0], fwd(x, w)[0])


def test_torch_func_grad_and_vmap_go_through_the_pair(ks):
    rms = lt.differentiable(ks.rms_norm_fwd_f64, ks.rms_norm_bwd_f64,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    x, w = torch.randn(3, 8, dtype=torch.float64), torch.rand(8, dtype=torch.float64) + 0.5
    torch.testing.assert_close(torch.func.grad(lambda x: rms(x, w).sum())(x),
                               torch.func.grad(lambda x: rms_ref(x, w).sum())(x))
    xs = torch.randn(4, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(torch.func.vmap(lambda a: rms(a, w))(xs), rms_ref(xs, w))
    gx = torch.func.vmap(torch.func.grad(lambda a: rms(a, w).sum()))(xs)
    torch.testing.assert_close(gx, torch.func.vmap(torch.func.grad(lambda a: rms_ref(a, w).sum()))(xs))
    with pytest.raises(RuntimeError, match="no second derivative"):           # not a silent zero
        torch.func.grad(lambda x: torch.func.grad(lambda x: rms(x, w).sum())(x).sum())(x)
    with pytest.raises(NotImplementedError, match="jvp"):                     # forward mode: torch's refusal
        torch.func.jvp(lambda x: rms(x, w), (x,), (torch.ones_like(x),))
    xg = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(rms(xg, w).sum(), xg, create_graph=True)
    with pytest.raises(RuntimeError, match="no derivative of its own"):       # eager double backward
        g.sum().backward()


def test_pairs_pickle_by_reference(ks):
    import pickle
    rms = lt.differentiable(ks.rms_norm_fwd, ks.rms_norm_bwd, save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    back = pickle.loads(pickle.dumps(rms))
    x = torch.randn(2, 8, requires_grad=True)
    w = torch.rand(8) + 0.5
    back(x, w).sum().backward()
    torch.testing.assert_close(x.grad, torch.func.grad(lambda x: rms_ref(x, w).sum())(x.detach()), rtol=1e-4, atol=1e-5)


@gpu
def test_a_stream_argument_queues_the_launch_there(ks_cuda):
    x, w = torch.randn(4, 64, device="cuda"), torch.rand(64, device="cuda") + 0.5
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    y, _ = ks_cuda.rms_norm_fwd(x, w, stream=s)
    s.synchronize()
    torch.testing.assert_close(y, rms_ref(x, w))
