"""Build luaptx._core against the CMake build of the checkout (libluaptx.a).

The library is found in $LUAPTX_BUILD_DIR, else ../build beside this
directory: build it first (`make build` at the repository root). The
extension uses CPython's limited API (3.10+), so one wheel serves every
later CPython. Nothing here imports torch or jax.
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.abspath(os.environ.get("LUAPTX_BUILD_DIR", os.path.join(ROOT, "build")))
LIB = os.path.join(BUILD, "libluaptx.a")
if not os.path.exists(LIB):
    raise SystemExit(f"luaptx: {LIB} is missing; build the C library first (`make build` in {ROOT}) "
                     "or point LUAPTX_BUILD_DIR at a CMake build of luaptx")


def version():
    """luaptx's one version: VERSION at the root of the tree (docs/api.md)."""
    with open(os.path.join(ROOT, "VERSION"), encoding="ascii") as f:
        return f.read().strip()


def pkg_config(flag):
    """LuaJIT's flags from pkg-config (argument list, no shell)."""
    try:
        out = subprocess.run(["pkg-config", flag, "luajit"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ["-I/usr/include/luajit-2.1"] if flag == "--cflags" else ["-lluajit-5.1"]
    return shlex.split(out)


def xla_include():
    """jax's XLA FFI headers when jax is installed (the XLA handlers of
    luaptx.jax are built only then; nothing else needs jax)."""
    try:
        import jax.ffi
        inc = jax.ffi.include_dir()
    except Exception:  # noqa: BLE001 - any failure means: no jax here
        return None
    return inc if os.path.exists(os.path.join(inc, "xla", "ffi", "api", "c_api.h")) else None


XLA = xla_include()
if XLA is None:
    print("luaptx: jax is not installed: building without the XLA FFI handlers (luaptx.jax needs them)")

core = Extension(
    "luaptx._core",
    sources=["luaptx/_core.c"],
    include_dirs=[os.path.join(ROOT, "src")] + ([XLA] if XLA else []),
    define_macros=[("Py_LIMITED_API", "0x030A0000")] + ([("LUAPTX_XLA", "1")] if XLA else []),
    py_limited_api=True,
    extra_compile_args=["-std=c11", "-Wall", "-Wextra"] + pkg_config("--cflags"),
    extra_objects=[LIB],
    depends=[LIB],   # relink when the library (and the Lua bundled in it) changes
    extra_link_args=pkg_config("--libs") + ["-lm", "-ldl", "-lpthread"],
)

setup(version=version(), ext_modules=[core], options={"bdist_wheel": {"py_limited_api": "cp310"}})
