"""The ATen ops lowered through compositions of ember ops (_lower_composite.py): slice
assignment (slice_scatter, copy), repeat, flip, pow of a number, vector norms, leaky_relu and
the ELUs, group norm. Each case is compared with eager on inputs chosen to break the
composition (negative and out-of-range bounds, steps, empty slices, NaN and -0.0, 16-bit
dtypes, symbolic sizes), and must have run as ember ops, not as torch calls."""
import pytest
import torch
import torch.nn.functional as F

import ember
from conftest import report_of

F32 = dict(rtol=5e-5, atol=5e-5)


def compiled_matches(fn, *args, lowered=(), dynamic=None, tol=None):
    """ember.compile(fn) equals eager on clones of args, inputs' mutations included, and each
    ATen op named in `lowered` ran as ember ops."""
    eager_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    ember_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    expected = fn(*eager_args)
    compiled = ember.compile(fn, dynamic=dynamic)
    actual = compiled(*ember_args)
    _assert_same(actual, expected, tol)
    _assert_same(ember_args, eager_args, tol)
    report = report_of(compiled)
    assert report.graphs and not any(g.fallback for g in report.graphs), report.text()
    calls = {op for g in report.graphs for op in (g.torch_calls or {})}
    for op in lowered:
        assert op not in calls, f"{op} ran as a torch call:\n{report.text()}"
    return compiled


def _assert_same(actual, expected, tol):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e, tol)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual, expected)
    if expected.is_floating_point():
        assert torch.equal(actual.isnan(), expected.isnan()), f"NaN mismatch:\n{actual}\nvs eager\n{expected}"
        torch.testing.assert_close(actual, expected, equal_nan=True, **(tol or F32))
    else:
        assert torch.equal(actual, expected), f"{actual}\nvs eager\n{expected}"


SLICES = [(1, 3, 1), (-3, None, 1), (None, -1, 1), (2, 100, 1), (0, 0, 1), (-100, 2, 1), (None, None, 2),
          (1, None, 3), (-5, -1, 2), (4, 2, 1)]


@pytest.mark.parametrize("start,end,step", SLICES, ids=[str(s) for s in SLICES])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_assigning_into_a_slice_of_a_clone(start, end, step, dim):
    def fn(x, v):
        y = x.clone()
        index = [slice(None)] * 2
        index[dim] = slice(start, end, step)
        y[tuple(index)] = v
        return y

    x = torch.randn(6, 7)
    index = [slice(None)] * 2
    index[dim] = slice(start, end, step)
    target = x[tuple(index)]
    v = torch.randn(target.shape)
    compiled_matches(fn, x, v, lowered=["aten.slice_scatter.default", "aten.copy.default"])


def test_assigning_into_an_input_mutates_it_as_eager():
    def fn(x, v):
        x[:, 1:3] = v
        x[0, ::2] = 7.0
        return x.sum()

    compiled_matches(fn, torch.randn(4, 6), torch.randn(2), lowered=["aten.slice_scatter.default"])


def test_copy_casts_and_broadcasts():
    def fn(x, y, b):
        return x.clone().copy_(y), torch.zeros(3, 5, dtype=torch.int32).copy_(x * 10), x.clone().copy_(b)

    x = torch.randn(3, 5)
    x[0, 0] = -0.0
    compiled_matches(fn, x, torch.randn(5), torch.rand(3, 1) > 0.5, lowered=["aten.copy.default"])


def test_assignment_with_a_symbolic_dim():
    def fn(x, v):
        y = x * 2
        y[:, 2:] = v
        return y

    compiled = None
    for n in (7, 9, 12):
        compiled = compiled_matches(fn, torch.randn(3, n), torch.randn(3, n - 2), dynamic=True)
    assert report_of(compiled).graph_count == 1


@pytest.mark.parametrize("shape,repeats", [((4, 5), (2, 3)), ((4, 5), (2, 1, 3)), ((3,), (0, 2)), ((), (3, 2)),
                                           ((2, 1, 3), (1, 4, 1))])
def test_repeat_and_tile(shape, repeats):
    x = torch.randn(shape)
    compiled_matches(lambda t: t.repeat(*repeats), x, lowered=["aten.repeat.default"])
    compiled_matches(lambda t: t.tile(repeats), x)


def test_repeat_of_integers_and_a_symbolic_dim():
    """ember's symbolic dims are texts: 3 * "s0" made "s0s0s0", and repeat fell back to a torch
    call under dynamic sizes."""
    fn = lambda t: t.repeat(2, 3) + 1  # noqa: E731
    compiled = None
    for n in (5, 8, 11):
        compiled = compiled_matches(fn, torch.randint(-9, 9, (4, n)), dynamic=True, lowered=["aten.repeat.default"])
    assert report_of(compiled).graph_count == 1


@pytest.mark.parametrize("dims", [(0,), (1,), (-1, 0), (0, 1, 2)])
def test_flip(dims):
    compiled_matches(lambda t: t.flip(dims) * 2, torch.randn(3, 4, 5), lowered=["aten.flip.default"])
    compiled_matches(lambda t: t.flip(dims), torch.randint(0, 100, (3, 1, 5)))


def test_flip_keeps_an_input_apart():
    """A flip of a dim of size 1 is the input itself in ember: eager's result is new memory."""
    x = torch.randn(1, 4)
    before = x.clone()
    out = ember.compile(lambda t: t.flip(0))(x)
    out.add_(1)
    assert torch.equal(x, before)


@pytest.mark.parametrize("base", [2.0, 0.5, -2.0, 0.0, 1.0, 10, 2.5])
def test_pow_of_a_number(base):
    x = torch.tensor([-3.0, -1.5, -0.0, 0.0, 0.5, 2.0, 3.0, float("nan"), float("inf"), -float("inf")])
    compiled_matches(lambda t: base ** t, x, lowered=["aten.pow.Scalar"], tol=dict(rtol=1e-5, atol=1e-6))


def test_pow_of_a_number_over_integers():
    e = torch.arange(-3, 6)
    compiled_matches(lambda t: 2.5 ** t, e, lowered=["aten.pow.Scalar"])
    compiled_matches(lambda t: 2 ** t, torch.arange(0, 10))  # integers: stays a torch call, still right


@pytest.mark.parametrize("ord", [2, 1, 0, float("inf"), -float("inf"), 3, 0.5, -1])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_vector_norm(ord, dim, keepdim):
    x = torch.randn(3, 4, 5)
    x[0, 0, :2] = 0.0
    fn = lambda t: torch.linalg.vector_norm(t, ord=ord, dim=dim, keepdim=keepdim)  # noqa: E731
    compiled_matches(fn, x, lowered=["aten.linalg_vector_norm.default"], tol=dict(rtol=1e-4, atol=1e-5))


def test_vector_norm_dtypes():
    x = torch.randn(6, 40) * 300
    compiled_matches(lambda t: torch.linalg.vector_norm(t, dim=1, dtype=torch.float64), x,
                     lowered=["aten.linalg_vector_norm.default"])
    for low in (torch.float16, torch.bfloat16):  # squares past float16's range: eager sums in float32
        compiled_matches(lambda t: torch.linalg.vector_norm(t, dim=1), x.to(low), tol=dict(rtol=1e-2, atol=1e-2),
                         lowered=["aten.linalg_vector_norm.default"])


def test_infinity_norm_of_an_empty_dim_raises_as_eager():
    fn = lambda t: torch.linalg.vector_norm(t, ord=float("inf"), dim=1)  # noqa: E731
    x = torch.randn(3, 0)
    with pytest.raises(Exception) as eager:
        fn(x)
    with pytest.raises(type(eager.value)):
        ember.compile(fn)(x)


def test_normalize_and_cosine_similarity_train():
    w = torch.randn(6, 8, requires_grad=True)

    def fn(x, y):
        return (F.normalize(x @ w, dim=-1) * 3).sum() + F.cosine_similarity(x, y).sum()

    x, y = torch.randn(5, 6), torch.randn(5, 6)
    expected = fn(x, y)
    expected.backward()
    want = w.grad.clone()
    w.grad = None
    compiled = ember.compile(fn)
    actual = compiled(x, y)
    actual.backward()
    torch.testing.assert_close(actual, expected, **F32)
    torch.testing.assert_close(w.grad, want, **F32)
    calls = {op for g in report_of(compiled).graphs for op in (g.torch_calls or {})}
    assert "aten.linalg_vector_norm.default" not in calls


def test_leaky_relu_and_the_elus():
    x = torch.tensor([-5.0, -1.0, -1e-30, -0.0, 0.0, 1e-30, 0.5, 3.0, float("nan"), -float("inf"), float("inf")])

    def fn(t):
        return (F.leaky_relu(t), F.leaky_relu(t, 0.2), F.elu(t), F.elu(t, 0.5), F.selu(t), F.celu(t, 2.0))

    compiled_matches(fn, x, lowered=["aten.leaky_relu.default", "aten.elu.default"])
    compiled_matches(fn, x.to(torch.bfloat16), tol=dict(rtol=1e-2, atol=1e-2))
    compiled_matches(lambda t: F.leaky_relu(t).signbit(), x)  # -0.0 stays -0.0


@pytest.mark.parametrize("groups,affine", [(2, True), (1, False), (6, True), (3, False)])
@pytest.mark.parametrize("shape", [(2, 6, 4, 5), (3, 6, 7), (4, 6)])
def test_group_norm(groups, affine, shape):
    if len(shape) == 2 and groups == 6:
        pytest.skip("one value per group: eager raises, torch.compile does not (Dynamo drops the check), nor ember")
    torch.manual_seed(0)
    norm = torch.nn.GroupNorm(groups, 6, affine=affine)
    if affine:
        torch.nn.init.normal_(norm.weight)
        torch.nn.init.normal_(norm.bias)
    x = torch.randn(shape) * 3 + 1
    with torch.no_grad():
        compiled_matches(norm, x, lowered=["aten.native_group_norm.default"], tol=dict(rtol=1e-4, atol=1e-4))


def test_group_norm_trains_and_in_float64_and_bfloat16():
    torch.manual_seed(0)
    norm = torch.nn.GroupNorm(2, 4)
    x = torch.randn(3, 4, 5, requires_grad=True)
    expected = (norm(x) ** 2).sum()
    expected.backward()
    want_x, want_w = x.grad.clone(), norm.weight.grad.clone()
    x.grad, norm.weight.grad, norm.bias.grad = None, None, None
    compiled = ember.compile(norm)
    actual = (compiled(x) ** 2).sum()
    actual.backward()
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x.grad, want_x, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(norm.weight.grad, want_w, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        compiled_matches(torch.nn.GroupNorm(2, 4).double(), torch.randn(3, 4, 5, dtype=torch.float64))
        compiled_matches(torch.nn.GroupNorm(2, 4).bfloat16(), torch.randn(3, 4, 5).bfloat16(),
                         tol=dict(rtol=2e-2, atol=2e-2))



@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_keeps_ties_in_order_and_nan_last(descending):
    x = torch.tensor([[3.0, -0.0, 1.0, float("nan"), 0.0, 1.0, -float("inf"), 3.0, float("nan"), -2.0]] * 2)
    compiled_matches(lambda t: torch.sort(t, descending=descending, stable=True), x, lowered=["aten.sort.stable"])
    compiled_matches(lambda t: torch.sort(t, dim=0, descending=descending, stable=True), x.t().contiguous(),
                     lowered=["aten.sort.stable"])
    ints = torch.randint(-3, 3, (4, 50))
    compiled_matches(lambda t: t.sort(dim=1, descending=descending, stable=True)[1] + t.argsort(dim=1, stable=True), ints,
                     lowered=["aten.sort.stable"])
    compiled_matches(lambda t: t.sort(1, descending)[1], ints)  # unstable: PyTorch's own order of ties


def test_fmod_and_roll_of_integers():
    x = torch.arange(-12, 13)
    compiled_matches(lambda t: (torch.fmod(t, 5), torch.fmod(t, -5), t.roll(3), t.roll(-30)), x,
                     lowered=["aten.fmod.Scalar"])
    compiled_matches(lambda t: t.roll(2, 1), torch.randn(3, 7))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool, torch.uint8,
                                   torch.bfloat16])
def test_cumsum(dtype):
    x = (torch.randn(5, 37) * 50).to(dtype)
    compiled_matches(lambda t: (t.cumsum(1), t.cumsum(0), t.cumsum(-1, dtype=torch.float64)), x,
                     lowered=["aten.cumsum.default"], tol=dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else None)


def test_cumsum_of_position_ids_with_a_symbolic_length():
    """RoBERTa's position ids: a running count of the non-padding tokens."""
    def positions(ids):
        mask = ids.ne(1).int()
        return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + 1

    compiled = None
    for n in (7, 12, 30):
        ids = torch.randint(0, 5, (2, n))
        compiled = compiled_matches(positions, ids, dynamic=True, lowered=["aten.cumsum.default"])
    assert report_of(compiled).graph_count == 1


def test_cumsum_of_float32_accumulates_as_eager():
    """Eager's CPU cumsum of float32 sums in double and rounds each running sum once."""
    x = torch.full((1, 100000), 0.1)
    x[0, ::7] = 1e4
    compiled_matches(lambda t: t.cumsum(1), x, tol=dict(rtol=0, atol=0))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("scale", [2, 3, 0.5])
def test_nearest_upsampling_indexes_by_an_outer_product(mode, scale):
    x = torch.randn(2, 3, 6, 5)
    compiled_matches(lambda t: F.interpolate(t, scale_factor=scale, mode=mode) * 2, x, lowered=["aten.index.Tensor"])


def test_several_index_tensors():
    x = torch.randn(4, 6, 5)
    rows, cols = torch.tensor([[0], [3], [-1]]), torch.tensor([4, 0, -2, 1])
    compiled_matches(lambda t, r, c: t[:, r, c] + 1, x, rows, cols, lowered=["aten.index.Tensor"])
    compiled_matches(lambda t, r, c: t[r, c], x, rows, cols, lowered=["aten.index.Tensor"])
    # Not an outer product (both vary along one dim), and indices at dims apart: torch calls, still right.
    compiled_matches(lambda t, r, c: t[:, r, c], x, torch.tensor([0, 1, 2]), torch.tensor([3, 4, 0]))
    compiled_matches(lambda t, r, c: t[r, :, c], x, torch.tensor([0, 1]), torch.tensor([3, 4]))


def test_several_index_tensors_out_of_range_raise_as_eager():
    x = torch.randn(4, 6, 5)
    rows, cols = torch.tensor([[0], [3]]), torch.tensor([5, 0])  # 5 is past dim 2 (size 5)
    fn = lambda t, r, c: t[:, r, c] + 1  # noqa: E731
    with pytest.raises(IndexError):
        fn(x, rows, cols)
    with pytest.raises(IndexError):
        ember.compile(fn)(x, rows, cols)


def test_training_through_slice_assignment_and_group_norm_has_no_torch_call():
    """Their backward graphs: new_empty_strided (a buffer the gradient's slices are scattered
    into) and true_divide (group norm's) were torch calls."""
    def fn(x, v):
        y = x * 2
        y[:, 1:3] = v
        y[:, ::2] = y[:, ::2] * 3
        return F.group_norm(y.reshape(2, 4, -1), 2).sum()

    x, v = torch.randn(4, 6, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    expected = fn(x, v)
    want = torch.autograd.grad(expected, (x, v))
    compiled = ember.compile(fn)
    actual = compiled(x, v)
    got = torch.autograd.grad(actual, (x, v))
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    report = report_of(compiled)
    assert [g.kind for g in report.graphs] == ["forward", "backward"]
    assert not any(g.torch_calls for g in report.graphs), report.text()


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_composites_at_the_edges_of_a_dim(n):
    """Empty, single and pair dims (which Dynamo specialises) through the composite lowerings,
    and an int32 running sum past int32's range (eager sums into int64)."""
    x = torch.randn(3, n)
    compiled_matches(lambda t: (t.repeat(2, 1, 3), t.cumsum(1), torch.linalg.vector_norm(t, dim=1)), x, dynamic=True)
    compiled_matches(lambda t: (t.flip(1), torch.sort(t, stable=True)), x)
    compiled_matches(lambda t: t.cumsum(1), torch.full((1, 3000), 2 ** 30, dtype=torch.int32))
