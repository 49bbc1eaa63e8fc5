"""PyTorch integration: kernels as torch custom ops, autograd pairs.

    import luaptx, luaptx.torch as lt
    ks = luaptx.load("examples/python/rms_norm.lua", device="emu")
    fwd = lt.op(ks.rms_norm_fwd)              # torch.ops.luaptx.rms_norm_fwd_<n>
    y, r = fwd(x, w)                          # eager, or inside torch.compile(fullgraph=True)
    rms = lt.differentiable(ks.rms_norm_fwd_f64, ks.rms_norm_bwd_f64,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    y = rms(x, w); y.sum().backward()

Calling a kernel directly on torch tensors works too (eager only: it is
opaque to torch.compile, which breaks the graph there); `op` registers a
`torch.library.custom_op` per kernel specialisation with a fake
implementation computed from the kernel's out_specs, so torch.compile
traces through it. CPU tensors run on the emulator, CUDA tensors on the
GPU on torch's current stream.
"""
import itertools

import torch

from . import _alloc, _core, _parse_saved

__all__ = ["op", "Op", "differentiable", "allocate", "DTYPES"]

# torch dtypes of the PTX types luaptx tensors use.
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
          "s8": torch.int8, "s16": torch.int16, "s32": torch.int32, "s64": torch.int64, "u8": torch.uint8}
for _name, _dt in (("u16", "uint16"), ("u32", "uint32"), ("u64", "uint64")):
    if hasattr(torch, _dt):
        DTYPES[_name] = getattr(torch, _dt)


def _dtype(name, kernel_name):
    if name not in DTYPES:
        raise TypeError(f'kernel "{kernel_name}": torch has no dtype for {name}')
    return DTYPES[name]


def allocate(dtype, shape, like):
    """An output as a torch tensor on like's device (for dtypes the C path
    does not allocate itself)."""
    return torch.empty(shape, dtype=_dtype(dtype, "?"), device=like.device)


def _launch(spec, tensors):
    """Launch a specialisation on torch tensors, outputs allocated by torch
    (on torch's current stream for CUDA tensors)."""
    return spec.launch(tuple(t.detach().contiguous() for t in tensors))


_ops = {}
_serial = itertools.count(1)

_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled
_jit_tracing = torch._C._get_tracing_state
_functorch = torch._C._functorch.peek_interpreter_stack


def _eager(tensors):
    """May a call on these tensors skip torch's dispatcher? Only for plain
    contiguous tensors needing no gradient, outside torch.compile, jit
    tracing, torch function or dispatch modes (FakeTensorMode, export)
    and functorch transforms: then the op's result is the kernel's alone."""
    if _is_compiling() or _dispatch_modes() or _function_modes() or _jit_tracing() is not None or _functorch() is not None:
        return False
    grad = _grad_enabled()
    for t in tensors:
        if type(t) is not _Tensor or (grad and t.requires_grad) or not t.is_contiguous():
            return False
    return True


class Op:
    """A kernel specialisation's torch custom op (``.custom``, a
    torch.library CustomOpDef; its other attributes, like
    register_autograd, are the custom op's). Called eagerly on plain
    tensors that need no gradient it launches the kernel directly, in C,
    skipping torch's dispatcher (the same result, less overhead); in any
    other case (torch.compile, autograd, fake tensors, modes, functorch)
    it calls the custom op."""

    def __init__(self, custom, spec):
        self.custom, self._handle, self._nout = custom, spec.handle, len(spec.out_specs)

    def __call__(self, *tensors):
        if _eager(tensors):
            outs = _core.launch(self._handle, tensors, _alloc, None)
            return outs[0] if self._nout == 1 else outs
        return self.custom(*tensors)

    def __getattr__(self, name):
        return getattr(self.custom, name)

    def __repr__(self):
        return f"<luaptx.torch.Op {self.custom._qualname}>"


def op(kernel, **params):
    """The torch custom op (torch.ops.luaptx.<kernel>_<n>) of a kernel's
    specialisation, as an Op: inputs in, a new output (or a tuple) out.
    Registered once per specialisation; its fake implementation gives the
    outputs' shapes and dtypes from out_specs, so torch.compile(fullgraph=True)
    traces a model calling it with no graph break. Eager calls needing no
    autograd skip the dispatcher (see Op)."""
    spec = kernel.specialize(**params)
    found = _ops.get(id(spec))
    if found is not None:
        return found[1]
    nin, nout = len(spec.in_specs), len(spec.out_specs)
    args = ", ".join(f"Tensor x{i}" for i in range(nin))
    result = "Tensor" if nout == 1 else "(" + ", ".join(["Tensor"] * nout) + ")"
    name = f"luaptx::{kernel.name}_{next(_serial)}"

    def impl(*tensors):
        outs = _launch(spec, tensors)
        return outs[0] if nout == 1 else tuple(outs)

    def fake(*tensors):
        shapes = spec.out_shapes([t.shape for t in tensors])
        outs = tuple(torch.empty(s, dtype=_dtype(o.dtype, kernel.name), device=tensors[0].device)
                     for s, o in zip(shapes, spec.out_specs))
        return outs[0] if nout == 1 else outs

    custom = torch.library.custom_op(name, impl, mutates_args=(), schema=f"({args}) -> {result}")
    custom.register_fake(fake)
    wrapped = Op(custom, spec)
    _ops[id(spec)] = (spec, wrapped)
    return wrapped



def differentiable(fwd, bwd, save_for_backward=("input 1",), returns=None, **params):
    """A differentiable function from a forward and a backward kernel.

    fwd(inputs...) -> outputs; the function returns its first `returns`
    outputs (all by default; the others, like a saved 1/rms, only feed the
    backward). bwd takes the saved tensors (save_for_backward: "input I" /
    "output O", 1-based, in order) then the gradients of the returned
    outputs, and returns one gradient per forward input. Both become
    custom ops (`op`), wired with torch.library.register_autograd, so the
    function works in eager mode, under torch.compile and gradcheck."""
    fop, bop = op(fwd, **params), op(bwd)
    fspec, bspec = fwd.specialize(**params), bwd.specialize()
    nin, nout = len(fspec.in_specs), len(fspec.out_specs)
    returns = nout if returns is None else returns
    saved = _parse_saved(save_for_backward, nin, nout)
    if len(bspec.in_specs) != len(saved) + returns or len(bspec.out_specs) != nin:
        raise ValueError(f'differentiable: kernel "{bwd.name}" ({bspec.where}) must take the {len(saved)} saved tensor(s) '
                         f"then {returns} gradient(s) ({len(saved) + returns} inputs) and return {nin} gradient(s) "
                         f"(one per input of \"{fwd.name}\"); it takes {len(bspec.in_specs)} and returns {len(bspec.out_specs)}")

    def setup_context(ctx, inputs, output):
        outs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*[inputs[i] if role == "input" else outs[i] for role, i in saved])

    def backward(ctx, *grads):
        # autograd materialises the gradients of unused outputs as zeros
        gin = bop(*ctx.saved_tensors, *[g.contiguous() for g in grads[:returns]])
        return gin if isinstance(gin, tuple) else (gin,)

    fop.register_autograd(backward, setup_context=setup_context)

    def function(*tensors):
        outs = fop(*tensors)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return outs[0] if returns == 1 else outs[:returns]
    function.__name__ = fwd.name
    function.__doc__ = f"{fwd.name} with its backward {bwd.name} (luaptx.torch.differentiable)"
    return function
