"""Python's call overhead on top of the same launch from C (docs/performance.md).

    build/pyvenv/bin/python bench/python_overhead.py [--rounds 500] [--block 20] [--threads 1]

A prepared kernel doing no work (`noop` of examples/python/rms_norm.lua,
one f32 in, one out, N=1) is launched on CPU tensors (the emulator) with
unchanged shapes, on one emulator thread (--threads, LUAPTX_EMU_THREADS:
the kernel is one CTA, which runs on one thread either way; before the
emulator kept its CPU count per device, the default 0 looked the usable
CPUs up in cgroup files at every launch, about 30 us). The baseline is luaptx_launch_dlpack called from C in a
loop (luaptx._core.c_launch_times: tensors taken once, its launch plan
made: no Lua, no Python). Each path is timed in blocks of --block calls;
the blocks of every path are interleaved, round after round, so that a
load on the (shared) machine falls on all of them alike. A Python block's
time is its loop's, less the fastest block of the same loop calling a
function that does nothing (printed as "loop").

Per path, over the rounds: the minimum and the median of the per-call
time of a block, and the noise (the 90th percentile over the minimum, as
a ratio). Overhead: the path's minimum less the C baseline's (the figure
least disturbed by other processes), and the median over the rounds of
the path's block less the C block of the same round (paired).

Paths: numpy (outputs given, and allocated), torch eager (outputs given,
allocated, the op's eager path `lt.op(k)(x)`), the op's custom op through
torch's dispatcher as a torch.compile'd graph calls it (the OpOverload
with the kernel's key) and as `lt.op(k).custom(x, key)`, and JAX (a jitted
function calling luaptx.jax.call, with block_until_ready). Reference rows
time what the frameworks cost alone: a torch.library.custom_op of the same
schema doing nothing, the same op registered bare (Library define and an
Autograd kernel, as luaptx.torch registers its ops), and a jitted JAX
function adding 1.
Targets (docs/performance.md): eager torch <= 2 us, lt.op eager <= 2.5 us,
the custom op <= 4 us, JAX <= 3 us. A benchmark, not a timed test:
machines differ, and a shared one is noisy.

The JAX target is read over JAX's own floor: a jitted call costs more
than 3 us before any custom call runs (the jit(x + 1) reference, about
7-8 us here), so the last row, "JAX over its floor", is the JAX path less
the jit(x + 1) reference less the C baseline: what lj.call, XLA's FFI
custom call and the handler add to the launch, which is what luaptx can
change. Its figures are the minimums' difference and the median over the
rounds of that difference within each round (paired).
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
JAX_PATH = "JAX jit(lj.call(k, x)) + block_until_ready"
JAX_REFERENCE = "  reference: JAX jit(x + 1) + block_until_ready"


def block_timer(fn, block):
    """A function timing one block of calls of fn: seconds per call."""
    def run():
        t0 = time.perf_counter()
        for _ in range(block):
            fn()
        return (time.perf_counter() - t0) / block
    return run


def c_timer(handle, tensors, block):
    """The C baseline's block: seconds per call (timed in C, call by call)."""
    return lambda: sum(_core.c_launch_times(handle, tensors, block)) / block


def torch_floor(torch):
    """A torch.library custom op of the luaptx ops' schema (a tensor and a
    str key) that does nothing but allocate its output: what torch's custom
    op machinery costs alone, for comparison."""
    @torch.library.custom_op("luaptx_bench::floor", mutates_args=(), schema="(Tensor input1, str key) -> Tensor")
    def floor(x, key):
        return x.new_empty(x.shape)
    return floor


_BARE = []   # the Library of the bare reference op, kept alive (its ops go with it)


def torch_bare(torch):
    """The same op registered bare (torch.library.Library define + an
    Autograd kernel, as luaptx.torch registers its ops), doing the same
    nothing: what torch's dispatcher costs a Python kernel alone."""
    lib = torch.library.Library("luaptx_bench", "FRAGMENT")
    lib.define("bare(Tensor input1, str key) -> Tensor")
    lib.impl("bare", lambda x, key: x.new_empty(x.shape), "Autograd")
    _BARE.append(lib)
    return torch.ops.luaptx_bench.bare.default


def paths(k, block):
    """(name, timer) of every path this environment can run."""
    x, y = np.zeros(1, np.float32), np.zeros(1, np.float32)
    spec = k.specialize()
    out = [("C luaptx_launch_dlpack (baseline)", c_timer(spec.handle, (x, y), block)),
           ("loop (a Python call doing nothing)", block_timer(lambda: None, block)),
           ("numpy k(x, y), outputs given", block_timer(lambda: k(x, y), block)),
           ("numpy k(x), output allocated", block_timer(lambda: k(x), block))]
    try:
        import torch
        import luaptx.torch as lt
        tx, ty = torch.zeros(1), torch.zeros(1)
        op = lt.op(k)
        floor, bare = torch_floor(torch), torch_bare(torch)
        key = spec.key                     # the custom op's last argument: its kernel's key
        overload = op.custom._opoverload   # what a torch.compile'd graph calls
        out += [("torch eager k(x, y), outputs given", block_timer(lambda: k(tx, ty), block)),
                ("torch eager k(x), output allocated", block_timer(lambda: k(tx), block)),
                ("torch eager lt.op(k)(x)", block_timer(lambda: op(tx), block)),
                ("torch custom op as compiled: overload(x, key)", block_timer(lambda: overload(tx, key), block)),
                ("torch custom op lt.op(k).custom(x, key)", block_timer(lambda: op.custom(tx, key), block)),
                ("  reference: a custom_op doing nothing, (x, key)", block_timer(lambda: floor(tx, key), block)),
                ("  reference: a bare Library op doing nothing", block_timer(lambda: bare(tx, key), block))]
    except ImportError as e:
        print(f"torch paths skipped: {e}", file=sys.stderr)
    try:
        import jax
        import luaptx.jax as lj
        jx = jax.device_put(jax.numpy.zeros(1, jax.numpy.float32), jax.devices("cpu")[0])
        f = jax.jit(lambda x: lj.call(k, x))
        g = jax.jit(lambda x: x + 1)
        out += [(JAX_PATH, block_timer(lambda: f(jx).block_until_ready(), block)),
                (JAX_REFERENCE, block_timer(lambda: g(jx).block_until_ready(), block))]
    except ImportError as e:
        print(f"JAX path skipped: {e}", file=sys.stderr)
    return out


def measure(timers, rounds):
    """Per path, its per-call time in each round (warm-up rounds dropped)."""
    for _ in range(3):
        for _, t in timers:
            t()
    times = [[] for _ in timers]
    for _ in range(rounds):
        for i, (_, t) in enumerate(timers):
            times[i].append(t())
    return times


def report(names, times, rounds, block):
    """The table: min, median, noise, overheads (microseconds)."""
    us = 1e6
    c, loop = times[0], times[1]
    print(f"noop kernel on the emulator ({os.environ['LUAPTX_EMU_THREADS']} thread(s)): {rounds} rounds x {block} calls per path, interleaved; "
          "microseconds per call (Python paths less the loop)")
    print(f"{'path':48} {'min':>7} {'median':>7} {'noise':>6} {'over(min)':>9} {'over(med)':>9}")
    for i, name in enumerate(names):
        t = times[i] if i < 2 else [a - min(loop) for a in times[i]]
        p90 = statistics.quantiles(t, n=10)[-1]
        line = f"{name:48} {min(t) * us:7.2f} {statistics.median(t) * us:7.2f} {p90 / min(t):6.2f}"
        if i >= 2 and "reference:" not in name:      # a reference row runs no kernel: no overhead
            paired = statistics.median(a - b for a, b in zip(t, c))
            line += f" {(min(t) - min(c)) * us:+9.2f} {paired * us:+9.2f}"
        print(line)
    jax_floor(names, times, min(loop))


def jax_floor(names, times, loop):
    """The row "JAX over its floor": the JAX path less the jit(x + 1)
    reference less the C baseline (minimums, and paired per round), when
    both JAX rows ran; the JAX target (<= 3 us) applies to it."""
    row = {n: i for i, n in enumerate(names)}
    j, r = row.get(JAX_PATH), row.get(JAX_REFERENCE)
    if j is None or r is None:
        return
    c = times[0]
    jt, rt = [a - loop for a in times[j]], [a - loop for a in times[r]]
    over = min(jt) - min(rt) - min(c)
    paired = statistics.median(a - b - d for a, b, d in zip(jt, rt, c))
    print(f"{'JAX over its floor (JAX - jit(x + 1) - C)':48} {'':7} {'':7} {'':6} {over * 1e6:+9.2f} {paired * 1e6:+9.2f}"
          "   target <= 3")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="emulator threads (LUAPTX_EMU_THREADS); 0: one per CPU")
    a = ap.parse_args()
    os.environ["LUAPTX_EMU_THREADS"] = str(a.threads)    # read when the script's device is made (load)
    ks = luaptx.load(os.path.join(ROOT, "examples", "python", "rms_norm.lua"), device="emu")
    timers = paths(ks.noop, a.block)
    report([n for n, _ in timers], measure(timers, a.rounds), a.rounds, a.block)


if __name__ == "__main__":
    main()
