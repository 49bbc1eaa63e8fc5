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

__all__ = ["op", "differentiable", "allocator", "current_stream", "DTYPES"]

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


def allocator(like):
    """Allocate outputs as torch tensors on like's device."""
    device = like.device

    def alloc(dtype, shape):
        return torch.empty(shape, dtype=_dtype(dtype, "?"), device=device)
    return alloc


def current_stream(t):
    """torch's current CUDA stream on t's device as a CUstream int (the
    legacy default stream, 1, for torch's default stream)."""
    return torch.cuda.current_stream(t.device).cuda_stream or 1


def _launch(spec, tensors):
    """Launch a specialisation on torch tensors, outputs allocated by torch."""
    xs = tuple(t.detach().contiguous() for t in tensors)
    stream = current_stream(xs[0]) if xs and xs[0].is_cuda else None
    return spec.launch(xs, allocator(xs[0]), stream)


_ops = {}
_serial = itertools.count(1)


def op(kernel, **params):
    """The torch custom op (torch.ops.luaptx.<kernel>_<n>) of a kernel's
    specialisation: inputs in, a new output (or a tuple) out. Registered
    once per specialisation; its fake implementation gives the outputs'
    shapes and dtypes from out_specs, so torch.compile(fullgraph=True)
    traces a model calling it with no graph break."""
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
    _ops[id(spec)] = (spec, custom)
    return custom


def _parse_saved(names, nin, nout):
    """("input 1", "output 2") -> [("in", 0), ("out", 1)], checked."""
    out = []
    for n in names:
        role, _, num = str(n).partition(" ")
        limit = {"input": nin, "output": nout}.get(role)
        if limit is None or not num.isdigit() or not 1 <= int(num) <= limit:
            raise ValueError(f"save_for_backward: {n!r} is not 'input I' (1..{nin}) or 'output O' (1..{nout})")
        out.append((role, int(num) - 1))
    return out


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
