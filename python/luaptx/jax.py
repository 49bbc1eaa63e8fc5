"""JAX integration: kernels through jax.ffi.ffi_call and XLA's typed FFI.

    import luaptx, luaptx.jax as lj
    ks = luaptx.load("examples/python/rms_norm.lua", device="emu")
    y, r = jax.jit(lambda x, w: lj.call(ks.rms_norm_fwd, x, w))(x, w)
    rms = lj.differentiable(ks.rms_norm_fwd, ks.rms_norm_bwd,
                            save_for_backward=("input 1", "input 2", "output 2"), returns=1)
    jax.grad(lambda x, w: rms(x, w).sum())(x, w)

The handlers are C (luaptx/_core.c against xla/ffi/api/c_api.h from
jax.ffi.include_dir()), registered as the FFI target "luaptx" for the cpu
platform (the emulator) and CUDA (the GPU, on XLA's stream). They are always
built, against jaxlib's headers (unless the package was built with
LUAPTX_NO_JAX=1).
"""
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from . import _core, _parse_saved

__all__ = ["call", "register", "differentiable", "DTYPES"]

# jnp dtypes of the PTX types luaptx tensors use.
DTYPES = {"f16": jnp.float16, "bf16": jnp.bfloat16, "f32": jnp.float32, "f64": jnp.float64,
          "s8": jnp.int8, "s16": jnp.int16, "s32": jnp.int32, "s64": jnp.int64,
          "u8": jnp.uint8, "u16": jnp.uint16, "u32": jnp.uint32, "u64": jnp.uint64}

if not hasattr(_core, "xla_handlers"):
    raise ImportError("this luaptx._core has no XLA handlers (built with LUAPTX_NO_JAX=1, or older than the "
                      "package): reinstall luaptx without LUAPTX_NO_JAX (pip install ./python)")

_CPU, _CUDA = _core.xla_handlers()
jax.ffi.register_ffi_target("luaptx", _CPU, platform="cpu")
jax.ffi.register_ffi_target("luaptx", _CUDA, platform="CUDA")


def _dlpack_dtype(dtype):
    """DLPack's (code, bits) of a numpy or JAX dtype, by DLPack's own codes
    (int 0, uint 1, float 2, opaque 3, bfloat 4, complex 5, bool 6)."""
    dt = np.dtype(dtype)
    if dt.name == "bfloat16":
        return (4, 16)
    return ({"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}.get(dt.kind, 3), dt.itemsize * 8)


def _check(spec, arrays):
    """Check the operands against in_specs, naming the argument and the
    kernel's file:line, and return the outputs' shapes: by the C binding
    (luaptx_kernel_bind on shapes and dtypes alone, the check every launch
    makes: dtype TypeError; count, rank, dims ValueError)."""
    k = spec.label
    if len(arrays) != len(spec.in_specs):
        raise TypeError(f"{k} takes {len(spec.in_specs)} input(s), got {len(arrays)}")
    for i, a in enumerate(arrays):
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise TypeError(f"{k}: input {i + 1} must be an array (jax, numpy), got {type(a).__name__}"
                            + ("; a scalar is a template value (a keyword) of the kernel" if isinstance(a, (int, float)) else ""))
    shapes = tuple(tuple(a.shape) for a in arrays)
    if not all(isinstance(d, int) for s in shapes for d in s):     # symbolic (jax.export) dims: bound at run time
        return spec.out_shapes([a.shape for a in arrays])
    return list(_core.bind_shapes(spec.handle, shapes, tuple(_dlpack_dtype(a.dtype) for a in arrays)))


def _check_batched(spec, bspec):
    """A batched kernel takes each of the kernel's tensors with one more,
    leading, dim (the batch) and the same dtype; ValueError otherwise."""
    pairs = list(zip(spec.in_specs + spec.out_specs, bspec.in_specs + bspec.out_specs))
    same = len(spec.in_specs) == len(bspec.in_specs) and len(spec.out_specs) == len(bspec.out_specs)
    if same and all(b.dtype == s.dtype and len(b.dims) == len(s.dims) + 1 for s, b in pairs):
        return
    want = ", ".join(f"Tile(V, {', '.join(str(d) for d in s.dims + (s.dtype,))})" for s in spec.in_specs + spec.out_specs)
    have = ", ".join(repr(b) for b in bspec.in_specs + bspec.out_specs)
    raise ValueError(f'batched kernel "{bspec.kernel.name}" ({bspec.where}) must take the tensors of "{spec.kernel.name}" '
                     f"({spec.where}) with a leading batch dim, in order: {want}; it takes {have}")


_seen = {}   # id(spec) -> spec, registered (kept: ids stay unique)


def _registered(spec):
    """The registry key of a specialisation, registered with the XLA
    handler on first use (for the life of the process)."""
    if _seen.get(id(spec)) is not spec:
        _core.xla_register(spec.key, spec.handle)
        _seen[id(spec)] = spec
    return spec.key


def register(kernel, **params):
    """Register a kernel's specialisation with the XLA handlers (lj.call
    does it when tracing): an executable compiled or exported elsewhere
    names its kernels by key (script hash, kernel name, template values),
    and runs here once a script with that key is loaded and registered.
    Returns the key."""
    return _registered(kernel.specialize(**params))


def _scalar_attrs(spec, arrays, params):
    """Take the runtime scalars out of a call (positional numbers after the
    arrays, or keywords) as XLA scalar attributes "scalar_NAME" of their
    PTX type, checked by the C binding; returns (arrays, attrs). A traced
    value is refused: attributes are compile-time constants."""
    if not spec.scalars:
        return arrays, {}
    n = len(arrays)
    while n and (isinstance(arrays[n - 1], numbers.Number)
                 or isinstance(arrays[n - 1], jax.core.Tracer) and arrays[n - 1].ndim == 0):
        n -= 1
    traced = [a for a in arrays[n:] if isinstance(a, jax.core.Tracer)]
    for name, _ in spec.scalars:
        if isinstance(params.get(name), jax.core.Tracer):
            traced.append(params[name])
    if traced:
        raise TypeError(f"{spec.label}: a runtime scalar is a traced value; lj.call passes runtime scalars as XLA "
                        "attributes (compile-time constants of the custom call): pass Python numbers (under jax.jit: "
                        "static_argnums / static_argnames)")
    arrays, values = spec.split(arrays, params)
    _core.check_scalars(spec.handle, values)
    attrs = {}
    for (name, ptx_type), v in zip(spec.scalars, values):
        if v is not None:
            attrs["scalar_" + name] = np.dtype(_SCALAR_TYPES[ptx_type]).type(v)
    return arrays, attrs


# numpy types of the runtime scalars' PTX types (bN as unsigned).
_SCALAR_TYPES = {"f32": np.float32, "f64": np.float64, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
                 "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
                 "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64}


def call(kernel, *arrays, batched=None, stream=None, **params):
    """Call a kernel specialisation on JAX arrays through jax.ffi.ffi_call;
    returns its outputs (one as is, several as a tuple). Works eagerly and
    under jax.jit. Under jax.vmap the kernel runs once per batch element
    (vmap_method="sequential"), unless `batched` names a kernel taking the
    same tensors with a leading batch dim (its grid covering the batch):
    then vmap runs that kernel once on the whole batch (vmap_method
    "broadcast_all"; nested vmaps fold their batch dims into one).
    Runtime scalars follow the arrays (or are keywords), as XLA attributes.
    stream: None only: XLA launches a custom call on its computation's
    stream (the emulator: the call is done when it returns)."""
    if stream is not None:
        raise ValueError(f"luaptx.jax.call: stream={stream!r}: XLA runs a custom call on the stream of its computation "
                         "(which it gives the handler); valid: None")
    spec = kernel.specialize()
    params = dict(params)
    arrays, scalar_attrs = _scalar_attrs(spec, arrays, params)
    spec = kernel.specialize(**params) if params else spec
    shapes = _check(spec, arrays)
    outs = [jax.ShapeDtypeStruct(s, DTYPES[o.dtype]) for s, o in zip(shapes, spec.out_specs)]
    attrs = {"kernel": _registered(spec), **scalar_attrs}
    method = "sequential"
    if batched is not None:
        bspec = batched.specialize(**params)
        _check_batched(spec, bspec)
        attrs["batched"] = _registered(bspec)
        method = "broadcast_all"
    res = jax.ffi.ffi_call("luaptx", outs, vmap_method=method)(*arrays, **attrs)
    return res[0] if len(res) == 1 else tuple(res)



def differentiable(fwd, bwd, save_for_backward=("input 1",), returns=None, **params):
    """A jax.custom_vjp function from a forward and a backward kernel, with
    the same contract as luaptx.torch.differentiable: it returns the
    forward's first `returns` outputs; bwd takes the saved tensors then the
    gradients of the returned outputs and returns one per forward input."""
    fspec, bspec = fwd.specialize(**params), bwd.specialize()
    nin, nout = len(fspec.in_specs), len(fspec.out_specs)
    returns = nout if returns is None else returns
    saved = _parse_saved(save_for_backward, nin, nout)
    if len(bspec.in_specs) != len(saved) + returns or len(bspec.out_specs) != nin:
        raise ValueError(f'differentiable: kernel "{bwd.name}" ({bspec.where}) must take the {len(saved)} saved tensor(s) '
                         f"then {returns} gradient(s) and return {nin} gradient(s); "
                         f"it takes {len(bspec.in_specs)} and returns {len(bspec.out_specs)}")

    def run(*xs):
        outs = call(fwd, *xs, **params)
        return outs if isinstance(outs, tuple) else (outs,)

    def pick(outs):
        return outs[0] if returns == 1 else tuple(outs[:returns])

    @jax.custom_vjp
    def function(*xs):
        return pick(run(*xs))

    def f_fwd(*xs):
        outs = run(*xs)
        return pick(outs), tuple(xs[i] if role == "input" else outs[i] for role, i in saved)

    def f_bwd(res, g):
        gs = (g,) if returns == 1 else tuple(g)
        gin = call(bwd, *res, *gs)
        return gin if isinstance(gin, tuple) else (gin,)

    function.defvjp(f_fwd, f_bwd)
    return function
