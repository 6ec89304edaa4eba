"""as_strided reads memory, not values: ember compiles it when its input owns its storage
exactly (made inside the graph, dense, offset 0). A dense re-reading of that memory becomes ember
views; other strides and offsets are a torch call on the input in eager's strides; an input that
may be a view into more memory makes the graph run on PyTorch. Each case checks eager's values,
and what ember did."""
import pytest
import torch

import ember
from conftest import report_of


def lowered(compiled, op):
    return sum(g.lowered.get(op, 0) for g in report_of(compiled).graphs)


def torch_called(compiled, op):
    return sum(g.torch_calls.get(op, 0) for g in report_of(compiled).graphs)


def fell_back(compiled):
    return any(g.fallback for g in report_of(compiled).graphs)


DENSE = [
    ((2, 3, 4), (12, 4, 1)),   # contiguous, the same shape
    ((4, 6), (6, 1)),          # another shape over the same memory
    ((4, 3, 2), (1, 4, 12)),   # the transpose, read through the memory
    ((2, 12, 1, 1), (12, 1, 7, 99)),  # size-1 dims with arbitrary strides (Swin's pooler)
]


@pytest.mark.parametrize("size,stride", DENSE)
@pytest.mark.parametrize("transposed", [False, True])
def test_dense_rereading_is_ember_views(size, stride, transposed):
    def fn(x):
        y = torch.exp(x)
        y = y.transpose(0, 2).contiguous() if transposed else y  # memory in another order
        return torch.as_strided(y, size, stride) * 2

    x = torch.randn(2, 3, 4)
    compiled = ember.compile(fn)
    torch.testing.assert_close(compiled(x), fn(x))
    assert lowered(compiled, "aten.as_strided.default") == 1 and not fell_back(compiled)


@pytest.mark.parametrize("size,stride,offset", [
    ((5, 3), (1, 1), 0),    # overlapping windows
    ((2, 2), (4, 1), 2),    # an offset
    ((3,), (2,), 1),        # a strided part
    ((0, 3), (3, 1), 0),    # nothing
])
def test_other_strides_are_a_torch_call(size, stride, offset):
    def fn(x):
        return torch.as_strided(x + 1, size, stride, offset) * 3

    x = torch.randn(8)
    compiled = ember.compile(fn)
    torch.testing.assert_close(compiled(x), fn(x))
    assert torch_called(compiled, "aten.as_strided.default") == 1 and not fell_back(compiled)


def test_graph_input_runs_on_pytorch():
    """A graph input may be a view into more memory than its elements: only eager knows."""
    def fn(x):
        return torch.as_strided(x, (3,), (2,), 1) + 1

    base = torch.randn(10)
    x = base[2:8]
    compiled = ember.compile(fn)
    with pytest.warns(RuntimeWarning, match="as_strided"):
        torch.testing.assert_close(compiled(x), fn(x))
    assert fell_back(compiled)


def test_view_of_a_graph_value_runs_on_pytorch():
    """as_strided of a slice reads the slice's base: more memory than the slice's elements."""
    def fn(x):
        y = x * 2
        return torch.as_strided(y[1:], (2, 2), (1, 2)) + 1

    x = torch.randn(9)
    compiled = ember.compile(fn)
    with pytest.warns(RuntimeWarning, match="as_strided"):
        torch.testing.assert_close(compiled(x), fn(x))
    assert fell_back(compiled)


def test_gradient_through_as_strided():
    """The backward scatters into a fresh buffer (as_strided_scatter), which ember lowers."""
    def fn(x):
        y = torch.sin(x).mean((-1, -2), keepdim=True)
        return torch.as_strided(y, (2, 6, 1, 1), (6, 1, 5, 5)).squeeze(-1) * 3

    x = torch.randn(2, 6, 4, 4, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    compiled = ember.compile(fn)
    compiled(x).pow(2).sum().backward()
    fn(x_ref).pow(2).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    assert not fell_back(compiled)


def test_symbolic_sizes_are_ember_views():
    """Swin's pooler under dynamic=True: sizes and strides are expressions of the batch size."""
    def fn(x):
        y = x.mean((-1, -2), keepdim=True)
        n, c = y.shape[0], y.shape[1]
        return torch.as_strided(y, (n, c, 1, 1), (c, 1, c, c)).flatten(1) * 2

    compiled = ember.compile(fn, dynamic=True)
    for batch in (2, 3, 5):
        x = torch.randn(batch, 6, 4, 4)
        torch.testing.assert_close(compiled(x), fn(x))
    assert lowered(compiled, "aten.as_strided.default") >= 1 and not fell_back(compiled)
    assert torch_called(compiled, "aten.as_strided.default") == 0
