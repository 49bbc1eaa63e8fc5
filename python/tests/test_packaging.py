"""The package builds its XLA handlers without jax (as under pip's build
isolation, which installs jaxlib, a build requirement) and in a temporary
directory, never in python/build; without jaxlib the build says so."""
import os
import subprocess
import sys
import time

from conftest import ROOT

PY = os.path.join(ROOT, "python")

BUILD = r"""
import runpy, sys
sys.modules["jax"] = None          # no jax, as in pip's isolated build environment (jaxlib is a build requirement)
sys.argv = ["setup.py", "-q", "build", "--build-lib", sys.argv[1]]
runpy.run_path("setup.py", run_name="__main__")
"""


def newest(path):
    """The newest mtime under path (0 when it does not exist)."""
    times = [os.path.getmtime(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs]
    return max(times, default=0)


def test_the_xla_handlers_are_built_without_jax_and_outside_the_checkout(tmp_path):
    start = time.time()
    r = subprocess.run([sys.executable, "-c", BUILD, str(tmp_path)], cwd=PY, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert newest(os.path.join(PY, "build")) < start                 # nothing built in the checkout
    probe = "import luaptx._core as c, sys; print(c.__file__.startswith(sys.argv[1]), hasattr(c, 'xla_handlers'))"
    r = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)}, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "True"]


NO_JAXLIB = BUILD.replace('sys.modules["jax"] = None', 'sys.modules["jax"] = sys.modules["jaxlib"] = None')


def test_a_build_without_jaxlib_stops_saying_so_unless_asked(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LUAPTX_NO_JAX"}
    r = subprocess.run([sys.executable, "-c", NO_JAXLIB, str(tmp_path)], cwd=PY, capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode != 0 and "need jaxlib's headers" in r.stderr + r.stdout
    r = subprocess.run([sys.executable, "-c", NO_JAXLIB, str(tmp_path)], cwd=PY, capture_output=True, text=True,
                       timeout=600, env={**env, "LUAPTX_NO_JAX": "1"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_the_version_is_the_c_librarys():
    import importlib.metadata
    import luaptx
    out = subprocess.run([os.path.join(ROOT, "build", "luaptx"), "--version"], capture_output=True, text=True).stdout
    assert out.split()[:2] == ["luaptx", luaptx.__version__]
    assert importlib.metadata.version("luaptx") == luaptx.__version__
    assert "numpy" in (importlib.metadata.requires("luaptx") or [])

