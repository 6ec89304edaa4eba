"""Kept imports ([Note: kept imports] in _translate.py): a parameter's Array is imported once and
passed again while the same tensor comes back with the same memory and layout. Whatever the
caller does to a parameter between calls (new values in place, new memory, a new layout, a new
Parameter object), the compiled call must compute what eager does with it now."""
import pytest
import torch

import ember
from ember import _translate
from ember._compile import report_of


def live_graphs(compiled):
    """The CompiledFx objects of this compiled module or function, as its report holds them."""
    graphs = [getattr(g, "_callable", lambda: None)() for g in report_of(compiled).graphs]
    return [g for g in graphs if type(g) is _translate.CompiledFx]


@pytest.fixture
def linear():
    torch.manual_seed(0)
    return torch.nn.Linear(8, 8)


def check(compiled, model, x):
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_parameters_are_imported_once_and_read_as_they_are_now(linear, mode):
    compiled = ember.compile(linear, mode=mode)
    x = torch.randn(3, 8)
    for _ in range(3):
        check(compiled, linear, x)
    kept = [k for g in live_graphs(compiled) for k in g.kept_imports if k is not None]
    assert {id(k[0]) for k in kept} == {id(linear.weight), id(linear.bias)}, "the parameters' imports are kept"
    arrays = [k[4] for k in kept]

    with torch.no_grad():
        linear.weight.mul_(-2)  # new values in the same memory: read through the kept import
    check(compiled, linear, x)
    assert [k[4] for g in live_graphs(compiled) for k in g.kept_imports if k is not None] == arrays

    linear.weight.data = torch.randn(8, 8)  # new memory under the same Parameter
    check(compiled, linear, x)
    with torch.no_grad():
        linear.weight.t_()  # the same memory, transposed in place: new strides
    check(compiled, linear, x)
    linear.bias = torch.nn.Parameter(torch.randn(8))  # a new Parameter object
    check(compiled, linear, x)


def test_a_training_step_between_calls_is_seen(linear):
    compiled = ember.compile(linear)
    optimizer = torch.optim.SGD(linear.parameters(), lr=0.5)
    x = torch.randn(4, 8)
    for _ in range(3):
        loss = compiled(x).pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        check(compiled, linear, x)


def test_inputs_that_are_not_parameters_are_not_kept():
    compiled = ember.compile(lambda a, b: a @ b + 1)
    a, b = torch.randn(4, 5), torch.randn(5, 6)
    for _ in range(3):
        torch.testing.assert_close(compiled(a, b), a @ b + 1)
    assert all(k is None for g in live_graphs(compiled) for k in g.kept_imports)
    b.mul_(3)  # read afresh at each call
    torch.testing.assert_close(compiled(a, b), a @ b + 1)


class ViewsOfParameters(torch.nn.Module):
    """Views of a parameter and of a buffer, which a plan resolves once per layout assuming each
    contiguous at offset 0 ([Note: views resolved per layout] in runtime/executable.cpp)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 6))
        self.register_buffer("b", torch.randn(2, 3))

    def forward(self, x):
        w = self.w.reshape(2, 4, 6).permute(1, 0, 2).reshape(4, 12)
        return x @ w + self.b.reshape(-1).repeat(2), self.w.t()[1:]


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_views_of_a_parameter_follow_its_layout_now(mode):
    torch.manual_seed(0)
    model = ViewsOfParameters()
    compiled = ember.compile(model, mode=mode)
    x = torch.randn(5, 4)
    check(compiled, model, x)
    check(compiled, model, x)
    model.w.data = model.w.data.t().contiguous().t()  # the same values, transposed strides
    check(compiled, model, x)
    model.w.data = torch.randn(9, 6)[1:]  # contiguous, at an offset
    check(compiled, model, x)
    model.b = torch.randn(3, 2).t()  # a buffer laid out otherwise
    check(compiled, model, x)
