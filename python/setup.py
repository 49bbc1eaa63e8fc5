"""Build luaptx._core against the CMake build of the checkout (libluaptx.a).

The library is found in $LUAPTX_BUILD_DIR, else ../build beside this
directory: build it first (`make build` at the repository root). The
extension uses CPython's limited API (3.10+), so one wheel serves every
later CPython. luaptx.jax's XLA handlers are always built, against
jaxlib's headers (a build requirement), unless LUAPTX_NO_JAX=1 says not to.
"""
import atexit
import os
import shlex
import shutil
import subprocess
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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
    """XLA's FFI C API headers for luaptx.jax's handlers, from jaxlib (a
    build requirement in pyproject.toml, so pip's isolated builds have it;
    jax itself is not needed). None when LUAPTX_NO_JAX=1 asks for a build
    without the handlers; without jaxlib otherwise the build stops saying
    so: the handlers are never silently missing."""
    if os.environ.get("LUAPTX_NO_JAX") == "1":
        return None
    try:
        import jaxlib
        inc = os.path.join(os.path.dirname(jaxlib.__file__), "include")
        if os.path.exists(os.path.join(inc, "xla", "ffi", "api", "c_api.h")):
            return inc
    except Exception:  # noqa: BLE001 - any failure means: no usable jaxlib here
        pass
    raise SystemExit("luaptx: luaptx.jax's XLA handlers need jaxlib's headers (xla/ffi/api/c_api.h): "
                     "pip install jaxlib, or build with LUAPTX_NO_JAX=1 to leave luaptx.jax out")


class BuildExt(build_ext):
    """build_ext that finds XLA's headers only when it compiles, so that
    commands which build nothing (--version, egg_info) need no jaxlib."""

    def build_extension(self, ext):
        xla = xla_include()
        if xla:
            ext.include_dirs.append(xla)
            ext.define_macros.append(("LUAPTX_XLA", "1"))
        super().build_extension(ext)


# Build in a fresh temporary directory: a stale python/build (objects of
# another configuration) never leaks into a later build.
BUILD_BASE = tempfile.mkdtemp(prefix="luaptx-build-")
atexit.register(shutil.rmtree, BUILD_BASE, True)

core = Extension(
    "luaptx._core",
    sources=["luaptx/_core.c"],
    include_dirs=[os.path.join(ROOT, "src")],
    define_macros=[("Py_LIMITED_API", "0x030A0000")],
    py_limited_api=True,
    extra_compile_args=["-std=c11", "-Wall", "-Wextra"] + pkg_config("--cflags"),
    extra_objects=[LIB],
    depends=[LIB],   # relink when the library (and the Lua bundled in it) changes
    extra_link_args=pkg_config("--libs") + ["-lm", "-ldl", "-lpthread"],
)

setup(version=version(), ext_modules=[core], cmdclass={"build_ext": BuildExt}, options={"build": {"build_base": BUILD_BASE}, "bdist_wheel": {"py_limited_api": "cp310"}})
