"""luaptx.autotune: configs tried once per key, the best cached and
reused (in the process and in `luaptx tune`'s per-config cache on disk),
a failing config reported and skipped, and the CLI agreeing with what
Python recorded (docs/python.md, Autotuning)."""
import json
import os
import subprocess
import warnings

import numpy as np
import pytest

import luaptx
from conftest import ROOT

SCALE = os.path.join(ROOT, "examples", "python", "scale.lua")
CONFIGS = [{"PER": 1}, {"PER": 2}, {"PER": 9}]      # PER=9 fails: the kernel allows 1..8


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("LUAPTX_CACHE_DIR", str(d))
    return d


def tune_quietly(t, *args):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        y = t(*args)
    return y, [str(w.message) for w in seen]


def test_configs_run_once_per_key_and_the_best_is_reused(cache):
    ks = luaptx.load(SCALE, device="emu", cache_dir=str(cache))
    t = luaptx.autotune(ks.scale, configs=CONFIGS, key=["N"], name="pytest-autotune")
    x = np.arange(1000, dtype=np.float32)
    y, msgs = tune_quietly(t, x, 2.0, 1000)
    np.testing.assert_array_equal(y, 2 * x)
    assert t.tunings == 1 and t.best == {(1000,): {"PER": 1}}
    assert any("config PER=9 failed (trace: PER = 9; valid: 1..8); skipped" in m for m in msgs)
    assert any("emulator: timing is not meaningful" in m for m in msgs)       # the emulator says what it ranked by
    res = {r["key"]: r for r in t.results[(1000,)]["results"]}
    assert res["PER=9"]["status"] == "failed" and not res["PER=1"]["cached"] and not res["PER=2"]["cached"]
    np.testing.assert_array_equal(t(x, alpha=3.0, n=1000), 3 * x)          # same key: no new sweep
    assert t.tunings == 1
    tune_quietly(t, np.ones(256, np.float32), 1.0, 256)                     # a new N: one more
    assert t.tunings == 2 and set(t.best) == {(1000,), (256,)}
    # a new process (here: a new autotuned kernel) finds every correct config in the disk cache
    t2 = luaptx.autotune(ks.scale, configs=CONFIGS, key="N", name="pytest-autotune")
    tune_quietly(t2, x, 1.0, 1000)
    res2 = {r["key"]: r for r in t2.results[(1000,)]["results"]}
    assert res2["PER=1"]["cached"] and res2["PER=2"]["cached"] and t2.best[(1000,)] == t.best[(1000,)]


def test_the_cli_reads_what_python_cached(cache, tmp_path):
    luaptx_bin = os.environ.get("LUAPTX_BIN") or os.path.join(ROOT, "build", "luaptx")
    if not os.access(luaptx_bin, os.X_OK):
        pytest.skip(f"no luaptx binary at {luaptx_bin} (make build)")
    ks = luaptx.load(SCALE, device="emu")
    t = luaptx.autotune(ks.scale, configs=CONFIGS, key=["N"], name="pytest-cli")
    tune_quietly(t, np.ones(512, np.float32), 1.0, 512)
    sweep = tmp_path / "sweep.lua"
    sweep.write_text(f"""
local tensor = require "pyptx.runtime.tensor"
local k = dofile({json.dumps(SCALE)})
return {{ name = "pytest-cli", configs = {{ {{ PER = 1 }}, {{ PER = 2 }}, {{ PER = 9 }} }},
  build = function() return k end,
  values = function(cfg) return {{ N = 512, alpha = 1, n = 512, PER = cfg.PER }} end,
  inputs = function(seed) return tensor.rand({{ 512 }}, require("pyptx").types.f32, {{ seed = seed }}) end }}
""")
    out = tmp_path / "out.json"
    r = subprocess.run([luaptx_bin, "tune", str(sweep), "--json", str(out)], capture_output=True, text=True, timeout=240,
                       env={**os.environ, "LUAPTX_DEVICE": "emu"}, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    cli = {x["key"]: x for x in json.loads(out.read_text())["results"]}
    assert cli["PER=1"]["cached"] and cli["PER=2"]["cached"] and cli["PER=9"]["status"] == "failed"
    assert json.loads(out.read_text())["best"]["key"] == "PER=" + str(t.best[(512,)]["PER"])


def test_bad_configs_and_keys_are_refused_naming_them():
    ks = luaptx.load(SCALE, device="emu")
    with pytest.raises(TypeError, match=r"unknown key name\(s\) M; valid: N, alpha, n, input 1"):
        luaptx.autotune(ks.scale, configs=CONFIGS, key=["M"])
    with pytest.raises(TypeError, match=r"sets runtime scalar\(s\) alpha"):
        luaptx.autotune(ks.scale, configs=[{"alpha": 2.0}])
    with pytest.raises(TypeError, match=r"unknown template value\(s\) PRE"):
        luaptx.autotune(ks.scale, configs=[{"PRE": 2}])
    with pytest.raises(ValueError, match=r"configs is empty"):
        luaptx.autotune(ks.scale, configs=[])
