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
import os
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

from . import _core
from ._core import LuaError

__all__ = ["load", "load_string", "Kernel", "Script", "LuaError"]


def _version():
    """luaptx's one version: the installed package's (setup.py read it from
    VERSION at the root of the tree), or, run from the source tree without
    installing, that file itself (the same as `luaptx --version`)."""
    try:
        return _dist_version("luaptx")
    except PackageNotFoundError:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open(os.path.join(root, "VERSION"), encoding="ascii") as f:
            return f.read().strip()


__version__ = _version()

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
        lines = _core.specs(self.handle).split("\n")
        self.where = lines[0][len("where "):]
        specs = []
        for line in lines[1:]:
            role, dtype, dims = line.split(" ")
            parsed = () if dims == "-" else tuple(int(d) if d.lstrip("-").isdigit() else d for d in dims.split(","))
            specs.append(Spec(role, dtype, parsed))
        self.in_specs = [s for s in specs if s.role == "in"]
        self.out_specs = [s for s in specs if s.role == "out"]
        self.nin = len(self.in_specs)

    def out_shapes(self, shapes):
        """The outputs' shapes for inputs of these shapes (dims bound from the
        inputs; their checks happen at launch)."""
        values = {}
        for spec, shape in zip(self.in_specs, shapes):
            for d, got in zip(spec.dims, shape):
                if isinstance(d, str):
                    values.setdefault(d, got)
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

    def launch(self, tensors, stream=None):
        """Launch on tensors (inputs, then outputs: allocated when left out);
        returns the outputs as a tuple. stream: None (a CUDA tensor's
        producer's current stream) or a CUstream as an int."""
        return _core.launch(self.handle, tuple(tensors), _alloc, stream)


class Kernel:
    """A kernel of a loaded script; call it on tensors (see the module doc)."""

    def __init__(self, script, name):
        self.script, self.name = script, name
        self._specs, self._default = {}, None

    def specialize(self, **params):
        """The specialisation for these template values (cached)."""
        key = tuple(sorted(params.items()))
        s = self._specs.get(key)
        if s is None:
            s = self._specs[key] = Specialization(self, params)
            if not key:
                self._default = s
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

    def __call__(self, *tensors, **params):
        """Launch on the inputs (outputs allocated like the first input and
        returned) or on the inputs and outputs (written in place, returned).
        One output is returned as is, several as a tuple."""
        s = self._default if not params and self._default is not None else self.specialize(**params)
        # CUDA tensors: the producer's current stream (looked up in C)
        outs = _core.launch(s.handle, tensors, _alloc, None)
        return outs[0] if len(outs) == 1 else outs

    def __repr__(self):
        return f"<luaptx kernel {self.name} ({self.script.path})>"


class Script:
    """A loaded kernel script: its kernels by name (``s["rms_norm"]`` or
    ``s.rms_norm``), iterable over the names."""

    def __init__(self, state, path):
        self._state, self.path = state, path
        names = _core.names(state)
        self.kernels = {n: Kernel(self, n) for n in (names.split(",") if names else [])}

    def __getitem__(self, name):
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"no kernel named {name!r} in {self.path} (it defines: {', '.join(self.kernels) or 'nothing'})") from None

    def __getattr__(self, name):
        if name.startswith("_") or name in ("kernels", "path"):
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


def _open(device, lua_path, cache_dir):
    if device not in ("auto", "emu", "cuda"):
        raise ValueError(f"luaptx: unknown device {device!r}; valid: 'auto', 'emu', 'cuda'")
    return _core.open(device, lua_path, cache_dir, True)


def load(path, device="auto", lua_path=None, cache_dir=None):
    """Load a kernel script; returns its kernels by name (a Script).

    device: "auto" (the GPU when there is one, else the emulator), "emu" or
    "cuda". lua_path: extra package.path entries; the script's directory and
    the current directory are searched too, so scripts can require modules
    beside them (``require "kernels.norms"``)."""
    path = os.fspath(path)
    extra = [os.path.join(os.path.dirname(os.path.abspath(path)), "?.lua"), os.path.join(os.getcwd(), "?.lua")]
    state = _open(device, ";".join(([lua_path] if lua_path else []) + extra), cache_dir)
    _core.load(state, path, None)
    return Script(state, path)


def load_string(chunk, name="=(python)", device="auto", lua_path=None, cache_dir=None):
    """Load a kernel script from a string (name: its chunk name for errors)."""
    state = _open(device, ";".join(([lua_path] if lua_path else []) + [os.path.join(os.getcwd(), "?.lua")]), cache_dir)
    _core.load(state, chunk, name)
    return Script(state, name.lstrip("=@"))


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
