"""A small PyTorch model normalising with a luaptx RMS-norm kernel, eager
and under torch.compile(fullgraph=True), on CPU tensors (the emulator),
checked against torch's own RMS norm; then its gradient through the
forward/backward kernel pair.

    build/pyvenv/bin/python examples/python/torch_rms_norm.py
"""
import os

import torch

import luaptx
import luaptx.torch as lt

HERE = os.path.dirname(os.path.abspath(__file__))
ks = luaptx.load(os.path.join(HERE, "rms_norm.lua"), device="emu")
rms_norm = lt.differentiable(ks.rms_norm_fwd, ks.rms_norm_bwd,
                             save_for_backward=("input 1", "input 2", "output 2"), returns=1)


class Block(torch.nn.Module):
    """x + W2 relu(W1 rms_norm(x))."""

    def __init__(self, n, luaptx_norm=True):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(n))
        self.up, self.down = torch.nn.Linear(n, 2 * n), torch.nn.Linear(2 * n, n)
        self.luaptx_norm = luaptx_norm

    def forward(self, x):
        h = rms_norm(x, self.w) if self.luaptx_norm else torch.nn.functional.rms_norm(x, self.w.shape, self.w, eps=1e-6)
        return x + self.down(torch.relu(self.up(h)))


def main():
    torch.manual_seed(0)
    model = Block(64)
    reference = Block(64, luaptx_norm=False)
    reference.load_state_dict(model.state_dict())
    x = torch.randn(8, 64)
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        want = reference(x)
        eager, comp = model(x), compiled(x)
    torch.testing.assert_close(eager, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(comp, want, rtol=1e-5, atol=1e-5)
    print(f"eager and torch.compile(fullgraph=True) match torch's rms_norm: max diff "
          f"{(eager - want).abs().max():.2e}, {(comp - want).abs().max():.2e}")
    model(x).square().sum().backward()
    reference(x).square().sum().backward()
    torch.testing.assert_close(model.w.grad, reference.w.grad, rtol=1e-4, atol=1e-4)
    print(f"gradient of the norm weight matches: max diff {(model.w.grad - reference.w.grad).abs().max():.2e}")


if __name__ == "__main__":
    main()
