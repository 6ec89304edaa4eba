"""GEMM and conv2d through ember against PyTorch: each path (oneDNN for float32, OpenBLAS split
over ember's threads for float64; depthwise direct loops, 1x1 GEMM on the input and im2col + GEMM
where oneDNN does not run) at the edges of its geometry."""
import os
import time

import pytest
import torch
import torch.nn.functional as F

import ember
from conftest import assert_compiled, report_of

# (N, C, H, W, O, kernel, stride, padding, dilation, groups, bias)
GEOMETRIES = {
    "3x3 padded": (2, 3, 9, 11, 5, (3, 3), 1, 1, 1, 1, True),
    "7x7 stride 2 (ResNet stem)": (1, 3, 17, 16, 4, (7, 7), 2, 3, 1, 1, False),
    "1x1 pointwise": (2, 8, 5, 7, 6, (1, 1), 1, 0, 1, 1, True),
    "1x1 stride 2": (2, 8, 9, 9, 6, (1, 1), 2, 0, 1, 1, False),
    "1x1 padded": (1, 4, 3, 3, 2, (1, 1), 1, 1, 1, 1, True),
    "grouped": (2, 8, 6, 6, 12, (3, 3), 1, 1, 1, 4, True),
    "grouped 1x1": (2, 8, 6, 6, 4, (1, 1), 1, 0, 1, 2, False),
    "depthwise 3x3": (2, 6, 10, 9, 6, (3, 3), 1, 1, 1, 6, True),
    "depthwise stride 2": (2, 6, 11, 10, 6, (3, 3), 2, 1, 1, 6, False),
    "depthwise multiplier 2": (1, 3, 7, 8, 6, (3, 3), 1, 1, 1, 3, True),
    "depthwise dilated, rectangular": (1, 4, 12, 13, 4, (3, 2), (1, 2), (2, 1), (2, 3), 4, True),
    "depthwise kernel wider than input": (1, 2, 3, 2, 2, (5, 5), 1, 2, 1, 2, False),
    "dilated, asymmetric stride": (2, 3, 13, 12, 4, (3, 3), (2, 1), 2, 2, 1, True),
    "single channel": (3, 1, 6, 6, 1, (3, 3), 1, 0, 1, 1, True),
}


def conv_inputs(n, c, h, w, o, kernel, groups, bias, dtype):
    x = torch.randn(n, c, h, w, dtype=dtype)
    wt = torch.randn(o, c // groups, *kernel, dtype=dtype)
    b = torch.randn(o, dtype=dtype) if bias else None
    return x, wt, b


@pytest.mark.parametrize("name", list(GEOMETRIES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv2d_matches_pytorch(name, dtype):
    n, c, h, w, o, kernel, stride, padding, dilation, groups, bias = GEOMETRIES[name]
    x, wt, b = conv_inputs(n, c, h, w, o, kernel, groups, bias, dtype)

    def fn(x, wt, b):
        return F.conv2d(x, wt, b, stride=stride, padding=padding, dilation=dilation, groups=groups)

    compiled = ember.compile(fn)
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(compiled(x, wt, b), fn(x, wt, b), rtol=tol, atol=tol)
    assert_compiled(compiled)


def test_conv2d_float16_accumulates_in_float32():
    x, wt, b = conv_inputs(2, 4, 8, 8, 4, (3, 3), 4, True, torch.float16)

    def fn(x, wt, b):
        return F.conv2d(x, wt, b, padding=1, groups=4) + F.conv2d(x, wt.repeat(1, 4, 1, 1), b, padding=1)

    expected = fn(x.double(), wt.double(), b.double())
    actual = ember.compile(fn)(x, wt, b)
    assert actual.dtype == torch.float16
    torch.testing.assert_close(actual.double(), expected, rtol=2e-3, atol=2e-2)


def test_conv2d_on_a_non_contiguous_input():
    x = torch.randn(2, 9, 9, 4).permute(0, 3, 1, 2)  # channels-last memory
    wt = torch.randn(4, 1, 3, 3)

    def fn(x, wt):
        return F.conv2d(x, wt, padding=1, groups=4) + F.conv2d(x, wt.transpose(0, 1).expand(4, 4, 3, 3), stride=2)[..., :1, :1]

    torch.testing.assert_close(ember.compile(fn)(x, wt), fn(x, wt), rtol=1e-4, atol=1e-4)


# (N, C, L, O, kernel, stride, padding, dilation, groups, bias): Whisper's and wav2vec2's
CONV1D = {
    "padded": (2, 4, 16, 6, 3, 1, 1, 1, 1, True),
    "stride 2": (2, 6, 17, 5, 3, 2, 1, 1, 1, False),
    "feature extractor": (2, 1, 80, 8, 10, 5, 0, 1, 1, False),
    "grouped, even kernel": (1, 8, 20, 8, 8, 1, 4, 1, 4, True),
    "depthwise, dilated": (2, 5, 19, 5, 3, 1, 2, 2, 5, True),
    "valid": (2, 3, 9, 4, 4, 1, "valid", 1, 1, True),
    "same": (2, 3, 9, 4, 4, 1, "same", 1, 1, False),
}


@pytest.mark.parametrize("name", list(CONV1D))
def test_conv1d_and_its_gradients_match_pytorch(name):
    n, c, length, o, k, stride, padding, dilation, groups, bias = CONV1D[name]
    x = torch.randn(n, c, length, dtype=torch.float64, requires_grad=True)
    w = torch.randn(o, c // groups, k, dtype=torch.float64, requires_grad=True)
    b = torch.randn(o, dtype=torch.float64, requires_grad=True) if bias else None

    def fn(x, w, b):
        return F.conv1d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups).tanh()

    compiled = ember.compile(fn)
    got, want = compiled(x, w, b), fn(x, w, b)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    grads = torch.autograd.grad(got.sum(), [t for t in (x, w, b) if t is not None])
    expected = torch.autograd.grad(want.sum(), [t for t in (x, w, b) if t is not None])
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10)
    report = assert_compiled(compiled)
    assert "aten.convolution.default" not in report.torch_call_ops(), report.text()
    if groups == 1 or c == groups:
        assert "aten.convolution_backward.default" not in report.torch_call_ops(), report.text()


def test_conv2d_with_one_value_for_both_dims():
    """padding="valid" reaches the graph as [0]: one value for both spatial dims."""
    x, w = torch.randn(2, 3, 9, 8), torch.randn(4, 3, 3, 3)

    def fn(x, w):
        return F.conv2d(x, w, padding="valid") + 1

    compiled = ember.compile(fn)
    torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-4, atol=1e-4)
    assert "aten.convolution.default" not in assert_compiled(compiled).torch_call_ops()


def test_strided_windows_with_dynamic_sizes_compile_per_size():
    """A stride-2 window's output size is a floor division of the input's, which ember dims cannot
    hold: the graph is compiled for each set of sizes instead of running on PyTorch."""
    wt = torch.randn(4, 3, 3, 3)

    def fn(x):
        return F.max_pool2d(F.conv2d(x, wt, stride=2, padding=1).relu(), 3, 2, 1).sum((2, 3))

    compiled = ember.compile(fn, dynamic=True, options={"strict": True})
    for size in (9, 16, 23, 16):
        x = torch.randn(2, 3, size, size + 1)
        torch.testing.assert_close(compiled(x), fn(x), rtol=1e-4, atol=1e-4)
    report = assert_compiled(compiled)
    assert report.graph_count == 1, report.text()


# (left shape, right shape, right transposed in memory, bias)
MATMULS = {
    "square": ((64, 64), (64, 64), False, False),
    "skinny rows": ((3, 300), (300, 257), False, False),
    "skinny columns": ((257, 300), (300, 3), False, False),
    "one row": ((1, 1000), (1000, 130), True, True),
    "transposed right (x @ w.t())": ((37, 129), (129, 65), True, True),
    "long inner dim": ((8, 5000), (5000, 8), False, True),
    "rows split over threads": ((300, 200), (200, 300), False, True),
    "batched, broadcast left": ((5, 1, 17, 33), (4, 33, 9), False, False),
    "batched, transposed right": ((6, 17, 33), (6, 33, 19), True, False),
    "empty inner dim": ((4, 0), (0, 5), False, True),
}


@pytest.mark.parametrize("name", list(MATMULS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matmul_matches_pytorch(name, dtype):
    sa, sb, transposed, bias = MATMULS[name]
    a = torch.randn(*sa, dtype=dtype)
    b = torch.randn(*sb[:-2], sb[-1], sb[-2], dtype=dtype).transpose(-1, -2) if transposed else torch.randn(*sb, dtype=dtype)
    c = torch.randn(sb[-1], dtype=dtype)

    def fn(a, b, c):
        return (a @ b + c) if bias else a @ b

    compiled = ember.compile(fn)
    tol = 2e-4 if dtype == torch.float32 else 1e-10
    expected = fn(a.double(), b.double(), c.double()).to(dtype)
    torch.testing.assert_close(compiled(a, b, c), expected, rtol=tol, atol=tol * (sa[-1] ** 0.5))
    assert_compiled(compiled)


def test_linear_and_addmm_accumulate_onto_the_bias():
    x, w, b = torch.randn(50, 70), torch.randn(90, 70), torch.randn(90)

    def fn(x, w, b):
        return F.linear(x, w, b), torch.addmm(b, x, w.t(), beta=1.0), F.linear(x, w)

    for got, want in zip(ember.compile(fn)(x, w, b), fn(x, w, b)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (3, 2, 1, 1, False), (2, 2, 0, 1, False), (3, 2, 1, 1, True), (3, 1, 1, 2, False), ((3, 2), (2, 1), (1, 0), 1, True),
])
def test_max_pool_in_inference_is_lowered(kernel, stride, padding, dilation, ceil_mode):
    x = torch.randn(2, 3, 11, 10)
    x[0, 0, 0, 0] = float("nan")
    x[1, 2, 3:6, 3:6] = float("-inf")

    def fn(x):
        return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode=ceil_mode)

    compiled = ember.compile(fn)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), fn(x), equal_nan=True)
    report = assert_compiled(compiled)
    assert "aten.max_pool2d_with_indices.default" not in report.torch_call_ops(), report.text()


@pytest.mark.parametrize("pool", [F.avg_pool2d, F.max_pool2d])
@pytest.mark.parametrize("shape,kernel,stride", [((2, 5, 1, 1), 7, None), ((1, 2, 2, 3), 4, 3)])
def test_pool_window_larger_than_the_input_in_ceil_mode(pool, shape, kernel, stride):
    """EfficientNet's head: AvgPool2d(1280, ceil_mode=True) over a 1x1 map. The one window
    starts inside the input, so PyTorch allows it."""
    x = torch.randn(*shape)

    def fn(x):
        return pool(x, kernel, stride, ceil_mode=True) * 2

    compiled = ember.compile(fn)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), fn(x))
    report = assert_compiled(compiled)
    assert not report.torch_call_ops(), report.text()


def test_max_pool_in_training_keeps_its_indices_for_the_backward():
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()

    def fn(x):
        return (F.max_pool2d(x, 3, 2, 1) * 2).sum()

    ember.compile(fn)(x).backward()
    fn(x_eager).backward()
    torch.testing.assert_close(x.grad, x_eager.grad)


def test_more_sizes_than_the_library_keeps_primitives_for():
    """oneDNN primitives are kept per geometry, at most 256 of each kind: a dynamic batch across
    300 sizes makes the cache start over while results stay right."""
    w = torch.randn(4, 3, 3, 3)

    def fn(x, y):
        return F.conv2d(x, w, padding=1), x.flatten(1) @ y

    compiled = ember.compile(fn, dynamic=True)
    y = torch.randn(48, 5)
    for n in range(1, 301):
        x = torch.randn(n, 3, 4, 4)
        for got, want in zip(compiled(x, y), fn(x, y)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    # Dynamo's own graphs: size 1 specialised, and sizes equal to another dim (3, 4) duck-sized;
    # never one per size.
    assert report_of(compiled).graph_count <= 3


def test_library_calls_from_16_threads_at_once():
    """Convolution, GEMM and attention from 16 threads with changing batch sizes: the shared
    primitive caches, per-call scratchpads and per-thread streams keep each call its own."""
    import threading

    w = torch.randn(8, 3, 3, 3)

    def fn(x, y):
        z = y[None, :, :16]
        return (F.conv2d(x, w, padding=1).relu(), x.flatten(1) @ y,
                F.scaled_dot_product_attention(z, z, z, is_causal=True))

    compiled = ember.compile(fn, dynamic=True)
    compiled(torch.randn(2, 3, 8, 8), torch.randn(192, 130))  # compile once, before the threads
    errors = []

    def work(seed):
        g = torch.Generator().manual_seed(seed)
        try:
            for i in range(10):
                x = torch.randn(1 + (seed + i) % 5, 3, 8, 8, generator=g)
                y = torch.randn(192, 130, generator=g)
                for got, want in zip(compiled(x, y), fn(x, y)):
                    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_gemm_and_kernels():
    # libgomp's threads do not exist in a forked child: ember's loops and oneDNN's run there on
    # one thread, and a child that waited for them would hang.
    f = ember.compile(lambda a, b: torch.nn.functional.gelu(a @ b) + 1)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    expected = f(a, b)
    pid = os.fork()
    if pid == 0:
        ok = torch.allclose(f(a, b), expected, atol=1e-4)
        os._exit(0 if ok else 3)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung")


def test_ember_leaves_torch_thread_count_alone():
    # In a Python process, PyTorch's libgomp is the one oneDNN and ember run on, and
    # torch.set_num_threads is that library's per-thread setting.
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = torch.randn(256, 256)
        q = torch.randn(1, 2, 300, 16)
        ember.compile(lambda a, b: (a @ b).relu())(a, a)
        ember.compile(lambda q: F.scaled_dot_product_attention(q, q, q))(q)
        ember.compile(lambda x, w: F.conv2d(x, w))(torch.randn(1, 3, 16, 16), torch.randn(4, 3, 3, 3))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
