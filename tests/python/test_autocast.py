"""Models under torch.autocast("cpu", dtype=torch.bfloat16), as PyTorch's CPU benchmarks run them:
their convolutions and linear layers come to ember in bfloat16, with float32 norms. ember runs
them in bfloat16 itself (oneDNN, accumulating in float32 as eager's kernels do), and a batch
norm of a bfloat16 input with float32 statistics is lowered, not a torch call. TESTING.md's
model rule with the float16/bfloat16 factor: within 3x eager's RMSE against float64."""
import copy

import pytest
import torch
import torch.nn as nn

import ember
from conftest import assert_compiled


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 1), nn.BatchNorm2d(32), nn.ReLU6(),
            nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
        for m in self.modules():  # trained-like statistics, so the norms do not shrink everything
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)

    def forward(self, x):
        return self.body(x)


def norm_mlp():
    """A linear layer's bfloat16 output into a float32 layer norm."""
    return nn.Sequential(nn.Linear(64, 128), nn.LayerNorm(128), nn.GELU(), nn.Linear(128, 64), nn.LayerNorm(64))


def transformer():
    return nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)


@pytest.fixture
def no_mha_fastpath():
    """Eager's fused transformer-layer kernel, which Dynamo does not take (torch.compile's output
    differs from it in dtype under autocast), off for the eager run."""
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(True)


def rmse(a, ref):
    return (a.double() - ref.double()).pow(2).mean().sqrt().item()


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
@pytest.mark.parametrize("build,shape", [(ConvNet, (2, 3, 32, 32)), (norm_mlp, (8, 64)), (transformer, (2, 24, 64))],
                         ids=["convnet", "norm-mlp", "transformer"])
def test_bfloat16_autocast_inference_matches_eager(build, shape, mode, no_mha_fastpath):
    torch.manual_seed(0)
    model = build().eval()
    x = torch.randn(shape)
    with torch.no_grad():
        reference64 = copy.deepcopy(model).double()(x.double())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = model(x)
            compiled = ember.compile(model, mode=mode)
            actual = compiled(x)
            again = compiled(x)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual, again)
    assert rmse(actual, reference64) <= 3 * rmse(expected, reference64) + 1e-5, \
        f"{rmse(actual, reference64):.3g} vs eager {rmse(expected, reference64):.3g}"
    report = assert_compiled(compiled)
    if build is not transformer:  # every op lowered: the norms of bfloat16 activations too
        assert all(g.lowered_share == 1.0 for g in report.graphs), report.text()


def test_bfloat16_autocast_training_step_matches_eager():
    """The batch norms of bfloat16 activations are lowered in training too: PyTorch's meta kernel
    declares their saved statistics bfloat16 (its CPU kernel gives float32, which its backward
    requires), so the backward recomputes them from x."""
    torch.manual_seed(0)
    model = ConvNet().train()
    model64 = copy.deepcopy(model).double()
    x = torch.randn(4, 3, 16, 16)

    def step(m, inp, amp):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            out = m(inp)
        out.float().pow(2).mean().backward()
        grads = [p.grad.clone() for p in m.parameters()]
        for p in m.parameters():
            p.grad = None
        return grads

    reference64 = step(model64, x.double(), amp=False)
    compiled = ember.compile(copy.deepcopy(model))
    actual = step(compiled, x, amp=True)
    expected = step(model, x, amp=True)
    for name, a, e, r in zip([n for n, _ in model.named_parameters()], actual, expected, reference64):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert rmse(a, r) <= 3 * rmse(e, r) + 1e-5 * r.abs().max().item(), \
            f"{name}: {rmse(a, r):.3g} vs eager {rmse(e, r):.3g}"
    report = assert_compiled(compiled)
    assert "batch_norm" not in report.text(), report.text()  # (max pooling with indices is a torch call)
