"""ember's own tensors from Python: zero-copy exchange with NumPy and PyTorch, eager ops,
ember.compile over functions of ember tensors (ember's tracer: graphs, breaks at the Python
line, guards on Python scalars), clear errors."""
import numpy as np
import pytest
import torch

import ember
from ember import tensor as et
from conftest import report_of


def test_exchange_without_copies_both_ways():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = et.from_numpy(a)
    assert x.shape == [3, 4] and x.dtype == "f32"
    back = np.from_dlpack(x)
    assert np.shares_memory(a, back)
    t = torch.arange(6.0).reshape(2, 3).t()
    y = et.from_dlpack(t)
    assert torch.from_dlpack(y).data_ptr() == t.data_ptr()


def test_eager_ops_and_operators_match_numpy():
    a = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    x = et.from_numpy(a)
    got = np.from_dlpack(et.relu(x) * 2 + 1 - x / 4)
    np.testing.assert_allclose(got, np.maximum(a, 0) * 2 + 1 - a / 4, rtol=1e-6)
    np.testing.assert_allclose(np.from_dlpack(et.sum(x, 1)), a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(np.from_dlpack(2 - x), 2 - a)
    assert np.from_dlpack(x > 0).dtype == np.bool_
    assert float(et.sum(et.tensor([1.0, 2.0]))) == 3.0


def test_compile_over_ember_tensors_with_a_break_at_the_python_line():
    def f(x):
        s = et.sum(x)
        if s.item() > 0:  # the break: reported at this line
            return et.softmax(x * 2, -1)
        return x - 1

    compiled = ember.compile(f)
    x = et.tensor(np.linspace(-1, 3, 12, dtype=np.float32).reshape(3, 4))
    for _ in range(2):
        np.testing.assert_allclose(np.from_dlpack(compiled(x)), np.from_dlpack(f(x)), rtol=1e-5, atol=1e-6)
    text = report_of(compiled).text()
    assert "test_ember_tensors.py:" in text and "[item]" in text
    line = f.__code__.co_firstlineno + 2
    assert f"test_ember_tensors.py:{line}" in text


def test_scalar_arguments_are_guarded_and_modes_checked():
    compiled = ember.compile(lambda x, k: x * k)
    x = et.tensor([1.0, 2.0])
    assert np.from_dlpack(compiled(x, 2.0)).tolist() == [2.0, 4.0]
    assert np.from_dlpack(compiled(x, 3.0)).tolist() == [3.0, 6.0]
    with pytest.raises(TypeError):
        compiled(x, object())


def test_fullgraph_raises_on_a_break_over_ember_tensors():
    compiled = ember.compile(lambda x: x + 1 if bool(et.sum(x) > 0) else x, fullgraph=True)
    with pytest.raises(RuntimeError, match="fullgraph"):
        compiled(et.tensor([1.0]))


def test_bad_calls_are_clear_errors():
    x = et.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="unknown op"):
        ember._C.apply("no_such_op", [x])
    with pytest.raises(ValueError):
        et.matmul(x, et.tensor([[1.0, 2.0, 3.0]]))
    with pytest.raises(TypeError):
        x + "a"
