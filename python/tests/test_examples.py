"""The examples in examples/python/ run and check themselves on CPU."""
import os
import runpy

import pytest

from conftest import ROOT

EXAMPLES = os.path.join(ROOT, "examples", "python")


def test_the_torch_example_matches_torch_eager_and_compiled(capsys):
    pytest.importorskip("torch", reason="torch is not installed (make test-python installs it)")
    runpy.run_path(os.path.join(EXAMPLES, "torch_rms_norm.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "torch.compile(fullgraph=True) match torch's rms_norm" in out and "gradient of the norm weight matches" in out


def test_the_jax_example_runs_under_jit_and_grad(capsys):
    pytest.importorskip("jax", reason="jax is not installed (make test-python installs it)")
    runpy.run_path(os.path.join(EXAMPLES, "jax_rms_norm.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("jit: ") and "grad: max diff" in out
