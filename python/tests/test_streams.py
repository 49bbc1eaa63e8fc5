"""stream= on k(...), luaptx.torch.op and luaptx.jax.call: validated
everywhere; on the emulator accepted and meaningless (a call returns when
its kernel is done); on a GPU the launch's stream (docs/python.md, Streams)."""
import numpy as np
import pytest


class FakeStream:
    """What torch.cuda.Stream offers luaptx: .cuda_stream, a CUstream int."""
    cuda_stream = 1234


@pytest.mark.parametrize("stream", [None, 0, 7, FakeStream()])
def test_the_emulator_accepts_a_valid_stream(ks, stream):
    x, w = np.ones((4, 512), np.float32), np.ones(512, np.float32)
    y, _ = ks.rms_norm_fwd(x, w, stream=stream)
    np.testing.assert_allclose(y, ks.rms_norm_fwd(x, w)[0], rtol=1e-6)


@pytest.mark.parametrize("stream, err, msg", [("s", TypeError, "valid values are None"), (True, TypeError, "valid values"),
                                              (1.5, TypeError, "valid values"), (-1, ValueError, "0 .the default stream. or a positive")])
def test_a_bad_stream_is_refused_naming_it(ks, stream, err, msg):
    with pytest.raises(err, match=f"stream={stream!r}: .*{msg}"):
        ks.rms_norm_fwd(np.ones((4, 512), np.float32), np.ones(512, np.float32), stream=stream)


def test_torch_op_takes_a_stream():
    torch = pytest.importorskip("torch")
    import luaptx
    import luaptx.torch as lt
    from conftest import RMS
    ks = luaptx.load(RMS, device="emu")
    op = lt.op(ks.rms_norm_fwd)
    x, w = torch.randn(4, 512), torch.ones(512)
    for s in (None, 0, FakeStream()):
        y, _ = op(x, w, stream=s)
        assert torch.allclose(y, op(x, w)[0])
    with pytest.raises(TypeError, match=r"stream='x': valid values are None \(torch's current stream\)"):
        op(x, w, stream="x")
    # the same check as k(...): a negative handle is no CUstream, on the emulator too
    with pytest.raises(ValueError, match=r"stream=-1: a CUstream handle is 0 \(the default stream\) or a positive"):
        op(x, w, stream=-1)


def test_jax_call_takes_only_xlas_stream(ks):
    pytest.importorskip("jax")
    import jax.numpy as jnp
    import luaptx.jax as lj
    x, w = jnp.ones((4, 512), jnp.float32), jnp.ones(512, jnp.float32)
    lj.call(ks.rms_norm_fwd, x, w, stream=None)
    with pytest.raises(ValueError, match=r"stream=0: XLA runs a custom call on the stream of its computation"):
        lj.call(ks.rms_norm_fwd, x, w, stream=0)


def _has_cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU (a stream orders launches on the GPU only)")
def test_torch_op_default_is_torchs_current_stream_and_stream_queues_there(ks_cuda):
    import torch
    import luaptx.torch as lt
    op = lt.op(ks_cuda.rms_norm_fwd)
    x, w = torch.randn(4, 512, device="cuda"), torch.ones(512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y1, _ = op(x, w)                 # torch's current stream: s
    y2, _ = op(x, w, stream=s)
    s.synchronize()
    assert torch.allclose(y1, y2)
