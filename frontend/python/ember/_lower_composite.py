"""Lowerings of ATen ops that ember has no op for, written with ember's ops: copies into a
slice, repeat, flip, norms, group norm, activations with a slope. Each is checked against
PyTorch's meta like any lowering (_translate._matches); where the inputs leave the written
form (a symbolic bound, a dtype eager computes otherwise) the op stays a torch call.

Float16 and bfloat16 inputs are computed in float32 and rounded once, as PyTorch's CPU kernels
compute them (their opmath type)."""
import math

from ._lower import (_FLOATS, _LOW_PRECISION, _axes, _elementwise, _is_value, ember_dtype, lowering, operand,
                     static_float, static_ints)
from ._symbols import Unsupported


def _wide(cx, x):
    return cx.op("cast", [x], {"dtype": "f32"}) if x.dtype in _LOW_PRECISION else x


def _narrow_to(cx, x, dtype):
    return x if x.dtype == dtype else cx.op("cast", [x], {"dtype": dtype})


def _int_size(size, what):
    if not isinstance(size, int):
        raise Unsupported(f"{what} of a symbolic dim")
    return size


@lowering("aten.copy.default")
def _copy(cx, dst, src, non_blocking=False):
    """dst.copy_(src) as a value: src cast to dst's dtype and broadcast to its shape."""
    if not _is_value(src):
        raise Unsupported("copy from a number")
    value = _narrow_to(cx, src, dst.dtype)
    if list(value.shape) != list(dst.shape):
        value = cx.op("expand", [value], {"shape": cx.shape(dst.shape)})
    return value


@lowering("aten.new_empty_strided.default")
def _new_empty_strided(cx, x, size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    """Memory whose values nobody reads before writing them (a gradient's buffer before its
    slices are scattered in): zeros, in ember's layout."""
    return cx.full(size, 0.0, ember_dtype(cx.node.meta["val"].dtype))


@lowering("aten.slice_scatter.default")
def _slice_scatter(cx, x, src, dim=0, start=None, end=None, step=1):
    """x with x[start:end:step] along dim replaced by src: the parts of x around a unit-step
    slice concatenated with src, or an index_put at the strided positions."""
    rank = len(x.shape)
    dim = dim % rank
    size = x.shape[dim]
    start = 0 if start is None else start
    end = 2 ** 63 - 1 if end is None else end
    if not all(isinstance(v, int) for v in (start, end, step)) or step < 1:
        raise Unsupported("slice_scatter with bounds that are sizes")
    size = _int_size(size, "slice_scatter") if start < 0 or end < 0 or step != 1 else size
    if start < 0:
        start = max(start + size, 0)
    if end < 0:
        end = max(end + size, 0)
    if isinstance(size, int):
        start, end = min(start, size), min(max(end, start), size)
    if step != 1:
        positions = cx.op("arange", [], {"start": float(start), "end": float(end), "step": float(step), "dtype": "i64"})
        return cx.op("index_put", [x, positions, src], {"axis": dim, "accumulate": False, "wrap": False})
    parts = []
    if start > 0:
        parts.append(cx.op("slice", [x], {"axis": dim, "start": 0, "step": 1, "end": start}))
    parts.append(src)
    if end < 2 ** 62 and (not isinstance(size, int) or end < size):
        parts.append(cx.op("slice", [x], {"axis": dim, "start": end, "step": 1}))
    return parts[0] if len(parts) == 1 else cx.op("concat", parts, {"axis": dim})


@lowering("aten.repeat.default")
def _repeat(cx, x, repeats):
    """x tiled: each dim of x (with leading 1s up to len(repeats)) gets a new dim of its repeat
    count in front, broadcast, and the pairs merged."""
    repeats = static_ints(repeats, "a repeat count")
    # Sizes from PyTorch's meta (ints or SymInts, which multiply): ember's dims are texts.
    shape = [1] * (len(repeats) - len(x.shape)) + list(cx.node.args[0].meta["val"].shape)
    if len(shape) != len(repeats) or any(r < 0 for r in repeats):
        raise Unsupported("repeat with fewer counts than dims")
    paired = [v for size in shape for v in (1, size)]
    tiled = [v for r, size in zip(repeats, shape) for v in (r, size)]
    out = cx.op("reshape", [x], {"shape": cx.shape(paired)})
    out = cx.op("expand", [out], {"shape": cx.shape(tiled)})
    return cx.op("reshape", [out], {"shape": cx.shape([r * size for r, size in zip(repeats, shape)])})


@lowering("aten.flip.default")
def _flip(cx, x, dims):
    """x read backwards along each of dims: an index_select of n-1 .. 0."""
    for d in {d % len(x.shape) for d in dims}:
        n = _int_size(x.shape[d], "flip")
        if n > 1:
            backwards = cx.op("arange", [], {"start": float(n - 1), "end": -1.0, "step": -1.0, "dtype": "i64"})
            x = cx.op("index_select", [x, backwards], {"axis": d, "wrap": False})
    return cx.copy(x)


@lowering("aten.pow.Scalar")
def _pow_of_number(cx, base, exponent):
    """base ** tensor: a float result (an integer base over integers stays a torch call: eager
    gives 0 for negative powers, where ember's pow raises)."""
    if exponent.dtype not in _FLOATS and not isinstance(base, float):
        raise Unsupported("integer pow")
    if base == 1:  # eager's answer for every exponent, NaN included
        return cx.full(exponent.shape, 1.0, ember_dtype(cx.node.meta["val"].dtype))
    return _elementwise("pow")(cx, base, exponent)


@lowering("aten.linalg_vector_norm.default")
def _vector_norm(cx, x, ord=2, dim=None, keepdim=False, dtype=None):
    """The p-norm over dims: sqrt of the sum of squares (2), sums of |x| (1) or of non-zeros
    (0), max and min of |x| (inf, -inf), else (sum |x|^p)^(1/p)."""
    if x.dtype not in _FLOATS:
        raise Unsupported("norm of a non-float tensor")
    out_dtype = ember_dtype(cx.node.meta["val"].dtype)
    if dtype is not None:
        x = _narrow_to(cx, x, ember_dtype(dtype))
    x = _wide(cx, x)
    attrs = {"axes": _axes(dim, len(x.shape)), "keepdim": keepdim}
    ord = static_float(ord, "a norm's order")
    if ord == 2:
        out = cx.op("sqrt", [cx.op("sum", [cx.op("mul", [x, x])], attrs)])
    elif ord == 1:
        out = cx.op("sum", [cx.op("abs", [x])], attrs)
    elif ord == 0:
        out = cx.op("sum", [cx.op("cast", [_elementwise("ne")(cx, x, 0)], {"dtype": x.dtype})], attrs)
    elif math.isinf(ord):
        reduced = range(len(x.shape)) if not attrs["axes"] else attrs["axes"]
        if any(not isinstance(x.shape[d], int) or x.shape[d] == 0 for d in reduced):
            raise Unsupported("an infinity norm over a dim that may be empty (eager raises)")
        out = cx.op("max" if ord > 0 else "min", [cx.op("abs", [x])], attrs)
    else:
        powered = _elementwise("pow")(cx, cx.op("abs", [x]), ord)
        out = _elementwise("pow")(cx, cx.op("sum", [powered], attrs), 1.0 / ord)
    return _narrow_to(cx, out, out_dtype)


@lowering("aten.leaky_relu.default")
def _leaky_relu(cx, x, negative_slope=0.01):
    """x > 0 ? x : x * slope, as PyTorch's kernel (NaN stays NaN)."""
    if x.dtype not in _FLOATS:
        raise Unsupported("leaky_relu of integers")
    w = _wide(cx, x)
    out = cx.op("where", [_elementwise("gt")(cx, w, 0.0), w, _elementwise("mul")(cx, w, static_float(negative_slope, "a slope"))])
    return _narrow_to(cx, out, x.dtype)


@lowering("aten.elu.default")
def _elu(cx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """x > 0 ? x * scale : expm1(x * input_scale) * alpha * scale (ELU, SELU and CELU)."""
    if x.dtype not in _FLOATS:
        raise Unsupported("elu of integers")
    w = _wide(cx, x)
    positive = _elementwise("mul")(cx, w, static_float(scale, "a scale"))
    negative = _elementwise("mul")(cx, cx.op("expm1", [_elementwise("mul")(cx, w, static_float(input_scale, "a scale"))]),
                                   static_float(alpha, "alpha") * static_float(scale, "a scale"))
    out = cx.op("where", [_elementwise("gt")(cx, w, 0.0), positive, negative])
    return _narrow_to(cx, out, x.dtype)


@lowering("aten.native_group_norm.default")
def _group_norm(cx, x, weight, bias, n, c, hw, groups, eps):
    """(out, mean, rstd): each of the n x groups rows of x's channels normalised by its mean
    and biased variance, then scaled and shifted per channel."""
    if x.dtype not in _FLOATS or len(x.shape) < 2:
        raise Unsupported("group norm of a non-float tensor")
    val = cx.node.meta["val"]
    w = _wide(cx, x)
    rows = cx.op("reshape", [w], {"shape": cx.shape([n, groups, -1])})
    var, mean = cx.op_multi("var_mean", [rows], {"axes": [2], "keepdim": True, "correction": 0.0})
    rstd = cx.op("rsqrt", [_elementwise("add")(cx, var, static_float(eps, "eps"))])
    normed = cx.op("mul", [cx.op("sub", [rows, mean]), rstd])
    out = cx.op("reshape", [normed], {"shape": cx.shape(x.shape)})
    per_channel = cx.shape([c] + [1] * (len(x.shape) - 2))
    if weight is not None:
        out = cx.op("mul", [out, cx.op("reshape", [_wide(cx, weight)], {"shape": per_channel})])
    if bias is not None:
        out = cx.op("add", [out, cx.op("reshape", [_wide(cx, bias)], {"shape": per_channel})])
    stats = [cx.op("reshape", [v], {"shape": cx.shape([n, groups])}) for v in (mean, rstd)]
    return [_narrow_to(cx, v, ember_dtype(m.dtype)) for v, m in zip([out] + stats, val)]


@lowering("aten.sort.stable")
def _sort(cx, x, *, stable=None, dim=-1, descending=False):
    """(values, indices) of a stable sort: ember's keeps ties in input order, NaN as the largest
    value. Without stable=True PyTorch's CPU sort orders ties its own way (integers of a row of
    50 came out shuffled), so that stays a torch call."""
    if not stable or x.dtype == "bool" or not x.shape:
        raise Unsupported("sort that is not stable, of bools or of a 0-d tensor")
    return cx.op_multi("sort", [x], {"axis": dim % len(x.shape), "descending": bool(descending), "stable": True})


@lowering("aten.fmod.Scalar")
def _fmod(cx, x, divisor):
    """The remainder with the dividend's sign (C's %), for integers by a non-zero number:
    Python's remainder, moved by the divisor where the signs differ."""
    if x.dtype in _FLOATS or x.dtype == "bool" or not isinstance(divisor, int) or divisor == 0:
        raise Unsupported("fmod other than of integers by a non-zero integer")
    r = _elementwise("remainder")(cx, x, divisor)
    zero = cx.graph.scalar_int(0, x.dtype)
    moved = cx.op("logical_and", [cx.op("ne", [r, zero]), cx.op("ne", [cx.op("lt", [r, zero]), cx.op("lt", [x, zero])])])
    return cx.op("where", [moved, _elementwise("sub")(cx, r, divisor), r])


@lowering("aten.cumsum.default")
def _cumsum(cx, x, dim, dtype=None):
    """Running sums; `dtype` converts the input first, as PyTorch does, and an integer one
    narrower than int64 wraps the sums (exact: they wrap alike at any step)."""
    if dtype is None:
        return cx.op("cumsum", [x], {"axis": dim})
    want = ember_dtype(dtype)
    return _narrow_to(cx, cx.op("cumsum", [_narrow_to(cx, x, want)], {"axis": dim}), want)
