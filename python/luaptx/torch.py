"""PyTorch integration: kernels as torch custom ops, autograd pairs.

    import luaptx, luaptx.torch as lt
    ks = luaptx.load("examples/python/rms_norm.lua", device="emu")
    fwd = lt.op(ks.rms_norm_fwd)              # luaptx::rms_norm__rms_norm_fwd_<hash> (or name=)
    y, r = fwd(x, w)                          # eager, or inside torch.compile(fullgraph=True)
    rms = lt.differentiable(ks.rms_norm_fwd_f64, ks.rms_norm_bwd_f64,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    y = rms(x, w); y.sum().backward()

Calling a kernel directly on torch tensors works too (eager only: it is
opaque to torch.compile, which breaks the graph there); `op` registers a
torch.library operator per kernel specialisation (see Custom) with a fake
implementation computed from the kernel's out_specs, so torch.compile
traces through it. CPU tensors run on the emulator, CUDA tensors on the
GPU on torch's current stream.
"""
import os
import re

import torch

import luaptx
from . import _alloc, _core, _parse_saved

__all__ = ["op", "Op", "Custom", "differentiable", "Differentiable", "allocate", "DTYPES"]

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


def _launch(spec, tensors, scalars=()):
    """Launch a specialisation on torch tensors, outputs allocated by torch
    (on torch's current stream for CUDA tensors), with its runtime scalars."""
    return spec.launch(tuple(t.detach().contiguous() for t in tensors), scalars=tuple(scalars) or None)


_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled
_jit_tracing = torch._C._get_tracing_state
_functorch = torch._C._functorch.peek_interpreter_stack
_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_is_grad_tracking = torch._C._functorch.is_gradtrackingtensor
_unwrapped = torch._C._functorch.get_unwrapped


def _explain(spec, t, i):
    """Explain a failed launch's torch tensor where torch knows why: a
    meta tensor, a tensor under a torch.func transform. (A tensor needing
    a gradient is refused before launching, in _core.c.)"""
    k, arg = spec.label, luaptx._arg(spec, i)
    if _functorch() is not None or _wrapped(t):
        raise TypeError(f"{k}: {arg} is a tensor under a torch.func transform (vmap, grad, jvp), which a kernel "
                        "called directly does not support; call the kernel through luaptx.torch.op or "
                        "luaptx.torch.differentiable (see docs/python.md, torch.func)")
    if t.is_meta:
        raise TypeError(f"{k}: {arg} is a meta tensor (shapes, no data), which a kernel cannot run on; "
                        "luaptx.torch.op's fake implementation gives the outputs' shapes under FakeTensorMode")


def _eager(tensors):
    """May a call on these tensors skip torch's dispatcher? Only for plain
    contiguous tensors needing no gradient, outside torch.compile, jit
    tracing, torch function or dispatch modes (FakeTensorMode, export)
    and functorch transforms of these tensors: then the op's result is the
    kernel's alone."""
    if _is_compiling() or _function_modes() or _jit_tracing() is not None:
        return False
    return _plain(tensors)


def _plain(tensors):
    """May the op's Autograd kernel launch on these arguments itself (no
    mode below autograd to honour, no gradient wanted)? _eager's checks
    that still matter once torch's dispatcher has the call."""
    if _dispatch_modes():
        return False
    grad = _grad_enabled()
    if _functorch() is not None:
        return all(type(t) is _Tensor and not (grad and t.requires_grad) and t.is_contiguous() and not _wrapped(t)
                   for t in tensors)
    for t in tensors:
        if type(t) is not _Tensor or (grad and t.requires_grad) or not t.is_contiguous():
            return False
    return True


def _all_plain_type(tensors):
    """Are all tensors plain torch.Tensors (no subclass: fake, functional)?"""
    for t in tensors:
        if type(t) is not _Tensor:
            return False
    return True


def _quick(tensors):
    """_eager's checks that a launch does not make itself: no compilation,
    tracing, mode or functorch transform, and plain torch.Tensors. A
    launch refuses the rest (a tensor needing a gradient, non-contiguous
    ones): its caller then asks _eager whether the dispatcher's path is
    the one to take."""
    return not (_is_compiling() or _dispatch_modes() or _function_modes() or _jit_tracing() is not None
                or _functorch() is not None) and _all_plain_type(tensors)


class _Entry:
    """A registered op name's kernel: its key (script hash, kernel name,
    template values) and the newest specialisation loaded with that key."""

    def __init__(self, key, spec):
        self.key, self.spec = key, spec


_registered = {}   # op name -> _Entry, for the life of the process (torch's registry is)
_ops = {}          # (id(spec), name) -> (spec, Op)
_NAME = re.compile(r"^[A-Za-z_]\w*::[A-Za-z_]\w*$")


class Op:
    """A kernel specialisation's torch operator (``.custom``, its
    registration, a Custom; ``.name``, its stable name). Called
    eagerly on plain tensors that need no gradient it launches the kernel
    directly, in C, skipping torch's dispatcher (the same result, less
    overhead); in any other case (torch.compile, autograd, fake tensors,
    modes, functorch) it calls the custom op. Inputs only: the outputs are
    allocated and returned (mutates_args=()), eagerly and compiled alike.
    Pickled by reference (kernel, template values, name)."""

    def __init__(self, custom, spec, name, params, ref):
        self.custom, self.name, self._spec, self._params, self._ref = custom, name, spec, params, ref
        self._handle, self._nin, self._nout, self._key = spec.handle, spec.nin, len(spec.out_specs), spec.key
        self._scalars = bool(spec.scalars)

    def __call__(self, *tensors, stream=None, **scalars):
        if stream is None and not scalars and not self._scalars and len(tensors) == self._nin and _quick(tensors):
            try:                                  # the common case: launched at once, in C
                outs = _core.launch(self._handle, tensors, _alloc, None)
            except luaptx._FAILURES as e:
                if not _eager(tensors):           # refused for needing a gradient, or non-contiguous
                    return self._general(tensors, None, {})
                luaptx._explain(self._spec, tensors, e)
                raise
            return outs[0] if self._nout == 1 else outs
        return self._general(tensors, stream, scalars)

    def _general(self, tensors, stream, scalars):
        """A call with runtime scalars or a stream, or one torch's
        dispatcher must see (see _eager)."""
        spec, values = self._spec, ()
        if spec.scalars or scalars:
            tensors, values = spec.split(tensors, scalars)
            if scalars:
                raise TypeError(f"{spec.label} as op {self.name}: unknown keyword(s) {', '.join(sorted(scalars))}; "
                                f"valid: its runtime scalars ({', '.join(n for n, _ in spec.scalars) or 'none'}) and stream")
            values = values or ()
        if len(tensors) != self._nin:
            raise TypeError(f"{spec.label} as op {self.name} takes {self._nin} input(s), got {len(tensors)}; "
                            "its outputs are allocated and returned, never passed (mutates_args=())")
        if stream is not None:
            with _on_stream(stream, tensors, spec):
                return self._call(tensors, values)
        return self._call(tensors, values)

    def _call(self, tensors, values):
        """Launch directly (eager, plain tensors) or through the custom op."""
        spec = self._spec
        if _eager(tensors):
            outs = luaptx._launch(spec, tensors, None, values or None)
            return outs[0] if self._nout == 1 else outs
        for i, t in enumerate(tensors):
            if not isinstance(t, _Tensor):
                raise TypeError(f"{spec.label} as op {self.name}: input {i + 1} must be a torch.Tensor, "
                                f"got {type(t).__name__}")
        if values and not _is_compiling():
            luaptx._core.check_scalars(self._handle, values)    # the C binding's messages, before torch's
        return self.custom(*tensors, *values, self._key)

    def __reduce__(self):
        return self._ref

    def __getattr__(self, name):
        return getattr(self.custom, name)

    def __repr__(self):
        return f"<luaptx.torch.Op {self.name}>"


class _NoStream:
    """The context of a stream that changes nothing (CPU tensors)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _stream_of(stream, tensors, label):
    """A stream= argument, validated by luaptx's one check (None, a
    torch.cuda.Stream or any object with .cuda_stream, or an int CUstream
    0 or above); returns a torch stream for CUDA tensors, None for CPU
    tensors (the emulator: a call returns when its kernel is done, so a
    stream orders nothing)."""
    handle = luaptx._stream_handle(stream, label, default="torch's current stream")
    if not any(isinstance(t, _Tensor) and t.is_cuda for t in tensors):
        return None
    return stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.ExternalStream(handle)


def _on_stream(stream, tensors, spec):
    """A context making stream torch's current stream for CUDA tensors
    (the op launches on the current stream, eager or compiled)."""
    s = _stream_of(stream, tensors, spec.label)
    return _NoStream() if s is None else torch.cuda.stream(s)


def _default_name(kernel, spec, suffix=""):
    """luaptx::<script>__<kernel>_<hash>: stable across processes, and
    another name when the script, the kernel or its template values differ."""
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(kernel.script.path))[0]) or "script"
    return f"luaptx::{stem}__{kernel.name}{suffix}_{luaptx._digest(spec.key + suffix)[:12]}"


_libs = {}         # namespace -> torch.library.Library holding luaptx's ops there (process lifetime)


def _library(ns):
    """The torch.library.Library of namespace ns that luaptx defines ops in."""
    lib = _libs.get(ns)
    if lib is None:
        lib = _libs[ns] = torch.library.Library(ns, "FRAGMENT")
    return lib


class _NoGradient(torch.autograd.Function):
    """An op's call on inputs needing a gradient, for an op without an
    autograd formula: the output is computed below autograd, and
    backpropagating through it raises (never a silent zero)."""

    @staticmethod
    def forward(ctx, why, overload, *args):
        ctx.why = why
        with torch._C._AutoDispatchBelowAutograd():
            return overload(*args)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(ctx.why)


class Custom:
    """An op's registration with torch's dispatcher (``Op.custom``): a bare
    torch.library op (define + impl per dispatch key + a fake impl), so
    that a call, compiled graphs' included, reaches luaptx's launch with
    one trip through the dispatcher. Call it as the op: ``(*inputs,
    *scalars, key)``; ``._opoverload`` is the OpOverload a graph calls.
    It replaced a torch.library.CustomOpDef (whose Python wrappers cost
    about 15 us a call): CustomOpDef's ``register_*`` methods still work,
    with a DeprecationWarning naming the torch.library function to use."""

    _deprecated = ("register_fake", "register_autograd", "register_kernel", "register_vmap",
                   "register_torch_dispatch", "register_autocast")
    _warned = set()

    def __init__(self, name, overload):
        self._qualname, self._opoverload = name, overload

    def __call__(self, *args):
        return self._opoverload(*args)

    def __getattr__(self, attr):
        if attr in Custom._deprecated:
            if attr not in Custom._warned:
                Custom._warned.add(attr)
                import warnings
                warnings.warn(f"luaptx.torch: Op.custom is no longer a torch.library.CustomOpDef; instead of "
                              f"op.custom.{attr}(...), call torch.library.{attr}(op.name, ...)", DeprecationWarning, stacklevel=2)
            import functools
            return functools.partial(getattr(torch.library, attr), self._qualname)
        raise AttributeError(f"luaptx.torch op {self._qualname} has no attribute {attr!r}")

    def __repr__(self):
        return f"<luaptx.torch custom op {self._qualname}>"


def _register(name, spec, key, nout, no_grad):
    """The op `name` launching the entry's newest specialisation,
    registered with torch once per process (a torch.library op: define,
    an Autograd kernel launching directly when nothing below autograd is
    wanted, a CompositeExplicitAutograd kernel, a fake impl); refused when
    the name is taken by another kernel. no_grad: the error backpropagating
    through it raises. Returns (Custom, created)."""
    if not _NAME.match(name):
        raise ValueError(f"luaptx.torch.op: name {name!r} must be 'namespace::name' (identifiers), e.g. 'mylib::rms_norm'")
    entry = _registered.get(name)
    if entry is not None:
        if entry.key != key:
            raise ValueError(f"luaptx.torch.op: {name} is already registered for kernel {entry.key} in this process, "
                             f"not {key}; choose another name")
        entry.spec = spec
        return entry.custom, False
    entry = _registered[name] = _Entry(key, spec)
    nin = spec.nin
    args = ", ".join([f"Tensor input{i + 1}" for i in range(nin)]
                     + [f"{'float' if t in ('f32', 'f64') else 'int'}? {n}" for n, t in spec.scalars])
    result = "Tensor" if nout == 1 else "(" + ", ".join(["Tensor"] * nout) + ")"
    ns, opname = name.split("::")
    lib = _library(ns)
    try:
        lib.define(f"{opname}({args}, str key) -> {result}")
    except Exception:
        del _registered[name]
        raise
    overload = getattr(getattr(torch.ops, ns), opname).default

    def check_key(got):
        if got != entry.key:
            raise RuntimeError(f"luaptx: op {name} was recorded (torch.export, a saved graph) for kernel {got}, "
                               f"but in this process it is kernel {entry.key}: load the script the graph was made "
                               "with, or export again")

    def impl(*args):
        check_key(args[-1])
        scalars = args[nin:-1]
        outs = _launch(entry.spec, args[:nin], scalars) if scalars else _launch(entry.spec, args[:nin])
        return outs[0] if nout == 1 else tuple(outs[:nout])

    def autograd(*args):
        # what a compiled graph's call of the op runs first: plain tensors
        # needing no gradient launch at once, the rest goes below autograd
        tensors = args[:nin]
        if not _dispatch_modes() and _functorch() is None and _all_plain_type(tensors):
            if args[-1] != entry.key:
                check_key(args[-1])
            sp = entry.spec
            try:
                outs = _core.launch(sp.handle, tensors, _alloc, None, args[nin:-1]) if nin + 1 < len(args) \
                    else _core.launch(sp.handle, tensors, _alloc, None)
                return outs[0] if nout == 1 else outs[:nout]
            except luaptx._FAILURES as e:
                if _plain(tensors):              # else: needs a gradient, or non-contiguous: below
                    luaptx._explain(sp, tensors, e)
                    raise
        if _grad_enabled() and any(isinstance(t, _Tensor) and t.requires_grad for t in tensors):
            return _NoGradient.apply(no_grad, overload, *args)
        with torch._C._AutoDispatchBelowAutograd():
            return overload(*args)

    def fake(*args):
        check_key(args[-1])
        tensors, sp = args[:nin], entry.spec
        shapes = sp.out_shapes([t.shape for t in tensors])
        outs = tuple(torch.empty(s, dtype=_dtype(o.dtype, sp.kernel.name), device=tensors[0].device)
                     for s, o in zip(shapes[:nout], sp.out_specs))
        return outs[0] if nout == 1 else outs

    lib.impl(opname, impl, "CompositeExplicitAutograd")
    lib.impl(opname, autograd, "Autograd")
    torch.library.register_fake(name, fake, lib=lib)
    entry.custom = Custom(name, overload)
    return entry.custom, True


def op(kernel, name=None, **params):
    """The torch custom op of a kernel's specialisation, as an Op: inputs
    in, a new output (or a tuple) out. Its name is `name` ("mylib::rms_norm")
    or luaptx::<script>__<kernel>_<hash of the script, kernel and template
    values>; the same in every process, so torch.export artifacts find it,
    and a graph recorded with another kernel under that name is refused
    when it runs. Registered once per process; its fake implementation
    gives the outputs' shapes and dtypes from out_specs, so
    torch.compile(fullgraph=True) traces a model calling it with no graph
    break. Eager calls needing no autograd skip the dispatcher (see Op)."""
    spec = kernel.specialize(**params)
    name = name or _default_name(kernel, spec)
    found = _ops.get((id(spec), name))
    if found is not None:
        return found[1]
    custom, _ = _register(name, spec, spec.key, len(spec.out_specs),
                          f"luaptx: op {name} ({spec.label}) has no autograd formula: backpropagating through it "
                          "needs a backward kernel, luaptx.torch.differentiable(fwd, bwd, ...)")
    wrapped = Op(custom, spec, name, params, (_op_ref, (kernel, name, tuple(sorted(params.items())))))
    _ops[(id(spec), name)] = (spec, wrapped)
    return wrapped


def _op_ref(kernel, name, params):
    """Unpickle an Op: op() of the kernel again."""
    return op(kernel, name=name, **dict(params))


def differentiable(fwd, bwd, save_for_backward=("input 1",), returns=None, **params):
    """A differentiable function from a forward and a backward kernel.

    fwd(inputs...) -> outputs; the function returns its first `returns`
    outputs (all by default; the others, like a saved 1/rms, only feed the
    backward). bwd takes the saved tensors (save_for_backward: "input I" /
    "output O", 1-based, in order) then the gradients of the returned
    outputs, and returns one gradient per forward input. The pair is a
    torch.autograd.Function of its own (setup_context, a generated vmap
    rule) over the ops of both kernels (`op`): `op(fwd)` stays without
    autograd, two pairs over one forward keep their own backward, and it
    works eagerly, under torch.compile, gradcheck, torch.func.grad and
    torch.func.vmap (the kernels then run once per batch element)."""
    fspec, bspec = fwd.specialize(**params), bwd.specialize()
    nin, nout = len(fspec.in_specs), len(fspec.out_specs)
    returns = nout if returns is None else returns
    saved = _parse_saved(save_for_backward, nin, nout)
    if len(bspec.in_specs) != len(saved) + returns or len(bspec.out_specs) != nin:
        raise ValueError(f'differentiable: kernel "{bwd.name}" ({bspec.where}) must take the {len(saved)} saved tensor(s) '
                         f"then {returns} gradient(s) ({len(saved) + returns} inputs) and return {nin} gradient(s) "
                         f"(one per input of \"{fwd.name}\"); it takes {len(bspec.in_specs)} and returns {len(bspec.out_specs)}")
    return Differentiable(fwd, bwd, tuple(save_for_backward), returns, params, saved)


class Differentiable:
    """A forward/backward kernel pair as a differentiable function (see
    differentiable); pickled by reference (both kernels and the contract)."""

    def __init__(self, fwd, bwd, save_for_backward, returns, params, saved):
        self._args = (fwd, bwd, save_for_backward, returns, tuple(sorted(params.items())))
        self.fop, self.returns = op(fwd, **params), returns
        fspec, bspec = fwd.specialize(**params), bwd.specialize()
        self.bop = _pair_backward(fwd, bwd, fspec, bspec, save_for_backward, returns)
        # what the Function's methods close over is only what torch.compile
        # can trace: the ops (torch OpOverloads), their keys and names
        fcall, fkey, fname = self.fop.custom._opoverload, fspec.key, self.fop.name
        bcall, bkey, bname = self.bop.custom._opoverload, self.bop._key, self.bop.name

        def forward(*tensors):
            return _run(fcall, fkey, fname, tensors)

        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*[inputs[i] if role == "input" else output[i] for role, i in saved])

        def backward(ctx, *grads):
            # autograd materialises the gradients of unused outputs as zeros
            return _run(bcall, bkey, bname, (*ctx.saved_tensors, *[g.contiguous() for g in grads[:returns]]))

        self.function = type(f"{fwd.name}_with_{bwd.name}", (torch.autograd.Function,), {
            "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
            "backward": staticmethod(backward), "generate_vmap_rule": True})
        self.__name__ = fwd.name
        self.__doc__ = f"{fwd.name} with its backward {bwd.name} (luaptx.torch.differentiable)"

    def __call__(self, *tensors):
        outs = self.fop(*tensors) if _eager(tensors) else self.function.apply(*tensors)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return outs[0] if self.returns == 1 else outs[:self.returns]

    def __reduce__(self):
        fwd, bwd, save, returns, params = self._args
        return _pair_ref, (fwd, bwd, save, returns, params)

    def __repr__(self):
        return f"<luaptx.torch.differentiable {self.__name__}>"


def _ungrad(t, name):
    """t without torch.func.grad's wrapper (the kernels are opaque to it);
    two grad levels (a second derivative) are refused: beneath them the
    result would be a constant, its derivative a silent zero."""
    if not _is_grad_tracking(t):
        return t
    t = _unwrapped(t)
    if _is_grad_tracking(t):
        raise RuntimeError(f"luaptx: {name} under nested torch.func.grad: a differentiable pair has no second derivative")
    return t


def _run(call, key, name, tensors):
    """A pair's kernel inside its autograd.Function: the op when traced
    (torch.compile) or transformed by vmap, a direct launch otherwise;
    under torch.func.grad on the tensors beneath its wrappers (a pair has
    no second derivative)."""
    if _functorch() is not None and not _is_compiling():
        tensors = tuple(_ungrad(t, name) for t in tensors)
        if not any(_wrapped(t) for t in tensors):       # grad only: launch beneath functorch
            with torch._C._DisableFuncTorch():
                return luaptx._launch(_registered[name].spec, tuple(t.contiguous() for t in tensors), None)
    outs = luaptx._launch(_registered[name].spec, tensors, None) if _eager(tensors) else call(*tensors, key)
    return outs if isinstance(outs, tuple) else (outs,)


def _pair_backward(fwd, bwd, fspec, bspec, save_for_backward, returns):
    """The backward kernel's op of one pair (registered once per pair, so
    that no global op changes): its own autograd formula refuses a second
    derivative, and lets torch.func transform through the pair's backward."""
    key = f"{bspec.key}|grad of {fspec.key}|saved {','.join(save_for_backward)}|returns {returns}"
    name = _default_name(bwd, bspec, f"_of_{fwd.name}_{luaptx._digest(key)[:8]}")
    found = _ops.get((id(bspec), name))
    if found is not None:
        return found[1]
    custom, _ = _register(name, bspec, key, len(bspec.out_specs),
                          f'luaptx: kernel "{bwd.name}" ({bspec.where}) is the backward of "{fwd.name}"; '
                          "it has no derivative of its own (no double backward)")
    wrapped = Op(custom, bspec, name, {}, None)
    wrapped._key = key
    _ops[(id(bspec), name)] = (bspec, wrapped)
    return wrapped


def _pair_ref(fwd, bwd, save_for_backward, returns, params):
    """Unpickle a differentiable pair."""
    return differentiable(fwd, bwd, save_for_backward, returns, **dict(params))
