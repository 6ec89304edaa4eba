"""ember arrays and PyTorch/NumPy tensors share memory through DLPack, both ways, strides and
offsets included; bad tensors are clear errors."""
import numpy as np
import pytest
import torch

import ember
from ember import _C


def test_torch_to_ember_and_back_shares_memory_with_strides_and_offset():
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    view = base.t()[3:8:2]  # strided, with an offset
    a = _C.from_dlpack(view)
    assert a.shape == list(view.shape) and a.strides == list(view.stride()) and a.dtype == "f32"
    back = torch.from_dlpack(a)
    assert back.data_ptr() == view.data_ptr() and back.stride() == view.stride()
    assert torch.equal(back, view)
    base.add_(1)  # one memory: the change shows through both
    assert torch.equal(back, view)


def test_numpy_both_ways():
    x = np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::2]
    a = _C.from_dlpack(x)
    assert a.dtype == "i16" and a.strides == [6, 2]
    y = np.from_dlpack(a)
    assert np.shares_memory(x, y) and (x == y).all()


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float64])
def test_every_dtype_round_trips(dtype):
    t = (torch.arange(10) % 3).to(dtype)
    assert torch.equal(torch.from_dlpack(_C.from_dlpack(t)), t)


def test_ember_memory_outlives_the_python_array():
    t = torch.ones(1000)
    back = torch.from_dlpack(_C.from_dlpack(t))
    del t  # torch keeps the memory alive through ember's storage
    assert back.sum().item() == 1000


def test_bad_inputs_are_clear_errors():
    with pytest.raises(TypeError, match="__dlpack__"):
        _C.from_dlpack([1, 2, 3])
    with pytest.raises(Exception):
        _C.from_dlpack(torch.ones(2, dtype=torch.complex64))
    t = torch.ones(2, requires_grad=True)
    with pytest.raises(Exception):
        _C.from_dlpack(t)
    capsule = torch.ones(2).__dlpack__()
    _C.from_dlpack(capsule)
    with pytest.raises(ValueError, match="unused"):
        _C.from_dlpack(capsule)  # already consumed


def test_graph_builder_errors_are_value_and_type_errors():
    g = _C.Graph()
    x = g.input("f32", [2, 3])
    with pytest.raises(ValueError, match="unknown op"):
        g.op("no_such_op", [x])
    with pytest.raises(TypeError, match="attribute 'axis'"):
        g.op("softmax", [x], {"axis": "last"})
    with pytest.raises(ValueError):
        g.op("matmul", [x, x])
    with pytest.raises(ValueError, match="unknown dtype"):
        g.input("f128", [1])


def test_compiled_graph_checks_its_inputs():
    g = _C.Graph()
    x = g.input("f32", [2, 3])
    (y,) = g.op("exp", [x])
    g.set_outputs([y])
    c = _C.CompiledGraph(g, "default", False)
    (out,), aliases = c.run([torch.zeros(2, 3)], [])
    assert torch.equal(torch.from_dlpack(out), torch.ones(2, 3)) and aliases == [-1]
    with pytest.raises(TypeError, match="input 0"):
        c.run([torch.zeros(2, 3, dtype=torch.float64)], [])
    with pytest.raises(ValueError, match="shape"):
        c.run([torch.zeros(3, 2)], [])
    with pytest.raises(ValueError, match="takes 1 inputs"):
        c.run([], [])


@pytest.mark.parametrize("fused", [False, True])
def test_slice_of_a_stated_length_is_checked_at_run_time(fused):
    """A symbolic slice length (x[:, :seq]) is PyTorch's word; a plan still refuses to read past x."""
    g = _C.Graph()
    s = g.symbol()
    x = g.input("f32", [f"s{s}"])
    (y,) = g.op("slice", [x], {"axis": 0, "start": 1, "length": [f"s{s}"]})
    if fused:
        (y,) = g.op("exp", [y])
    g.set_outputs([y])
    c = _C.CompiledGraph(g, "default", False)
    with pytest.raises(ValueError, match="pass the end"):
        c.run([torch.zeros(5)], [5])


def _net_allocated_bytes(fn, *args):
    """What PyTorch's profiler counts as allocated and not freed during fn(*args)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn(*args)
    return sum(e.self_cpu_memory_usage for e in prof.key_averages()), result


@pytest.mark.parametrize("fn, shape", [
    (lambda x: (x * 2 + 1).relu(), (256, 1024)),
    # The sum's output must not keep the larger buffer that the matmul's value used before it.
    (lambda x: ((x @ x.t()).softmax(-1), x[1:].sum(0), torch.full((3,), 2.0)), (64, 64)),
    (lambda x: (x + 1).reshape(2, -1)[1], (8, 8)),  # an output that views a buffer
], ids=["chain", "several_outputs", "view_output"])
def test_output_memory_comes_from_torch_allocator(fn, shape):
    x = torch.randn(*shape)
    compiled = ember.compile(fn)
    compiled(x)
    eager_bytes, _ = _net_allocated_bytes(fn, x)
    ember_bytes, outputs = _net_allocated_bytes(compiled, x)
    assert ember_bytes == eager_bytes
    del outputs

    def call_and_drop():  # the memory goes back through PyTorch when the outputs die
        compiled(x)
    assert _net_allocated_bytes(call_and_drop)[0] == 0


def test_outputs_past_the_limit_come_from_ember(monkeypatch):
    # EMBER_TORCH_OUTPUT_MAX_MB: PyTorch's allocator would map such blocks afresh on every call.
    import ember._translate as translate
    monkeypatch.setattr(translate, "_TORCH_OUTPUT_MAX", 1024)
    fn = lambda x: (x.sum(0) + 1, x * 2)  # noqa: E731 (a 64-byte output and a 4 KiB one)
    compiled = ember.compile(fn)
    x = torch.randn(64, 16)
    compiled(x)
    torch_bytes, (small, large) = _net_allocated_bytes(compiled, x)
    assert torch_bytes == small.numel() * 4
    torch.testing.assert_close(large, x * 2)
    torch.testing.assert_close(small, x.sum(0) + 1)


def test_a_negative_view_is_imported_with_its_sign():
    """PyTorch's negative views hold -x through a flag DLPack drops; the import resolves it."""
    base = torch.tensor([1.0, -2.0])
    assert torch.equal(torch.from_dlpack(ember.tensor.from_dlpack(base._neg_view())), -base)


def test_a_tensor_without_memory_is_a_clear_error():
    """PyTorch's zero tensors have elements and no memory; importing one read address 0."""
    with pytest.raises(ValueError, match="no memory"):
        ember.tensor.from_dlpack(torch._efficientzerotensor(3))
