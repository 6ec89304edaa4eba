"""Adversarial cases for indexing through the PyTorch bridge: embedding, index_select, gather,
advanced indexing, index_put, index_add and scatter against eager, with negative, duplicate and
out-of-range indices (moved out of test_adversarial_bridge.py, which passed 1,000 lines)."""
import pytest
import torch
import torch.nn.functional as F

import ember
from conftest import assert_same, report_of, run_both


@pytest.mark.parametrize("fn", [lambda w, i: F.embedding(i, w), lambda w, i: torch.index_select(w, 0, i.flatten()),
                                lambda w, i: torch.gather(w, 0, i)])
def test_negative_indices_raise_as_in_eager(fn):
    w, i = torch.randn(4, 3), torch.tensor([[0, -1, 2]])
    with pytest.raises(Exception):
        fn(w, i)
    with pytest.raises(Exception):
        ember.compile(fn)(w, i)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_embedding_gather_and_index_select_lowered(index_dtype):
    torch.manual_seed(0)
    w, x = torch.randn(10, 6), torch.randn(4, 7)
    ids = torch.randint(0, 10, (3, 5)).to(index_dtype)
    cols = torch.randint(0, 7, (4, 2))  # gather takes int64 only
    fn = lambda w, x, ids, cols: (F.embedding(ids, w, padding_idx=0),  # noqa: E731
                                  torch.index_select(x, 1, ids[0] % 7) if index_dtype == torch.int64 else x[:, :1],
                                  torch.gather(x, 1, cols), torch.gather(x[:3], 0, cols[:2] % 3),
                                  torch.index_select(x, 0, ids.new_zeros(0).long()), F.embedding(ids[:, :0], w))
    expected, actual, compiled = run_both(fn, w, x, ids, cols)
    assert_same(actual, expected)
    lowered = report_of(compiled).graphs[0].lowered
    assert lowered.get("aten.embedding.default") and lowered.get("aten.gather.default")
    assert not report_of(compiled).graphs[0].torch_calls


def test_embedding_over_dynamic_batches():
    w = torch.randn(50, 8)
    compiled = ember.compile(lambda w, i: F.embedding(i, w).sum(-1), dynamic=True)
    for n in (3, 7, 12):
        i = torch.randint(0, 50, (2, n))
        torch.testing.assert_close(compiled(w, i), F.embedding(i, w).sum(-1))
    assert len(report_of(compiled).graphs) == 1


def test_index_put_scatter_and_index_add_lowered():
    """Writes at indices, with duplicates (accumulated), a negative index (advanced indexing
    counts it from the end), a full slice before the index, a scalar value and index_add."""
    def fn(x, i, j, v, s):
        b = x.clone()
        b[:, j] = 5.0
        g = x.clone()
        g[i[1:3]] = v[1:3]
        return (x.index_put((i,), v, accumulate=True), b, x.scatter(1, j.view(1, -1).expand(3, -1), 2.0),
                x.scatter_add(0, torch.zeros(1, 4, dtype=torch.long), s), x.index_add(1, j, torch.ones(3, 2)), g,
                x.scatter(0, torch.tensor([[2, 0, 1, 2]]), s))
    torch.manual_seed(0)
    args = torch.randn(3, 4), torch.tensor([0, 2, 0, -1]), torch.tensor([1, 3]), torch.randn(4, 4), torch.randn(1, 4)
    expected, actual, compiled = run_both(fn, *args)
    assert_same(actual, expected)
    assert not report_of(compiled).graphs[0].torch_calls


def test_embedding_gradient_lowered_with_padding_idx():
    w = torch.randn(10, 3, requires_grad=True)
    ids = torch.tensor([[1, 2, 1], [0, 9, 1]])
    loss = lambda w, ids: (F.embedding(ids, w, padding_idx=1) ** 2).sum()  # noqa: E731
    compiled = ember.compile(loss)
    compiled(w, ids).backward()
    got, w.grad = w.grad, None
    loss(w, ids).backward()
    torch.testing.assert_close(got, w.grad)
    assert all(not g.torch_calls for g in report_of(compiled).graphs), report_of(compiled).text()


@pytest.mark.parametrize("fn", [lambda x, i: x.scatter(0, i, 1.0), lambda x, i: x.index_add(0, i.flatten(), x[:1]),
                                lambda x, i: x.scatter_add(0, i, x)])
def test_negative_write_indices_raise_as_in_eager(fn):
    x, i = torch.randn(3), torch.tensor([-1])
    with pytest.raises(Exception):
        fn(x, i)
    with pytest.raises(Exception):
        ember.compile(fn)(x, i)


def test_indexing_by_one_tensor_lowered():
    """x[i], x[:, j] with a 2-d j and negative entries (counted from the end), over dynamic sizes;
    an index out of range raises as in eager."""
    fn = lambda x, i, j: (x[i], x[:, j], x[:, :, i.view(2, 2)] * 2)  # noqa: E731
    x, i, j = torch.randn(4, 5, 6), torch.tensor([0, -1, 3, 2]), torch.tensor([[1, 4], [0, -2]])
    expected, actual, compiled = run_both(fn, x, i, j)
    assert_same(actual, expected)
    assert report_of(compiled).graphs[0].lowered.get("aten.index.Tensor") == 3
    dynamic = ember.compile(lambda x, i: x[:, i].sum(-1), dynamic=True)
    for n in (3, 5, 7):
        x, i = torch.randn(2, n, 4), torch.randint(-n, n, (n + 1,))
        torch.testing.assert_close(dynamic(x, i), x[:, i].sum(-1))
    with pytest.raises(Exception):
        ember.compile(lambda x, i: x[i])(torch.randn(3), torch.tensor([3]))


W10 = torch.randn(10, 4)
OUT_OF_RANGE = {
    "embedding": lambda w, i: F.embedding(i, w) * 2,
    "x[idx]": lambda w, i: w[i] + 1,
    "gather": lambda w, i: w.gather(0, i[None]) + 1,
    "index_add": lambda w, i: w.index_add(0, i, torch.ones(2, 4)) + 1,
    "scatter_add": lambda w, i: w.scatter_add(0, i[None].expand(4, 2).t(), torch.ones(2, 4)) + 1,
    "cross_entropy": lambda w, i: F.cross_entropy(w[:2], i.clamp(max=4)),
}


@pytest.mark.parametrize("name", OUT_OF_RANGE)
def test_an_index_out_of_range_raises_what_eager_raises(name):
    """ember raised ValueError where eager raises IndexError (embedding, x[idx]) or
    RuntimeError (gather, scatter): `except IndexError` in user code let it through. ember's
    IndexOutOfRange is both (and still a ValueError)."""
    fn, idx = OUT_OF_RANGE[name], torch.tensor([0, 10])
    with pytest.raises(Exception) as eager:
        fn(W10, idx)
    with pytest.raises(type(eager.value)) as got:
        ember.compile(fn)(W10, idx)
    assert isinstance(got.value, (ember.IndexOutOfRange, type(eager.value)))
