"""Shared fixtures: the example kernels on the emulator."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RMS = os.path.join(ROOT, "examples", "python", "rms_norm.lua")


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
