"""Build luaptx._core against libluaptx.a, the C library of luaptx's tree.

The tree is the checkout this directory sits in, or, in an sdist, the copy
of it the sdist carries in core/ (CMakeLists.txt, VERSION, src, lua, bin,
cmake: `python setup.py sdist` puts it there). The library is
$LUAPTX_BUILD_DIR/libluaptx.a when that is set, else the tree's
build/libluaptx.a when `make build` made it, else CMake builds it from the
tree in the temporary build directory (that needs Debian's cmake,
pkg-config, luajit, libluajit-5.1-dev and lua-dkjson). The extension uses
CPython's limited API (3.10+), so one wheel serves every later CPython.
luaptx.jax's XLA handlers are always built, against jaxlib's headers (a
build requirement), unless LUAPTX_NO_JAX=1 says not to. `make wheel` makes
the manylinux wheel and the sdist (docs/python.md, "Wheel and sdist").
"""
import atexit
import os
import shlex
import shutil
import subprocess
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
# What an sdist carries of the tree (core/ in it): enough for CMake to build
# the library without its tests.
TREE_DIRS = ("src", "lua", "cmake")
TREE_FILES = ("CMakeLists.txt", "VERSION")
SDIST_TREE = os.path.join(HERE, "core")
TREE = SDIST_TREE if os.path.exists(os.path.join(SDIST_TREE, "CMakeLists.txt")) else os.path.dirname(HERE)

# Build in a fresh temporary directory: a stale python/build (objects of
# another configuration) never leaks into a later build.
BUILD_BASE = tempfile.mkdtemp(prefix="luaptx-build-")
atexit.register(shutil.rmtree, BUILD_BASE, True)


def version():
    """luaptx's one version: VERSION at the root of the tree (docs/api.md)."""
    with open(os.path.join(TREE, "VERSION"), encoding="ascii") as f:
        return f.read().strip()


def pkg_config(flag):
    """LuaJIT's flags from pkg-config (argument list, no shell)."""
    try:
        out = subprocess.run(["pkg-config", flag, "luajit"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ["-I/usr/include/luajit-2.1"] if flag == "--cflags" else ["-lluajit-5.1"]
    return shlex.split(out)


def cmake_library():
    """libluaptx.a built by CMake from the tree, in the temporary build
    directory (Release, without the tests)."""
    cmake = shutil.which("cmake")
    if not cmake:
        raise SystemExit("luaptx: building libluaptx.a needs cmake (Debian: cmake pkg-config luajit "
                         "libluajit-5.1-dev lua-dkjson), or point LUAPTX_BUILD_DIR at a CMake build of luaptx")
    out = os.path.join(BUILD_BASE, "cmake")
    subprocess.run([cmake, "-S", TREE, "-B", out, "-DCMAKE_BUILD_TYPE=Release", "-DLUAPTX_TESTS=OFF"], check=True)
    subprocess.run([cmake, "--build", out, "--target", "luaptx_static", "--parallel", str(os.cpu_count() or 1)],
                   check=True)
    return os.path.join(out, "libluaptx.a")


def library():
    """The libluaptx.a to link: $LUAPTX_BUILD_DIR's, the tree's build/, or
    one CMake builds now."""
    build = os.environ.get("LUAPTX_BUILD_DIR")
    if build:
        lib = os.path.join(os.path.abspath(build), "libluaptx.a")
        if not os.path.exists(lib):
            raise SystemExit(f"luaptx: {lib} is missing: LUAPTX_BUILD_DIR must name a CMake build of luaptx")
        return lib
    lib = os.path.join(TREE, "build", "libluaptx.a")
    return lib if os.path.exists(lib) else cmake_library()


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
    """build_ext that finds the library and XLA's headers only when it
    compiles, so that commands which build nothing (--version, egg_info,
    sdist) need neither."""

    def build_extension(self, ext):
        lib = library()
        ext.extra_objects.append(lib)
        ext.depends.append(lib)        # relink when the library (and the Lua bundled in it) changes
        xla = xla_include()
        if xla:
            ext.include_dirs.append(xla)
            ext.define_macros.append(("LUAPTX_XLA", "1"))
        super().build_extension(ext)


class Sdist(sdist):
    """sdist that carries the tree's C library sources in core/, so that
    the sdist builds anywhere (setup.py finds them there)."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        core = os.path.join(base_dir, "core")
        skip = shutil.ignore_patterns("*.o", "*.a", "*.so", "__pycache__")
        for d in TREE_DIRS:
            shutil.copytree(os.path.join(TREE, d), os.path.join(core, d), ignore=skip)
        os.makedirs(os.path.join(core, "bin"), exist_ok=True)
        for f in sorted(os.listdir(os.path.join(TREE, "bin"))):
            if f.endswith(".lua"):        # bundled into the library as luaptx.* modules
                shutil.copy2(os.path.join(TREE, "bin", f), os.path.join(core, "bin", f))
        for f in TREE_FILES:
            shutil.copy2(os.path.join(TREE, f), os.path.join(core, f))


core = Extension(
    "luaptx._core",
    sources=["luaptx/_core.c"],
    include_dirs=[os.path.join(TREE, "src")],
    define_macros=[("Py_LIMITED_API", "0x030A0000")],
    py_limited_api=True,
    extra_compile_args=["-std=c11", "-Wall", "-Wextra"] + pkg_config("--cflags"),
    extra_link_args=pkg_config("--libs") + ["-lm", "-ldl", "-lpthread"],
)

setup(version=version(), ext_modules=[core], cmdclass={"build_ext": BuildExt, "sdist": Sdist},
      options={"build": {"build_base": BUILD_BASE}, "bdist_wheel": {"py_limited_api": "cp310"}})
