"""Python's call overhead on top of the same launch from C (docs/python.md).

    build/pyvenv/bin/python bench/python_overhead.py [--iters 2000] [--repeats 7]

A prepared kernel doing no work (`noop` of examples/python/rms_norm.lua,
one f32 in, one out, N=1) is launched on CPU tensors (the emulator) with
unchanged shapes. The baseline is luaptx_launch_dlpack called from C in a
loop (luaptx._core.c_launch_times: tensors taken once); each Python path
is timed per call the same way, and its overhead is its median minus the
C median. Spread: the 10th and 90th percentiles of the per-call times.
Paths: numpy (outputs given, and allocated), torch eager (outputs given,
allocated, the op's eager path, and its custom op through torch's
dispatcher), JAX (a jitted function calling luaptx.jax.call).
Targets: <= 5 us per eager torch call and per JAX FFI call. This is a
benchmark, not a timed test: machines differ, and this one is shared.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import luaptx
from luaptx import _core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def per_call(fn, iters, repeats):
    """Per-call seconds of fn over repeats x iters calls (after a warm-up)."""
    for _ in range(50):
        fn()
    out = []
    for _ in range(repeats):
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return out


def summary(times):
    q = statistics.quantiles(times, n=10)
    return statistics.median(times), q[0], q[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    ks = luaptx.load(os.path.join(ROOT, "examples", "python", "rms_norm.lua"), device="emu")
    k = ks.noop
    x, y = np.zeros(1, np.float32), np.zeros(1, np.float32)
    spec = k.specialize()
    base = _core.c_launch_times(spec.handle, (x, y), a.iters * a.repeats)
    rows = [("C luaptx_launch_dlpack (baseline)", base)]
    rows.append(("numpy k(x, y), outputs given", per_call(lambda: k(x, y), a.iters, a.repeats)))
    rows.append(("numpy k(x), output allocated", per_call(lambda: k(x), a.iters, a.repeats)))
    try:
        import torch
        import luaptx.torch as lt
        tx, ty = torch.zeros(1), torch.zeros(1)
        op = lt.op(k)
        rows.append(("torch eager k(x, y), outputs given", per_call(lambda: k(tx, ty), a.iters, a.repeats)))
        rows.append(("torch eager k(x), output allocated", per_call(lambda: k(tx), a.iters, a.repeats)))
        rows.append(("torch eager lt.op(k)(x)", per_call(lambda: op(tx), a.iters, a.repeats)))
        key = k.specialize().key         # the op's last argument: its kernel's key
        rows.append(("torch custom op lt.op(k).custom(x, key) (dispatcher)",
                     per_call(lambda: op.custom(tx, key), a.iters, a.repeats)))
    except ImportError as e:
        print(f"torch paths skipped: {e}", file=sys.stderr)
    try:
        import jax
        import luaptx.jax as lj
        jx = jax.numpy.zeros(1, jax.numpy.float32)
        f = jax.jit(lambda x: lj.call(k, x))
        rows.append(("JAX jit(lj.call(k, x)) + block_until_ready", per_call(lambda: f(jx).block_until_ready(), a.iters, a.repeats)))
    except ImportError as e:
        print(f"JAX path skipped: {e}", file=sys.stderr)
    c_med = statistics.median(base)
    print(f"noop kernel on the emulator, {a.iters * a.repeats} calls per path; times per call in microseconds")
    print(f"{'path':50} {'median':>8} {'p10':>8} {'p90':>8} {'overhead':>9}")
    for name, times in rows:
        med, p10, p90 = summary(times)
        over = "" if times is base else f"{(med - c_med) * 1e6:+9.2f}"
        print(f"{name:50} {med * 1e6:8.2f} {p10 * 1e6:8.2f} {p90 * 1e6:8.2f} {over}")


if __name__ == "__main__":
    main()
