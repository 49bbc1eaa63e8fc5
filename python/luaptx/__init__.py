"""luaptx from Python: load a kernel script, call its kernels on DLPack tensors.

    import luaptx, numpy as np
    ks = luaptx.load("examples/python/rms_norm.lua")
    y = ks.rms_norm(x, w)            # outputs allocated like the inputs
    ks.rms_norm(x, w, y)             # or given, written in place
    print(ks.rms_norm.ptx(N=1024))   # PTX of a specialisation

Any tensor with ``__dlpack__`` crosses (numpy, torch, jax, cupy), zero-copy:
CPU tensors run on the CPU emulator, CUDA tensors on the GPU. PyTorch and
JAX integration: ``luaptx.torch`` and ``luaptx.jax``. See docs/python.md.
"""
import collections
import hashlib
import json
import numbers
import os
import re
import warnings
import weakref

from . import _core
from ._core import LuaError

__version__ = _core.version    # the C library's LUAPTX_VERSION, as `luaptx --version` says

__all__ = ["load", "load_string", "Kernel", "Script", "LuaError", "MAX_SPECIALIZATIONS", "autotune", "Autotuned"]

# Specialisations a Kernel keeps (least recently used evicted first): each
# distinct set of template values is one.
MAX_SPECIALIZATIONS = 64

# numpy dtype names for the PTX types luaptx tensors use (bf16 has none).
NUMPY_DTYPES = {"f16": "float16", "f32": "float32", "f64": "float64", "s8": "int8", "s16": "int16",
                "s32": "int32", "s64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}


def _params_text(params):
    """Template values as luaptx_kernel_get's "NAME=value,..." text."""
    items = []
    for name, value in sorted(params.items()):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(f"kernel parameter {name}={value!r}: valid values are numbers and words")
        text = repr(value) if isinstance(value, float) else str(value)
        if "," in text or "=" in text:
            raise ValueError(f"kernel parameter {name}={text!r}: a value may not contain ',' or '='")
        items.append(f"{name}={text}")
    return ",".join(items)


def _alloc(dtype, shape, like):
    """Allocate an output like the first input ``like``, for inputs whose
    type has no DLPack C exchange API (torch's allocates in C): torch
    tensors on like's device, numpy arrays otherwise."""
    if type(like).__module__.split(".")[0] == "torch":
        from . import torch as lt
        return lt.allocate(dtype, shape, like)
    import numpy
    if dtype not in NUMPY_DTYPES:
        raise TypeError(f"numpy has no dtype for {dtype}; pass the outputs")
    return numpy.empty(shape, dtype=NUMPY_DTYPES[dtype])


def _cuda_stream(like):
    """The stream of a launch on a CUDA tensor whose type has no DLPack C
    exchange API (called from C): torch's current stream for an older
    torch, else None (the default stream)."""
    if type(like).__module__.split(".")[0] == "torch":
        import torch
        return torch.cuda.current_stream(like.device).cuda_stream or None
    return None


_core.set_stream_fallback(_cuda_stream)


class Spec:
    """A tensor spec of a kernel: dtype (PTX name) and dims (ints or symbols)."""
    __slots__ = ("role", "dtype", "dims")

    def __init__(self, role, dtype, dims):
        self.role, self.dtype, self.dims = role, dtype, dims

    def __repr__(self):
        return f"Tile({', '.join(str(d) for d in self.dims + (self.dtype,))})"


class Specialization:
    """A kernel with its template values fixed: the C handle and its specs."""

    def __init__(self, kernel, params):
        self.kernel, self.params = kernel, dict(params)
        self.handle = _core.kernel(kernel.script._state, kernel.name, _params_text(params))
        self.key = f"{kernel.script.ref}:{kernel.name}:{_params_text(params)}"
        lines = _core.specs(self.handle).split("\n")
        self.where = lines[0][len("where "):]
        self.label = f'kernel "{kernel.name}" ({self.where})'
        specs, self.param_names, self.scalars = [], (), ()
        for line in lines[1:]:
            if line.startswith("params "):
                self.param_names = () if line == "params -" else tuple(line[len("params "):].split(","))
                continue
            if line.startswith("scalars "):     # runtime scalars: (name, PTX type), raw_params order
                self.scalars = tuple(tuple(x.split(":")) for x in line[len("scalars "):].split(","))
                continue
            role, dtype, dims = line.split(" ")
            parsed = () if dims == "-" else tuple(int(d) if d.lstrip("-").isdigit() else d for d in dims.split(","))
            specs.append(Spec(role, dtype, parsed))
        self.in_specs = [s for s in specs if s.role == "in"]
        self.out_specs = [s for s in specs if s.role == "out"]
        self.nin = len(self.in_specs)

    def dims_of(self, shapes):
        """The symbolic dims the inputs' shapes bind, {name: size}, each from
        its first occurrence (their consistency is checked at launch)."""
        values = {}
        for spec, shape in zip(self.in_specs, shapes):
            for d, got in zip(spec.dims, shape):
                if isinstance(d, str):
                    values.setdefault(d, got)
        return values

    def out_shapes(self, shapes):
        """The outputs' shapes for inputs of these shapes (dims bound from the
        inputs; their checks happen at launch)."""
        values = self.dims_of(shapes)
        out = []
        for i, spec in enumerate(self.out_specs):
            dims = []
            for d in spec.dims:
                if isinstance(d, str) and d not in values:
                    raise ValueError(f'kernel "{self.kernel.name}" ({self.where}): out_specs[{i + 1}] dim {d} '
                                     f"is bound by no input; pass it as a parameter ({d}=...)")
                dims.append(values[d] if isinstance(d, str) else d)
            out.append(tuple(dims))
        return out

    def launch(self, tensors, stream=None, scalars=None):
        """Launch on tensors (inputs, then outputs: allocated when left out);
        returns the outputs as a tuple. stream: None (a CUDA tensor's
        producer's current stream) or a CUstream as an int; scalars: the
        runtime scalars in order (None: a template value), or None."""
        tensors = tuple(tensors)
        _guard(self, tensors)
        return _launch(self, tensors, stream, scalars)

    def split(self, args, kwargs):
        """Split a call's positional args into tensors and runtime scalars
        (numbers after the tensors, in raw_params order) and take the
        scalars given as keywords out of kwargs; returns (tensors, scalars
        tuple or None when the kernel has none)."""
        if not self.scalars:
            return args, None
        n = len(args)
        while n and _is_number(args[n - 1]):
            n -= 1
        pos, values = args[n:], [None] * len(self.scalars)
        if len(pos) > len(self.scalars):
            raise TypeError(f"{self.label} takes {len(self.scalars)} runtime scalar(s) "
                            f"({', '.join(x[0] for x in self.scalars)}), got {len(pos)} positional")
        for j, v in enumerate(pos):
            values[j] = v
        for j, (name, _) in enumerate(self.scalars):
            if name in kwargs:
                if j < len(pos):
                    raise TypeError(f"{self.label}: scalar {name} given positionally and as a keyword")
                values[j] = kwargs.pop(name)
            if isinstance(values[j], bool):
                raise TypeError(f"{self.label}: scalar {name} is a bool; valid: an int or a float")
        return args[:n], tuple(values)


def _is_number(v):
    """Is v a scalar argument (a Python or numpy number, not a tensor)?"""
    return isinstance(v, numbers.Number)


# What a refused launch raises (LuaError is a RuntimeError).
_FAILURES = (TypeError, ValueError, RuntimeError, BufferError)


def _launch(spec, tensors, stream, scalars=None):
    """_core.launch, with a failure explained per argument where Python
    knows more than the C side (a meta tensor, a functorch transform)."""
    try:
        if scalars is not None:
            return _core.launch(spec.handle, tensors, _alloc, stream, scalars)
        return _core.launch(spec.handle, tensors, _alloc, stream)
    except _FAILURES as e:
        _explain(spec, tensors, e)
        raise


def _explain(spec, tensors, e):
    """Raise a clearer error than e, the failure of a launch on tensors,
    where Python knows more than the C side; else return (the caller
    raises e)."""
    if isinstance(e, LuaError):
        return
    for i, t in enumerate(tensors):
        g = (_GUARDS.get(type(t)) or _guard_of(type(t)))[1]
        if g is not None:
            g(spec, t, i)


def _arg(spec, i):
    """The name of tensor i of a call: "input I" or "output O" (1-based)."""
    return f"input {i + 1}" if i < spec.nin else f"output {i - spec.nin + 1}"


def _numpy_output(spec, t, i):
    """A read-only numpy array is no output."""
    if not t.flags.writeable:
        raise ValueError(f"{spec.label}: {_arg(spec, i)} is read-only (numpy writeable=False); "
                         "outputs are written in place: pass a writable array, or leave the outputs out")


def _jax_output(spec, t, i):
    """JAX arrays are immutable: never an output."""
    raise ValueError(f"{spec.label}: {_arg(spec, i)} is a JAX array, which is immutable; outputs are written "
                     "in place: leave the outputs out (they are allocated and returned), or use luaptx.jax.call")


# Per tensor type: (the check of an output before a launch, the
# explanation of a failed launch's tensor), None for none. Inputs need no
# check in Python: torch's requires_grad is refused in C (_core.c).
_GUARDS = {}


def _guard_of(tp):
    """The checks of tensors of type tp that only Python can do (cached)."""
    g = _GUARDS.get(tp)
    if g is None:
        mod = tp.__module__.split(".")[0]
        if mod == "torch":
            from .torch import _explain as explain
            g = (None, explain)
        elif mod in ("jax", "jaxlib"):
            g = (_jax_output, None)
        elif tp.__name__ == "ndarray" and mod == "numpy":
            g = (_numpy_output, None)
        else:
            g = (None, None)
        _GUARDS[tp] = g
    return g


def _guard(spec, tensors):
    """Refuse outputs the C side cannot see are wrong: immutable (JAX) or
    read-only (numpy) ones."""
    for i in range(spec.nin, len(tensors)):
        t = tensors[i]
        g = (_GUARDS.get(type(t)) or _guard_of(type(t)))[0]
        if g is not None:
            g(spec, t, i)


class Kernel:
    """A kernel of a loaded script; call it on tensors (see the module doc).
    Pickled by reference: its script (path or text, checked by hash) and name."""

    def __init__(self, script, name):
        self.script, self.name = script, name
        self._specs, self._default, self._names = collections.OrderedDict(), None, None

    def __reduce__(self):
        return _kernel_of, (self.script, self.name)

    def _check_names(self, params):
        """TypeError for keywords that are no template value of the kernel
        (its params, raw_params, symbolic dims, or arch)."""
        if self._names is None:
            d = self.specialize()
            dims = {x for s in d.in_specs + d.out_specs for x in s.dims if isinstance(x, str)}
            self._names = frozenset(d.param_names) | dims | {"arch"}
        unknown = sorted(set(params) - self._names)
        if unknown:
            d = self._default
            raise TypeError(f"{d.label}: unknown template value(s) {', '.join(unknown)}; valid: "
                            f"{', '.join(sorted(self._names))}" + (" (stream= is a launch option of a call, not a "
                                                                   "template value)" if "stream" in unknown else ""))

    def specialize(self, **params):
        """The specialisation for these template values (cached: the
        MAX_SPECIALIZATIONS most recently used are kept)."""
        key = tuple(sorted(params.items()))
        s = self._specs.get(key)
        if s is not None:
            self._specs.move_to_end(key)
            return s
        if params:
            self._check_names(params)
        s = self._specs[key] = Specialization(self, params)
        if not key:
            self._default = s
        while len(self._specs) > MAX_SPECIALIZATIONS:
            self._specs.popitem(last=False)
        return s

    @property
    def where(self):
        """The Lua file:line defining the kernel."""
        return self.specialize().where

    def ptx(self, **params):
        """The PTX text of a specialisation."""
        return _core.ptx(self.specialize(**params).handle)

    def check(self, **params):
        """ptxas's resource report of a specialisation as a dict (arch,
        instructions, registers, smem, dynamic_smem, spills, stack); LuaError
        without ptxas or when ptxas refuses the PTX."""
        report = {}
        for line in _core.check(self.specialize(**params).handle).split("\n"):
            key, value = line.split("=", 1)
            report[key] = value if key == "arch" else int(value)
        return report

    def __call__(self, *args, stream=None, **params):
        """Launch on the inputs (outputs allocated like the first input and
        returned) or on the inputs and outputs (written in place, returned),
        then the kernel's runtime scalars (its raw_params of one number:
        positional after the tensors, or keywords; a new value re-traces
        nothing). One output is returned as is, several as a tuple. Other
        keywords are template values; stream= a CUDA stream (an int
        CUstream, or an object with .cuda_stream) instead of the producer's
        current one."""
        s = self._default
        if s is None or s.scalars or params or stream is not None:
            return self._call(args, stream, params)
        if len(args) > s.nin:                    # outputs given
            _guard(s, args)
        try:                                     # CUDA tensors: the producer's current stream (looked up in C)
            outs = _core.launch(s.handle, args, _alloc, None)
        except _FAILURES as e:
            _explain(s, args, e)
            raise
        return outs[0] if len(outs) == 1 else outs

    def _call(self, args, stream, params):
        """A call with runtime scalars, template values or a stream."""
        s = self._default if self._default is not None else self.specialize()
        scalars = None
        if s.scalars:
            params = dict(params)
            args, scalars = s.split(args, params)
        if params:
            s = self.specialize(**params)
        _guard(s, args)
        if stream is not None:
            stream = _stream(stream, self.script)
        outs = _launch(s, args, stream, scalars)
        return outs[0] if len(outs) == 1 else outs

    def __repr__(self):
        return f"<luaptx kernel {self.name} ({self.script.path})>"


def _stream_handle(stream, label="", default="the producer's current stream, torch's for torch tensors"):
    """A stream argument (not None) validated, as its CUstream int: the one
    check for k(...) and luaptx.torch's ops. label prefixes the errors;
    default says what None means to the caller."""
    where = f"{label}: " if label else ""
    if isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    else:
        handle = getattr(stream, "cuda_stream", None)
        if not isinstance(handle, int) or isinstance(handle, bool):
            raise TypeError(f"{where}stream={stream!r}: valid values are None ({default}), a CUstream as an int, "
                            "or a stream with .cuda_stream (torch.cuda.Stream)")
    if handle < 0:
        raise ValueError(f"{where}stream={stream!r}: a CUstream handle is 0 (the default stream) or a positive address")
    return handle


def _stream(stream, script):
    """A stream argument, validated, as a CUstream int; None on the
    emulator, whose calls return when their kernel is done (a stream
    orders nothing there)."""
    handle = _stream_handle(stream)
    return None if script.device.startswith("emu") else handle


def _kernel_of(script, name):
    """Unpickle a Kernel: its script's kernel of that name."""
    return script[name]


class Script:
    """A loaded kernel script: its kernels by name (``s["rms_norm"]`` or
    ``s.rms_norm``), iterable over the names. Pickled by reference: a
    file's path and hash (unpickling loads the file, refused if it
    changed), or a string's text."""

    def __init__(self, state, path, digest, origin):
        self._state, self.path, self.digest, self._origin = state, path, digest, origin
        self.ref = f"{os.path.basename(path)}#{digest}"
        names = _core.names(state)
        self.kernels = {n: Kernel(self, n) for n in (names.split(",") if names else [])}

    def __reduce__(self):
        return _script_of, self._origin + (self.digest,)

    def __getitem__(self, name):
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"no kernel named {name!r} in {self.path} (it defines: {', '.join(self.kernels) or 'nothing'})") from None

    def __getattr__(self, name):
        if name.startswith("_") or name in ("kernels", "path", "digest", "ref"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(e.args[0]) from None

    def __iter__(self):
        return iter(self.kernels)

    def __len__(self):
        return len(self.kernels)

    def __contains__(self, name):
        return name in self.kernels

    @property
    def device(self):
        """The device the script's kernels run on, e.g. "emu (CPU emulator, 2 threads)"."""
        return _core.device(self._state)


def _digest(data):
    """The content hash naming a script in keys (sha256, 16 hex digits)."""
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()[:16]


def _open(device, lua_path, cache_dir):
    if device not in ("auto", "emu", "cuda"):
        raise ValueError(f"luaptx: unknown device {device!r}; valid: 'auto', 'emu', 'cuda'")
    state = _core.open(device, lua_path, cache_dir, True)
    if device == "cuda":
        try:
            _core.device(state)          # a missing GPU fails here, not at the first call
        except LuaError as e:     # the message, without the Lua position inside luaptx
            raise LuaError(f'luaptx: device="cuda": {re.sub(r"^[^:]*pyptx/[^:]*:[0-9]+: ", "", str(e))}') from None
    return state


# Scripts loaded by unpickling, by their origin and hash: a worker
# unpickling many kernels of one script loads it once.
_unpickled = weakref.WeakValueDictionary()


def _script_of(kind, ref, name, device, lua_path, cache_dir, digest):
    """Unpickle a Script: load the file again (refused when its hash
    changed) or the text; shared by every unpickled reference to it."""
    key = (kind, ref, name, device, lua_path, cache_dir, digest)
    s = _unpickled.get(key)
    if s is None:
        if kind == "file":
            s = load(ref, device=device, lua_path=lua_path, cache_dir=cache_dir)
            if s.digest != digest:
                raise LuaError(f"luaptx: unpickling {ref}: the script changed since it was pickled "
                               f"(hash {s.digest}, pickled {digest})")
        else:
            s = load_string(ref, name, device=device, lua_path=lua_path, cache_dir=cache_dir)
        _unpickled[key] = s
    return s


def load(path, device="auto", lua_path=None, cache_dir=None):
    """Load a kernel script; returns its kernels by name (a Script).

    device: "auto" (the GPU when there is one, else the emulator), "emu" or
    "cuda" (a LuaError here without a GPU). lua_path: extra package.path
    entries; the script's directory and the current directory are searched
    too, so scripts can require modules beside them (``require "kernels.norms"``)."""
    path = os.fspath(path)
    extra = [os.path.join(os.path.dirname(os.path.abspath(path)), "?.lua"), os.path.join(os.getcwd(), "?.lua")]
    state = _open(device, ";".join(([lua_path] if lua_path else []) + extra), cache_dir)
    _core.load(state, path, None)
    with open(path, "rb") as f:
        digest = _digest(f.read())
    return Script(state, path, digest, ("file", os.path.abspath(path), None, device, lua_path, cache_dir))


def load_string(chunk, name="=(python)", device="auto", lua_path=None, cache_dir=None):
    """Load a kernel script from a string (name: its chunk name for errors)."""
    state = _open(device, ";".join(([lua_path] if lua_path else []) + [os.path.join(os.getcwd(), "?.lua")]), cache_dir)
    _core.load(state, chunk, name)
    return Script(state, name.lstrip("=@"), _digest(chunk), ("string", chunk, name, device, lua_path, cache_dir))


def _parse_saved(names, nin, nout):
    """("input 1", "output 2") -> [("input", 0), ("output", 1)], checked
    (the save_for_backward of luaptx.torch and luaptx.jax)."""
    out = []
    for n in names:
        role, _, num = str(n).partition(" ")
        limit = {"input": nin, "output": nout}.get(role)
        if limit is None or not num.isdigit() or not 1 <= int(num) <= limit:
            raise ValueError(f"save_for_backward: {n!r} is not 'input I' (1..{nin}) or 'output O' (1..{nout})")
        out.append((role, int(num) - 1))
    return out


def autotune(kernel, configs, key=None, name=None, force=False, cache_dir=None):
    """A kernel that picks the best of configs (dicts of template values)
    per key, like triton.autotune: key names what selects a tuning (the
    kernel's symbolic dims, bound from the inputs' shapes; its runtime
    scalars; "input I" for input I's shape and dtype; None: every input's
    shape and dtype). The first call with a new key value runs `luaptx
    tune`'s sweep (pyptx.tools.tune) over the configs on random inputs of
    the call's shapes and dtypes, with the same per-config result cache
    (<cache dir>/tune/<name>/, name default the kernel's name), so a
    config is evaluated once per key across calls and processes and the
    CLI reuses what Python measured, and the other way round. A failing
    config is reported (a warning with its reason) and skipped. On a GPU
    configs are timed with device events; on the emulator timing means
    nothing, so the ranking (.results[key]["ranking"], and a warning)
    says how configs were ranked instead."""
    return Autotuned(kernel, configs, key, name, force, cache_dir)


class Autotuned:
    """An autotuned kernel (see autotune): call it as the kernel. .best
    maps each key value to its config, .results to the sweep's result
    (results per config with status, reason, cached; best; ranking),
    .tunings counts the sweeps run."""

    def __init__(self, kernel, configs, key, name, force, cache_dir):
        configs = [dict(c) for c in configs]
        if not configs:
            raise ValueError(f"luaptx.autotune: {kernel.name}: configs is empty; give a list of dicts of template values")
        d = kernel.specialize()
        scalars = {n for n, _ in d.scalars}
        for c in configs:
            bad = sorted(set(c) & scalars)
            if bad:
                raise TypeError(f"luaptx.autotune: {d.label}: config {c} sets runtime scalar(s) {', '.join(bad)}; "
                                "configs hold template values (runtime scalars are the call's)")
            kernel._check_names(c)
        dims = [x for sp in d.in_specs for x in sp.dims if isinstance(x, str)]
        valid = sorted(set(dims) | scalars) + [f"input {i + 1}" for i in range(d.nin)]
        if key is not None:
            key = (key,) if isinstance(key, str) else tuple(key)
            unknown = [k for k in key if k not in valid]
            if unknown:
                raise TypeError(f"luaptx.autotune: {d.label}: unknown key name(s) {', '.join(map(str, unknown))}; "
                                f"valid: {', '.join(valid)}")
        self.kernel, self.configs, self.key, self.name = kernel, configs, key, name or kernel.name
        self.force, self.cache_dir = force, cache_dir
        self.best, self.results, self.tunings = {}, {}, 0

    def _key_of(self, spec, tensors, scalars):
        """The key value of a call: what its key names, as a tuple."""
        shapes = [tuple(getattr(t, "shape", ())) for t in tensors[:spec.nin]]
        if self.key is None:
            return tuple((s, str(getattr(t, "dtype", "?"))) for s, t in zip(shapes, tensors))
        dims = spec.dims_of(shapes)
        values = dict(zip((n for n, _ in spec.scalars), scalars or ()))
        out = []
        for k in self.key:
            if k.startswith("input "):
                i = int(k[6:]) - 1
                out.append((shapes[i], str(getattr(tensors[i], "dtype", "?"))))
            else:
                out.append(dims.get(k, values.get(k)))
        return tuple(out)

    def _tune(self, spec, tensors, scalars, params, kv):
        """Run the sweep for key value kv; returns the best config."""
        dims = {d: int(n) for d, n in spec.dims_of([tuple(t.shape) for t in tensors]).items()}
        values = {**dims, **{n: v for (n, _), v in zip(spec.scalars, scalars or ()) if v is not None}}
        request = {"name": self.name, "configs": self.configs, "values": values, "force": bool(self.force),
                   "inputs": [{"dtype": sp.dtype, "shape": [int(n) for n in t.shape]} for sp, t in zip(spec.in_specs, tensors)]}
        if self.cache_dir is not None:
            request["cache_dir"] = os.fspath(self.cache_dir)
        result = json.loads(_core.tune(self.kernel.specialize(**params).handle, json.dumps(request)))
        self.tunings += 1
        self.results[kv] = result
        for r in result["results"]:
            if r["status"] != "ok":
                warnings.warn(f"luaptx.autotune: {spec.label}: config {r['key']} failed ({r.get('reason')}); skipped",
                              stacklevel=3)
        for w in result.get("warnings") or ():
            warnings.warn(f"luaptx.autotune: {spec.label}: {w}", stacklevel=3)
        if not result["timed"]:
            warnings.warn(f"luaptx.autotune: {spec.label} on {result['device']}: {result['ranking']}", stacklevel=3)
        if not result.get("best"):
            raise LuaError(f"luaptx.autotune: {spec.label}: no config ran (" +
                           "; ".join(f"{r['key']}: {r.get('reason')}" for r in result["results"]) + ")")
        return dict(result["best"]["config"])

    def __call__(self, *args, stream=None, **params):
        d = self.kernel.specialize()
        rest = dict(params)
        tensors, scalars = d.split(args, rest)
        kv = self._key_of(d, tensors, scalars)
        best = self.best.get(kv)
        if best is None:
            best = self.best[kv] = self._tune(d, tensors, scalars, rest, kv)
        return self.kernel(*args, stream=stream, **params, **best)

    def __repr__(self):
        return f"<luaptx.autotune {self.kernel.name}: {len(self.configs)} configs, {len(self.best)} key(s) tuned>"
