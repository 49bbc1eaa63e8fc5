"""Shared fixtures: the example kernels on the emulator."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RMS = os.path.join(ROOT, "examples", "python", "rms_norm.lua")


@pytest.fixture(autouse=True)
def jax_on_cpu():
    """The emulator's tests keep JAX arrays on its CPU device, also where a
    GPU is JAX's default (tests that want the GPU place arrays there)."""
    try:
        import jax
    except ImportError:
        yield
        return
    with jax.default_device(jax.devices("cpu")[0]):
        yield


@pytest.fixture(scope="session")
def ks():
    import luaptx
    return luaptx.load(RMS, device="emu")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped, with the reason, without one)")


@pytest.fixture(scope="module")
def ks_cuda():
    import luaptx
    return luaptx.load(RMS, device="cuda")


def run_python(code, *args, timeout=240):
    """Run code in a fresh Python process (a crash there is a failed test,
    not a dead suite): returns the CompletedProcess, output captured."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
