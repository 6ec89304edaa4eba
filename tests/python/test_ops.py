"""Functions over tensors through ember.compile against eager: lowered ATen ops, torch calls for
the rest, dtypes, views, dynamic sizes. Each case must have compiled (no fallback)."""
import pytest
import torch
import torch.nn.functional as F

import ember
from conftest import MODES, assert_compiled, report_of

torch.manual_seed(0)

CASES = {
    "elementwise chain": (lambda x: torch.tanh(torch.exp(x * 0.5) - 1).clamp(-0.5, 0.7) + x.abs().sqrt(),
                          [(8, 33)]),
    "broadcast and where": (lambda x, y: torch.where(x > y, x - y, torch.sigmoid(y) * 3), [(4, 1, 5), (3, 1)]),
    "gelu tanh and erf": (lambda x: F.gelu(x, approximate="tanh") + F.gelu(x) + F.silu(x), [(16, 16)]),
    "softmax and log_softmax": (lambda x: F.softmax(x, -1) + F.log_softmax(x, 0), [(6, 10)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (12,), w, b, 1e-5), [(5, 12), (12,), (12,)]),
    "layer_norm without affine": (lambda x: F.layer_norm(x, (3, 12)), [(2, 3, 12)]),
    "reductions": (lambda x: torch.cat([x.sum(1), x.mean(1), x.amax(1), x.amin(1), x.var(1), x.std(1, correction=0)]),
                   [(7, 9)]),
    "products": (lambda x: torch.cat([x.prod(1), x.prod().reshape(1), (x > 0).prod(0).float()]), [(5, 6)]),
    "matmul and addmm": (lambda x, w, b: torch.addmm(b, x, w) + x @ w, [(5, 6), (6, 7), (7,)]),
    "bmm": (lambda a, b: torch.bmm(a, b).relu(), [(3, 4, 5), (3, 5, 2)]),
    "views": (lambda x: x.permute(2, 0, 1).reshape(6, -1).t().unsqueeze(0).expand(2, -1, -1)[:, 1:5:2] * 2,
              [(3, 4, 2)]),
    "select and squeeze": (lambda x: x[1] + x[:, 0:1].squeeze(1) + x[-1], [(4, 4)]),
    "conv, batch norm (eval), pools": (None, None),
    "embedding": (None, None),
    "cumsum beside a torch call (unstable sort)": (lambda x: torch.cumsum(x, 1) + torch.sort(x, 1)[0], [(4, 8)]),
    "integer arithmetic": (None, None),
    "casts": (lambda x: (x * 100).to(torch.int32).to(torch.float16).float() + (x > 0).float(), [(9,)]),
}


def conv_block(x, w, mean, var):
    y = F.conv2d(x, w, padding=1, stride=1)
    y = F.batch_norm(y, mean, var, training=False)
    return F.avg_pool2d(F.relu(y), 2) + F.adaptive_avg_pool2d(y, 1)


def embed(idx, table):
    return F.embedding(idx, table).sum(1)


def integers(a, b):
    return (a * 3 - b) // 2 + (a % 5) + (a & b) + (a > b).long()


def inputs_for(name):
    if name == "conv, batch norm (eval), pools":
        return conv_block, [torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4), torch.rand(4) + 0.5]
    if name == "embedding":
        return embed, [torch.randint(0, 10, (3, 5)), torch.randn(10, 6)]
    if name == "integer arithmetic":
        return integers, [torch.randint(-50, 50, (6, 7)), torch.randint(1, 50, (6, 7))]
    fn, shapes = CASES[name]
    return fn, [torch.randn(*s) for s in shapes]


@pytest.mark.parametrize("name", list(CASES))
def test_case_matches_eager(name):
    fn, args = inputs_for(name)
    compiled = ember.compile(fn)
    expected = fn(*args)
    actual = compiled(*args)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.is_floating_point():
        torch.testing.assert_close(actual, expected, rtol=1.3e-5 * 10, atol=1.5e-5 * 10)
    else:
        assert torch.equal(actual, expected)
    report = assert_compiled(compiled)
    if name.startswith("torch call"):
        assert "aten.cumsum.default" in report.torch_call_ops()


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_runs_generated_kernels(mode):
    fn = lambda x, y: torch.relu(x * y + 1) - 0.5  # noqa: E731
    compiled = ember.compile(fn, mode=mode)
    for n in (4, 4, 4):  # reduce-overhead: steady state reuses its buffers
        x, y = torch.randn(n, 64), torch.randn(64)
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    graph = report_of(compiled).graphs[0]
    assert graph.ember["kernels"] >= 1


def test_dynamic_sizes_compile_once():
    fn = lambda x: (F.softmax(x, -1) * x.shape[0]).sum(0)  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    for n in (3, 7, 12, 40):
        x = torch.randn(n, 5)
        torch.testing.assert_close(compiled(x), fn(x))
    assert report_of(compiled).graph_count == 1


def test_automatic_dynamic_after_a_size_change():
    fn = lambda x: x.view(x.shape[0], -1).sum(1) + 1  # noqa: E731
    compiled = ember.compile(fn)
    for n in (2, 3, 4, 5, 6):
        x = torch.randn(n, 2, 3)
        torch.testing.assert_close(compiled(x), fn(x))
    assert report_of(compiled).graph_count == 2  # static, then one with a symbolic batch


def test_non_contiguous_and_offset_inputs():
    base = torch.randn(10, 12)
    x = base.t()[2:9:2]  # strided, with a storage offset
    fn = lambda x: x * 2 + 1  # noqa: E731
    torch.testing.assert_close(ember.compile(fn)(x), fn(x))


def test_outputs_never_alias_inputs_unless_eager_does():
    # clone() must be fresh memory: a caller mutating it must not change the input.
    x = torch.randn(4)
    y = ember.compile(lambda t: t.clone())(x)
    y.add_(1)
    assert not torch.equal(x, y)
    # A view is a view in eager: it shares memory there and here.
    v = ember.compile(lambda t: t.view(2, 2))(x)
    assert v.data_ptr() == x.data_ptr()


def test_input_mutation_is_applied_as_in_eager():
    def f(x, buf):
        buf.add_(1)
        return x * buf

    x, buf = torch.randn(5), torch.zeros(5)
    out = ember.compile(f)(x, buf)
    torch.testing.assert_close(out, x)
    torch.testing.assert_close(buf, torch.ones(5))


def test_float16_and_bfloat16():
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(64, dtype=dtype)
        fn = lambda t: torch.exp(t) * 0.5 + t  # noqa: E731
        torch.testing.assert_close(ember.compile(fn)(x), fn(x), rtol=2e-3, atol=2e-3)
        torch._dynamo.reset()


def test_mean_with_a_dtype_accumulates_the_input_as_pytorch_does():
    # float32 70000 cast to float16 first would be inf, and the mean NaN.
    x = torch.tensor([[70000.0, -70000.0, 1.0]])
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        fn = lambda t: t.mean(1, dtype=dtype)  # noqa: E731
        torch.testing.assert_close(ember.compile(fn)(x), fn(x))
        torch._dynamo.reset()
    h = torch.randn(5, 7, dtype=torch.float16)
    fn = lambda t: t.mean(0, dtype=torch.bfloat16)  # noqa: E731
    torch.testing.assert_close(ember.compile(fn)(h), fn(h))


def test_empty_and_zero_dim():
    fn = lambda x, s: x * s + 1  # noqa: E731
    compiled = ember.compile(fn)
    torch.testing.assert_close(compiled(torch.randn(0, 3), torch.tensor(2.0)), torch.randn(0, 3))
    torch.testing.assert_close(compiled(torch.randn(2, 3), torch.tensor(2.0)).shape, torch.Size([2, 3]))


def test_equal_outputs_that_cse_merges_are_distinct_tensors():
    a, b = ember.compile(lambda x: (x + 1, x + 1))(torch.zeros(3))
    a.add_(5)
    assert torch.equal(b, torch.ones(3))


def test_returned_input_and_its_view_keep_eager_aliasing():
    x = torch.zeros(4)
    y, v = ember.compile(lambda t: (t, t.view(2, 2)))(x)
    assert y.data_ptr() == x.data_ptr() and v.data_ptr() == x.data_ptr()


def test_storage_dependent_ops_leave_the_graph_to_pytorch():
    base = torch.arange(10.0)
    fn = lambda x: torch.as_strided(x, (2, 2), (1, 2), 1) * 2  # noqa: E731
    compiled = ember.compile(fn)
    with pytest.warns(RuntimeWarning, match="storage"):
        out = compiled(base[1:])
    assert torch.equal(out, fn(base[1:]))


def test_cat_skips_legacy_empty_tensors_and_returns_fresh_memory():
    """PyTorch's cat skips 1-D empty tensors beside others (a key-value cache starts so); a cat
    left with one tensor is still a new tensor, never the input itself."""
    def fn(empty, x, v):
        return torch.cat([empty, x], dim=-2), torch.cat([x, empty, x], dim=1) * 2, torch.cat([empty, v])

    empty, x, v = torch.tensor([]), torch.randn(1, 4, 5, 8), torch.randn(3)
    compiled = ember.compile(fn)
    got = compiled(empty, x, v)
    for g, w in zip(got, fn(empty, x, v)):
        assert torch.equal(g, w)
    assert got[0].data_ptr() != x.data_ptr() and got[2].data_ptr() != v.data_ptr()
    x_before = x.clone()
    got[0].add_(1)
    assert torch.equal(x, x_before)
    report = assert_compiled(compiled)
    assert "aten.cat.default" not in report.torch_call_ops(), report.text()


def test_training_reductions_run_on_generated_kernels():
    """A training step's reductions over the batch (bias gradients, batch norm's statistics and
    their gradients, a mean over a middle dim) are row and column kernels, not interpreter
    steps, and the gradients match eager's."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 5))
    reference = type(model)(*[m for m in __import__("copy").deepcopy(model)])
    compiled = ember.compile(model)
    x = torch.randn(4, 3, 6, 6)
    for m in (reference, compiled):
        (m(x).pow(2).mean() + m(x).mean(1).sum()).backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)
    report = report_of(compiled)
    assert {g.kind for g in report.graphs} == {"forward", "backward"}
    for graph in report.graphs:
        assert graph.fallback is None
        leftover = [op for op in graph.ember["interpreter_ops"] if op in ("sum", "mean", "var_mean", "native_batch_norm")]
        assert not leftover, (graph.kind, graph.ember["interpreter_ops"])
        assert graph.ember["kernels"] >= 3


def test_values_saved_for_backward_keep_embers_layout(monkeypatch):
    """In training, a forward graph's outputs past the model's own are saved for the backward
    graph, which reads them through any strides: they are not copied into eager's layout (an
    elided .contiguous() stays a view), while the model's outputs still are, and gradients match."""
    from ember import _translate
    rebuilt = []
    original = _translate.as_eager

    def counting(tensors, group, *args):
        before = [tensors[k] for k in group]
        original(tensors, group, *args)
        rebuilt.extend(k for k, t in zip(group, before) if tensors[k] is not t)

    monkeypatch.setattr(_translate, "as_eager", counting)  # the name CompiledFx calls

    def fn(x, w):
        z = (x @ w).t().contiguous()  # ember elides the copy: z is a transposed view
        return z.sin(), (z * 2).t().contiguous()  # sin saves z; the second output is the model's

    compiled = ember.compile(fn)
    x, w = torch.randn(6, 5, requires_grad=True), torch.randn(5, 7, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    for _ in range(2):
        rebuilt.clear()
        got, want = compiled(x, w), fn(x2, w2)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
            assert g.is_contiguous()  # the model's outputs keep eager's layout
        sum(o.sum() for o in got).backward()
        sum(o.sum() for o in want).backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(w.grad, w2.grad)
    graphs = report_of(compiled).graphs
    assert {g.kind for g in graphs} == {"forward", "backward"}
    forward_outputs = 2
    assert all(k < forward_outputs for k in rebuilt), rebuilt  # no saved value was copied


def test_a_graph_that_falls_back_gets_inputs_in_the_layout_it_was_traced_with():
    """A backward graph that runs on PyTorch (its compile failed) gets its saved values from
    ember's forward, which may lay them out otherwise (an elided .contiguous() is a strided
    view); PyTorch's `view` would refuse those, so the fallback restrides them first."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from ember.dynamo import eager_fallback
    gm = make_fx(lambda z: (z.view(-1) * 2,))(torch.randn(3, 4))
    strided = torch.randn(4, 3).t()  # what ember's forward may hand over for a contiguous value
    with pytest.raises(RuntimeError):
        gm(strided)  # PyTorch alone refuses it
    out = eager_fallback(gm)([strided])
    torch.testing.assert_close(out[0], strided.reshape(-1) * 2)


@pytest.mark.parametrize("x, fn", [
    (torch.tensor(2.5), lambda x: x * 0.1 + 1.5),              # a loss scaled and shifted
    (torch.tensor(2.5, dtype=torch.float64), lambda x: x / 3.0 - 1e-300),
    (torch.tensor(7, dtype=torch.int32), lambda x: x * 3 + 1),
    (torch.tensor(200, dtype=torch.uint8), lambda x: x + 100),  # wraps in uint8, as eager's
    (torch.tensor(7, dtype=torch.int32), lambda x: x * 0.5),   # a float number turns it float32
    (torch.tensor(True), lambda x: x + 1),                      # an int number turns it int64
], ids=["f32", "f64", "i32", "u8 wraps", "i32 * float", "bool + int"])
def test_zero_dim_tensor_with_a_python_number_keeps_its_dtype_and_is_lowered(x, fn):
    # ember's constants are 0-d tensors; beside a 0-d tensor a number must not widen it (0-d
    # float32 * 0.1 was float64, so the op ran as a torch call).
    compiled = ember.compile(fn)
    actual, expected = compiled(x), fn(x)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)
    report = report_of(compiled)
    assert not any(g.torch_calls for g in report.graphs), report.text()


def test_cross_entropy_with_label_smoothing_lowers_forward_and_backward():
    x = torch.randn(8, 10, requires_grad=True)
    t = torch.randint(0, 10, (8,))
    fn = lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1)  # noqa: E731
    compiled = ember.compile(fn)
    actual = compiled(x, t)
    (grad,) = torch.autograd.grad(actual, x)
    expected = fn(x, t)
    (want,) = torch.autograd.grad(expected, x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(grad, want)
    report = report_of(compiled)
    assert len(report.graphs) == 2 and not any(g.torch_calls for g in report.graphs), report.text()


def test_div_with_truncation_lowers_for_floats_and_stays_a_torch_call_for_integers():
    a = torch.tensor([7.5, -7.5, 0.0, -0.0, 1e30, float("inf"), float("nan"), 5.0])
    b = torch.tensor([2.0, 2.0, -3.0, 3.0, 1e-10, 2.0, 1.0, 0.0])
    fn = lambda a, b: torch.div(a, b, rounding_mode="trunc")  # noqa: E731
    for x, y in [(a, b), (a.double(), b.double()), (a, 2.0)]:
        torch._dynamo.reset()
        compiled = ember.compile(fn)
        actual, expected = compiled(x, y), fn(x, y)
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, equal_nan=True)
        assert torch.equal(actual.signbit(), expected.signbit())  # -0.0 kept
        assert not any(g.torch_calls for g in report_of(compiled).graphs), report_of(compiled).text()
    torch._dynamo.reset()
    i = torch.tensor([7, -7, 9, -9], dtype=torch.int32)
    compiled = ember.compile(fn)
    assert torch.equal(compiled(i, torch.tensor([2, 2, -4, 4], dtype=torch.int32)), fn(i, torch.tensor([2, 2, -4, 4], dtype=torch.int32)))


@pytest.mark.parametrize("make", [lambda: torch.nn.InstanceNorm2d(6, affine=True),
                                  lambda: torch.nn.InstanceNorm1d(6),
                                  lambda: torch.nn.BatchNorm2d(6, track_running_stats=False)],
                         ids=["instance norm 2d, affine", "instance norm 1d", "batch norm without running stats"])
def test_norms_over_the_batchs_own_statistics_lower_forward_and_backward(make):
    torch.manual_seed(3)
    module = make()
    x = (torch.randn(4, 6, 5, 7) if "2d" in type(module).__name__ else torch.randn(4, 6, 9)) * 3 + 1
    x.requires_grad_(True)
    compiled = ember.compile(make_copy(module))
    actual, expected = compiled(x), module(x)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    g = torch.randn_like(expected)
    torch.testing.assert_close(torch.autograd.grad(actual, x, g)[0], torch.autograd.grad(expected, x, g)[0],
                               rtol=1e-4, atol=1e-5)
    report = report_of(compiled)
    assert len(report.graphs) == 2 and not any(g.torch_calls for g in report.graphs), report.text()


def make_copy(module):
    import copy
    return copy.deepcopy(module)
