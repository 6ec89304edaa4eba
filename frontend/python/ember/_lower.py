"""ATen ops as ember ops: one lowering per ATen overload, keyed by its name ("aten.add.Tensor").

A lowering gets the translation context `cx` and the node's arguments, with FX nodes replaced by
what they stand for: an ember Value for a tensor, a sympy expression for a SymInt. It returns an
ember Value, or a list of them for an op with several outputs. It declines a case it does not
cover by raising Unsupported (static_int and static_float decline symbolic arguments; ember's
own "[symbolic]" refusals of a size become Unsupported in Context.op); the node then runs on
PyTorch as a torch call inside the compiled graph (see _translate.py), so a missing case costs
speed, never correctness. Anything else a lowering raises, or a result of another dtype or shape
than PyTorch's meta, is a bug: a RuntimeWarning naming the op (an error under `strict`), and the
report counts it.
"""
import math

import sympy
import torch

from ._symbols import FloatSize, Unsupported

LOWERINGS = {}

_DTYPES = {
    torch.bool: "bool", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
    torch.uint8: "u8", torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32", torch.float64: "f64",
}

_TORCH_DTYPES = {e: t for t, e in _DTYPES.items()}


def ember_dtype(dtype):
    if dtype not in _DTYPES:
        raise Unsupported(f"dtype {dtype}")
    return _DTYPES[dtype]


def torch_dtype_of(dtype):
    return _TORCH_DTYPES[dtype]


def static_int(v, what):
    """An integer argument that ember takes as an attribute (a pad, a stride, a split size, a
    repeat count). Under dynamic=True it may be a size, a sympy expression of the graph's
    symbols, which an attribute cannot hold: the lowering declines."""
    if isinstance(v, sympy.Expr):
        if not v.is_Integer:
            raise Unsupported(f"{what} that is a symbolic size ({v})")
        return int(v)
    if isinstance(v, FloatSize):
        raise Unsupported(f"{what} that is a symbolic value")
    return int(v)


def static_ints(values, what):
    return [static_int(v, what) for v in values]


def static_float(v, what):
    """A float argument that ember takes as an attribute (eps, a norm's order, a slope): a
    symbolic one (a SymFloat under dynamic=True) is declined."""
    if isinstance(v, sympy.Expr):
        if not v.is_number:
            raise Unsupported(f"{what} that is a symbolic value ({v})")
        return float(v)
    if isinstance(v, FloatSize):
        raise Unsupported(f"{what} that is a symbolic value")
    return float(v)


def lowering(*names):
    def register(fn):
        for name in names:
            LOWERINGS[name] = fn
        return fn
    return register


def _is_value(x):
    return hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, (int, float, bool, torch.Tensor))


_INT_RANGES = {"u8": (0, 255), "i8": (-128, 127), "i16": (-2 ** 15, 2 ** 15 - 1), "i32": (-2 ** 31, 2 ** 31 - 1)}


def _scalar_dtype(value, other):
    """The dtype of a Python number's constant beside tensor `other`, as PyTorch promotes a
    wrapped number: it never widens a tensor of its own kind, and a float beside integers gives
    the default float (float32). ember's constants are 0-d tensors, which a tensor with dims
    outranks; beside a 0-d tensor (a loss times 0.9 in label smoothing) the constant takes that
    tensor's dtype instead, or the two 0-d tensors would promote to int64 or float64."""
    if isinstance(value, bool):
        return "bool"
    zero_dim = other is not None and len(other.shape) == 0
    if isinstance(value, int):
        lo, hi = _INT_RANGES.get(other.dtype, (1, 0)) if zero_dim else (1, 0)
        return other.dtype if lo <= value <= hi else "i64"  # out of range: eager's call raises
    if zero_dim and other.dtype in ("f16", "bf16", "f32", "f64"):
        return other.dtype
    return "f64" if other is not None and other.dtype in ("f16", "bf16", "f32", "f64") else "f32"


def _fill_value(value, dtype):
    """A Python number filling a tensor of ember dtype `dtype`, as a float for the graph. It
    declines (the PyTorch call then raises as eager does) a value PyTorch refuses to convert
    ("value cannot be converted to type uint8 without overflow": 300 into uint8, NaN into int64,
    1e5 into float16), a size, and an integer a double does not hold exactly."""
    if not isinstance(value, (bool, int, float)):
        raise Unsupported("a fill value that is a size")
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int) and abs(value) > 2 ** 53:
        raise Unsupported("an integer fill value beyond 2**53 (ember's attributes hold doubles)")
    t = torch_dtype_of(dtype)
    if t.is_floating_point:
        fits = not math.isfinite(value) or abs(value) <= torch.finfo(t).max
    elif t == torch.bool:
        fits = True
    else:
        fits = math.isfinite(value) and torch.iinfo(t).min <= value <= torch.iinfo(t).max
    if not fits:
        raise Unsupported(f"{value} does not fit {t}: PyTorch raises")
    return float(value)


def operand(cx, x, other=None):
    if _is_value(x):
        return x
    if isinstance(x, sympy.Expr):  # a SymInt: the size's value, an int as PyTorch wraps it
        return cx.size_input(x, "i64")
    if isinstance(x, FloatSize):  # a SymFloat: a wrapped number, which never widens a float tensor
        # (a float64 input beside a 0-d float32 tensor promoted it to float64, and the node
        # became a torch call that cannot take the SymFloat)
        wide = other is not None and other.dtype in ("f32", "f64")
        return cx.size_input(x, other.dtype if wide else "f32")
    if isinstance(x, (bool, int, float)):
        dtype = _scalar_dtype(x, other)
        if dtype == "i64":
            return cx.graph.scalar_int(int(x), dtype)  # exact beyond 2**53
        return cx.graph.scalar(float(x), dtype)
    raise Unsupported(f"operand {type(x).__name__}")


_LOW_PRECISION = ("f16", "bf16")


def _scalar_like(x):
    """Whether operand x is a scalar in PyTorch's CPU kernels: a Python number or a 0-d tensor."""
    return not _is_value(x) or len(x.shape) == 0


def _in_opmath(cx, name, args, alpha=1):
    """PyTorch's CPU kernels compute float16/bfloat16 arithmetic with a scalar operand (a Python
    number or a 0-d tensor), or with an `alpha`, in float32 and round the result once. mul, div
    and floor division take the scalar unrounded when it is the second operand (1e5 is inf in
    float16, and x * 1e5 is not; x // 0.3 is not x // 0.2999); add and sub, and a 0-d tensor
    first, round it to the tensor's dtype first (x + 5005 adds 5004 in float16). add and sub
    scale the second operand by alpha, rounded to the tensor's dtype as PyTorch rounds it, in
    float32 too. The op runs in float32 here, with the
    scalar as PyTorch takes it. None when that does not apply."""
    if name not in _OPMATH_OPS:
        return None
    tensors = [a for a in args if _is_value(a) and len(a.shape) > 0]
    if not tensors:  # a 0-d tensor with a number: the tensor is the operand the kernel iterates over
        tensors = [a for a in args if _is_value(a)]
        if len(tensors) != 1:
            return None
    if not (alpha != 1 or any(_scalar_like(a) for a in args)):
        return None
    low = tensors[0].dtype
    if low not in _LOW_PRECISION or any(t.dtype != low for t in tensors):
        return None
    wide = []
    # A number's constant as it would be beside a tensor with dims: not rounded to a 0-d
    # tensor's 16-bit dtype (_scalar_dtype does that elsewhere, as PyTorch's other kernels do).
    beside = tensors[0] if len(tensors[0].shape) > 0 else None
    for position, a in enumerate(args):
        rounded = _scalar_like(a) and (name in ("add", "sub") or position == 0)
        a = operand(cx, a, beside)
        if rounded and a.dtype != low:
            a = cx.op("cast", [a], {"dtype": low})
        if a.dtype in _LOW_PRECISION:
            a = cx.op("cast", [a], {"dtype": "f32"})
        wide.append(a)
    if alpha != 1:  # alpha in the tensor's dtype, as PyTorch converts it, then in float32
        scale = cx.op("cast", [cx.graph.scalar(static_float(alpha, "alpha"), low)], {"dtype": "f32"})
        wide[1] = cx.op("mul", [wide[1], scale])
    out = cx.op(name, wide)
    return cx.op("cast", [out], {"dtype": low}) if out.dtype == "f32" else out


_OPMATH_OPS = ("add", "sub", "mul", "div", "floor_divide")


def _elementwise(name):
    def lower(cx, *args, **kwargs):
        if kwargs:
            raise Unsupported(f"{name} with {sorted(kwargs)}")
        if len(args) > 1:
            wide = _in_opmath(cx, name, args)
            if wide is not None:
                return wide
        tensors = [a for a in args if _is_value(a)]
        first = tensors[0] if tensors else None
        return cx.op(name, [operand(cx, a, first) for a in args])
    return lower


for _ember, _aten in [
    ("abs", "abs"), ("neg", "neg"), ("exp", "exp"), ("exp2", "exp2"), ("log", "log"), ("log2", "log2"),
    ("log1p", "log1p"), ("expm1", "expm1"), ("sqrt", "sqrt"), ("rsqrt", "rsqrt"), ("sin", "sin"), ("cos", "cos"),
    ("tan", "tan"), ("tanh", "tanh"), ("sigmoid", "sigmoid"), ("erf", "erf"),
    ("floor", "floor"), ("ceil", "ceil"), ("trunc", "trunc"), ("reciprocal", "reciprocal"),
    ("logical_not", "logical_not"), ("isnan", "isnan"), ("isinf", "isinf"), ("silu", "silu"),
]:
    LOWERINGS[f"aten.{_aten}.default"] = _elementwise(_ember)

for _name in ("maximum", "minimum"):
    LOWERINGS[f"aten.{_name}.default"] = _elementwise(_name)
for _ember, _aten in [
    ("mul", "mul"), ("eq", "eq"), ("ne", "ne"), ("lt", "lt"),
    ("le", "le"), ("gt", "gt"), ("ge", "ge"), ("remainder", "remainder"), ("bitwise_and", "bitwise_and"),
    ("bitwise_or", "bitwise_or"), ("bitwise_xor", "bitwise_xor"),
]:
    LOWERINGS[f"aten.{_aten}.Tensor"] = _elementwise(_ember)
    LOWERINGS[f"aten.{_aten}.Scalar"] = _elementwise(_ember)
for _name in ["logical_and", "logical_or", "logical_xor"]:
    LOWERINGS[f"aten.{_name}.default"] = _elementwise(_name)
LOWERINGS["aten.div.Tensor"] = LOWERINGS["aten.div.Scalar"] = _elementwise("div")
LOWERINGS["aten.true_divide.Tensor"] = _elementwise("div")  # group norm's backward


def _pow_tensor_tensor(cx, a, b):
    if a.dtype not in ("f16", "bf16", "f32", "f64") and b.dtype not in ("f16", "bf16", "f32", "f64"):
        raise Unsupported("integer pow")  # eager gives 0 for negative powers; ember's raises
    return _elementwise("pow")(cx, a, b)
LOWERINGS["aten.pow.Tensor_Tensor"] = _pow_tensor_tensor


@lowering("aten.pow.Tensor_Scalar")
def _pow_scalar(cx, x, exponent):
    """As PyTorch's pow with a number: the exponents it computes another way keep its answers
    (x ** -0.5 is rsqrt: NaN at -inf, -inf at -0.0); integers keep the torch call (eager gives 0
    for a negative power, where ember's pow raises)."""
    if x.dtype not in ("f16", "bf16", "f32", "f64"):
        raise Unsupported("integer pow")
    special = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}
    if isinstance(exponent, (int, float)) and float(exponent) in special:
        return cx.op(special[float(exponent)], [x])
    if exponent == 2:
        return cx.op("mul", [x, x])
    if exponent == 3:
        return cx.op("mul", [cx.op("mul", [x, x]), x])
    return _elementwise("pow")(cx, x, exponent)


@lowering("aten.relu.default")
def _relu(cx, x):
    """x < 0 ? 0 : x, as PyTorch's kernel: -0.0 stays -0.0 (ember's relu gives +0.0), NaN stays."""
    if x.dtype not in ("f16", "bf16", "f32", "f64"):
        return cx.op("relu", [x])
    return cx.op("where", [cx.op("lt", [x, cx.graph.scalar(0.0, x.dtype)]), cx.graph.scalar(0.0, x.dtype), x])


@lowering("aten.sign.default")
def _sign(cx, x):
    """(0 < x) - (x < 0), as PyTorch computes it: 0 for NaN."""
    if x.dtype == "bool":
        return x
    zero = cx.graph.scalar(0.0, x.dtype) if x.dtype in ("f16", "bf16", "f32", "f64") else cx.graph.scalar_int(0, x.dtype)
    pos = cx.op("cast", [cx.op("gt", [x, zero])], {"dtype": x.dtype})
    neg = cx.op("cast", [cx.op("lt", [x, zero])], {"dtype": x.dtype})
    return cx.op("sub", [pos, neg])
LOWERINGS["aten.where.self"] = _elementwise("where")


@lowering("aten.round.default")
def _round(cx, x):
    return cx.op("round", [x])


@lowering("aten.gelu.default")
def _gelu(cx, x, approximate="none"):
    return cx.op("gelu", [x], {"approximate": approximate})


@lowering("aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar")
def _add_sub(cx, a, b, alpha=1):
    name = "add" if "add" in cx.target_name else "sub"
    wide = _in_opmath(cx, name, [a, b], alpha)
    if wide is not None:
        return wide
    a = operand(cx, a, b if _is_value(b) else None)
    b = operand(cx, b, a)
    if alpha != 1:
        b = cx.op("mul", [b, operand(cx, alpha, b)])
    return cx.op(name, [a, b])


@lowering("aten.rsub.Scalar", "aten.rsub.Tensor")
def _rsub(cx, a, b, alpha=1):
    """b - alpha * a"""
    wide = _in_opmath(cx, "sub", [b, a], alpha)
    if wide is not None:
        return wide
    return cx.op("sub", [operand(cx, b, a), _scaled(cx, a, alpha)])


def _scaled(cx, x, alpha):
    return x if alpha == 1 else cx.op("mul", [x, operand(cx, alpha, x)])


@lowering("aten.div.Tensor_mode")
def _div_mode(cx, a, b, rounding_mode=None):
    if rounding_mode == "trunc":
        # Floats: eager's trunc(a / b) in the dtype. Not integers (ember has no truncating
        # integer division) nor 16-bit floats (eager truncates before rounding to them).
        q = _div_mode(cx, a, b)
        if ember_dtype(cx.node.meta["val"].dtype) not in ("f32", "f64"):
            raise Unsupported(f"div with rounding_mode='trunc' in {q.dtype}")
        return cx.op("trunc", [q])
    if rounding_mode not in (None, "floor"):
        raise Unsupported(f"div with rounding_mode={rounding_mode!r}")
    name = "div" if rounding_mode is None else "floor_divide"
    wide = _in_opmath(cx, name, [a, b])  # with the scalar as PyTorch takes it, before it is a constant
    if wide is not None:
        return wide
    a = operand(cx, a, b if _is_value(b) else None)
    return cx.op(name, [a, operand(cx, b, a)])


@lowering("aten.clamp.default", "aten.clamp.Tensor")
def _clamp(cx, x, min=None, max=None):
    if min is not None:
        x = _clamp_min(cx, x, min)
    if max is not None:
        x = _clamp_max(cx, x, max)
    return x


def _bound(cx, bound, x):
    """A clamp's bound beside x: a number PyTorch cannot convert to x's dtype (clamp(uint8,
    max=300)) raises in eager, so the lowering declines."""
    if isinstance(bound, (int, float)):
        _fill_value(bound, x.dtype)
    return operand(cx, bound, x)


@lowering("aten.clamp_min.default", "aten.clamp_min.Tensor")
def _clamp_min(cx, x, lo):
    return _clamped(cx, x, lo, "maximum", "lt")


@lowering("aten.clamp_max.default", "aten.clamp_max.Tensor")
def _clamp_max(cx, x, hi):
    return _clamped(cx, x, hi, "minimum", "gt")


def _clamped(cx, x, bound, extreme, past):
    """x held at a bound. PyTorch's clamp by a number keeps x where x equals the bound, so -0.0
    stays -0.0 under clamp(min=0) (ember's maximum gives +0.0, and 1 / relu6(-0.0) turned from
    -inf to inf): x past the bound takes the bound, else x (NaN included). A NaN or tensor
    bound: maximum and minimum, which propagate NaN as eager's clamp does."""
    value = _bound(cx, bound, x)
    if isinstance(bound, (int, float)) and not math.isnan(bound):
        return cx.op("where", [cx.op(past, [x, value]), value, x])
    return cx.op(extreme, [x, value])


@lowering("aten._to_copy.default")
def _to_copy(cx, x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    if device is not None and torch.device(device).type != "cpu":
        raise Unsupported("a copy to another device")
    if dtype is None:
        return cx.copy(x)
    return cx.op("cast", [x], {"dtype": ember_dtype(dtype)})


@lowering("prims.convert_element_type.default")
def _convert_element_type(cx, x, dtype):
    return cx.op("cast", [x], {"dtype": ember_dtype(dtype)})


@lowering("aten.clone.default")
def _clone(cx, x, memory_format=None):
    return cx.copy(x)


@lowering("aten.alias.default", "aten.lift_fresh_copy.default")
def _alias(cx, x):
    return x


# Views: every ember view op of a viewable input is a view at run time too.

@lowering("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")
def _view(cx, x, shape):
    # The meta's sizes: equal in value to the arguments (-1 resolved), and spelled as the rest
    # of the graph spells them (tensorinv views by s2*s3 where the meta, which knows that equals
    # s0*s1, says s0*s1, and the lowering's result was refused).
    meta = cx.node.meta.get("val")
    sizes = meta.shape if isinstance(meta, torch.Tensor) else shape
    return cx.op("reshape", [x], {"shape": cx.shape(sizes)})


@lowering("aten.permute.default")
def _permute(cx, x, dims):
    return cx.op("permute", [x], {"dims": [int(d) for d in dims]})


@lowering("aten.t.default")
def _t(cx, x):
    return x if len(x.shape) < 2 else cx.op("transpose", [x], {"dim0": 0, "dim1": 1})


@lowering("aten.transpose.int")
def _transpose(cx, x, dim0, dim1):
    return cx.op("transpose", [x], {"dim0": dim0, "dim1": dim1})


@lowering("aten.expand.default")
def _expand(cx, x, shape, implicit=False):
    return cx.op("expand", [x], {"shape": cx.shape(shape)})


@lowering("aten.unsqueeze.default")
def _unsqueeze(cx, x, dim):
    return cx.op("unsqueeze", [x], {"axis": dim})


@lowering("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def _squeeze(cx, x, dims=None):
    rank = len(x.shape)
    if rank == 0:
        return x
    # squeeze.default squeezes every dim of size 1; squeeze.dims an empty list of dims, none.
    # PyTorch skips a named dim that is not 1; ember squeezes exactly the dims it is given.
    if dims is None:
        keep = [i for i, s in enumerate(x.shape) if s == 1]
    else:
        dims = [dims] if isinstance(dims, int) else list(dims)
        keep = sorted({d % rank for d in dims if x.shape[d % rank] == 1})
    return cx.op("squeeze", [x], {"axes": keep}) if keep else x


@lowering("aten.slice.Tensor")
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    size = x.shape[dim]
    start = 0 if start is None else start
    end = (2 ** 63 - 1) if end is None else end
    length = cx.shape([cx.node.meta["val"].shape[dim]])
    if step == 1 and length[0] == size:  # all of it (x[:, -7:] of a dim PyTorch knows is <= 7)
        return x
    if (not isinstance(end, int) or not isinstance(size, int)) and isinstance(start, int) and start >= 0 \
            and isinstance(step, int):
        # x[:, :seq] with a symbolic seq, or x[:, :4] of a symbolic dim: the result's length is
        # PyTorch's (its guards hold it), and the plan checks that it stays inside x.
        return cx.op("slice", [x], {"axis": dim, "start": start, "step": step, "length": length})
    for v in (start, end, step):
        if not isinstance(v, int):
            raise Unsupported("slice bounds that are sizes")
    if start == 0 and end >= (size if isinstance(size, int) else 2 ** 62) and step == 1:
        return x
    attrs = {"axis": dim, "start": start, "step": step}
    if end < 2 ** 62:  # else to the end, which ember's slice also knows for a symbolic dim
        attrs["end"] = end
    return cx.op("slice", [x], attrs)


@lowering("aten.select.int")
def _select(cx, x, dim, index):
    if not isinstance(index, int):
        raise Unsupported("select by a size")
    if index >= 0:  # the plan checks that it is inside x (a symbolic dim)
        part = cx.op("slice", [x], {"axis": dim, "start": index, "length": [1]})
    else:  # -1 runs to the end
        part = cx.op("slice", [x], {"axis": dim, "start": index, **({"end": index + 1} if index < -1 else {})})
    return cx.op("squeeze", [part], {"axes": [dim]})


# as_strided reads memory, not values. _translate lets it through only when the input owns its
# storage exactly (offset 0, dense, nothing beyond its elements), so its memory is its elements
# in the order of eager's strides. The view becomes ember views when it re-reads that memory
# densely (a reshape under another name, as AOTAutograd writes some views); other strides are a
# torch call, which gets the input in eager's strides (_torch_calls._in_layout).

def sized(v):
    """(value, hint) of a size: an int, a SymInt or an FX node of one. The value is an int or a
    sympy expression over the graph's symbols; the hint is its value in the example inputs."""
    if isinstance(v, torch.fx.Node):
        v = v.meta["val"]
    if isinstance(v, torch.SymInt):
        return v.node.expr, v.node.hint
    return int(v), int(v)


def _equal(a, b):
    return sympy.expand(a - b) == 0


def dense_order(sizes, strides, numel):
    """The dims from outermost to innermost when (sizes, strides), pairs from sized(), cover
    0..numel-1 once each; else None. Dims of size 1 come last (their stride is arbitrary).
    Symbolic strides are ordered by their hints and checked as expressions."""
    if any(s[1] is None for s in strides):  # an unbacked size (after .item()): no order known
        return None
    order = sorted((d for d in range(len(sizes)) if sizes[d][0] != 1), key=lambda d: -strides[d][1])
    expected = 1
    for d in reversed(order):
        if not _equal(strides[d][0], expected):
            return None
        expected *= sizes[d][0]
    if not _equal(expected, numel):
        return None
    return order + [d for d in range(len(sizes)) if sizes[d][0] == 1]


def _numel(sizes):
    return math.prod(s[0] for s in sizes)


def _memory(cx, x, sizes, strides):
    """x's elements in the order eager keeps them in memory (by `strides`), as one dim."""
    order = dense_order(sizes, strides, _numel(sizes))
    if order is None:
        raise Unsupported("as_strided of a value that is not dense")
    if order != list(range(len(order))):
        x = cx.op("permute", [x], {"dims": order})
    return cx.op("reshape", [x], {"shape": cx.shape([_numel(sizes)])})


def _from_memory(cx, flat, sizes, strides):
    """The inverse of _memory: the tensor of `sizes` whose memory by `strides` is `flat`."""
    order = dense_order(sizes, strides, _numel(sizes))
    if order is None:
        raise Unsupported("as_strided that is not a dense view of all of its input")
    y = cx.op("reshape", [flat], {"shape": cx.shape([sizes[d][0] for d in order])})
    inverse = [order.index(d) for d in range(len(order))]
    return y if inverse == list(range(len(order))) else cx.op("permute", [y], {"dims": inverse})


def _strided_view(cx):
    """(input sizes, input strides, view sizes, view strides) of an as_strided(_scatter) node,
    as pairs from sized(), when the view reads all of the input's memory from its start."""
    node = cx.node
    meta = node.args[0].meta["val"]
    view = node.args[2:] if node.target is torch.ops.aten.as_strided_scatter.default else node.args[1:]
    size, stride = view[0], view[1]
    offset = view[2] if len(view) > 2 else node.kwargs.get("storage_offset")
    sizes, strides = [sized(v) for v in meta.shape], [sized(v) for v in meta.stride()]
    view_sizes, view_strides = [sized(v) for v in size], [sized(v) for v in stride]
    if (offset is not None and sized(offset)[0] != 0) or not _equal(_numel(view_sizes), _numel(sizes)):
        raise Unsupported("as_strided that is not a view of all of its input")
    return sizes, strides, view_sizes, view_strides


@lowering("aten.as_strided.default")
def _as_strided(cx, x, size, stride, storage_offset=None):
    sizes, strides, view_sizes, view_strides = _strided_view(cx)
    return _from_memory(cx, _memory(cx, x, sizes, strides), view_sizes, view_strides)


@lowering("aten.as_strided_scatter.default")
def _as_strided_scatter(cx, base, src, size, stride, storage_offset=None):
    """When the view covers all of base, the result is src laid out in base's memory."""
    sizes, strides, view_sizes, view_strides = _strided_view(cx)
    return _from_memory(cx, _memory(cx, src, view_sizes, view_strides), sizes, strides)


@lowering("aten.cat.default")
def _cat(cx, tensors, dim=0):
    # PyTorch skips legacy empty tensors (1-D, no elements) beside tensors of other ranks, as a
    # key-value cache starts out (transformers' DynamicCache).
    kept = [t for t in tensors if not (len(t.shape) == 1 and t.shape[0] == 0)]
    if kept and any(len(t.shape) != 1 for t in kept):
        tensors = kept
    if len(tensors) == 1:
        return cx.copy(tensors[0])
    return cx.op("concat", list(tensors), {"axis": dim})


@lowering("aten.constant_pad_nd.default")
def _pad(cx, x, pad, value=0.0):
    pads = static_ints(pad, "a pad")
    return cx.op("pad", [x], {"pads": pads, "value": _fill_value(value, x.dtype)})


# Reductions

def _axes(dims, rank):
    if dims is None:
        return []
    dims = [dims] if isinstance(dims, int) else list(dims)
    return [d % rank for d in dims] if rank else []


_FLOATS = ("f16", "bf16", "f32", "f64")


def _reduce(name):
    def lower(cx, x, dim=None, keepdim=False, dtype=None):
        attrs = {"axes": _axes(dim, len(x.shape)), "keepdim": keepdim}
        want = None if dtype is None else ember_dtype(dtype)
        if name == "mean" and want in _FLOATS and x.dtype in _FLOATS and want != x.dtype:
            # PyTorch's mean reads the input as it is and accumulates in float32 (float64 if
            # either is), rounding once to `dtype`: a float32 70000 does not become float16 inf.
            compute = "f64" if "f64" in (want, x.dtype) else "f32"
            mean = cx.op(name, [cx.op("cast", [x], {"dtype": compute})], attrs)
            return cx.op("cast", [mean], {"dtype": want})
        if want is not None:
            x = cx.op("cast", [x], {"dtype": want})
        out = cx.op(name, [x], attrs)
        # An integer reduction folds in int64 (eager's dtype where none is asked for); an asked
        # narrower one wraps its result, which is exact: sums and products wrap alike at any step.
        return out if want is None or out.dtype == want else cx.op("cast", [out], {"dtype": want})
    return lower


LOWERINGS["aten.sum.dim_IntList"] = _reduce("sum")
LOWERINGS["aten.mean.dim"] = _reduce("mean")
LOWERINGS["aten.amax.default"] = _reduce("max")
LOWERINGS["aten.amin.default"] = _reduce("min")
LOWERINGS["aten.prod.dim_int"] = _reduce("prod")


@lowering("aten.sum.default", "aten.mean.default", "aten.prod.default")
def _reduce_all(cx, x, dtype=None):
    return _reduce(cx.target_name.split(".")[1])(cx, x, None, False, dtype)


@lowering("aten.any.default", "aten.any.dim", "aten.any.dims", "aten.all.default", "aten.all.dim", "aten.all.dims")
def _any_all(cx, x, dim=None, keepdim=False):
    """any: some element is non-zero (NaN counts); all: none is zero. As counts, so that a
    reduction over no elements gives eager's answers (False and True) and any dtype works."""
    if x.dtype == "u8":
        raise Unsupported("any/all of uint8 (eager returns uint8)")
    want_any = cx.target_name.startswith("aten.any")
    hits = _elementwise("ne" if want_any else "eq")(cx, x, 0)
    count = cx.op("sum", [cx.op("cast", [hits], {"dtype": "i64"})], {"axes": _axes(dim, len(x.shape)), "keepdim": keepdim})
    return _elementwise("gt" if want_any else "eq")(cx, count, 0)


@lowering("aten.var.correction", "aten.std.correction")
def _var(cx, x, dim=None, correction=None, keepdim=False):
    name = "var" if "var" in cx.target_name else "std"
    corr = 1.0 if correction is None else static_float(correction, "a correction")
    return cx.op(name, [x], {"axes": _axes(dim, len(x.shape)), "keepdim": keepdim, "correction": corr})


@lowering("aten.var_mean.correction")
def _var_mean(cx, x, dim=None, correction=None, keepdim=False):
    corr = 1.0 if correction is None else static_float(correction, "a correction")
    return cx.op_multi("var_mean", [x], {"axes": _axes(dim, len(x.shape)), "keepdim": keepdim, "correction": corr})


@lowering("aten.argmax.default", "aten.argmin.default")
def _arg(cx, x, dim=None, keepdim=False):
    if x.dtype == "bool":  # eager raises ("does not support bool input"): so does the torch call
        raise Unsupported("argmax/argmin of bool")
    axes = [] if dim is None else [dim % max(len(x.shape), 1)]
    return cx.op("argmax" if "argmax" in cx.target_name else "argmin", [x], {"axes": axes, "keepdim": keepdim})


@lowering("aten.max.dim", "aten.min.dim")
def _max_dim(cx, x, dim, keepdim=False):
    return cx.op_multi("max_dim" if "max" in cx.target_name else "min_dim", [x], {"axis": dim, "keepdim": keepdim})


@lowering("aten._softmax.default", "aten._log_softmax.default")
def _softmax(cx, x, dim, half_to_float=False):
    if half_to_float:
        raise Unsupported("softmax with half_to_float")
    return cx.op("softmax" if "_softmax" == cx.target_name.split(".")[1] else "log_softmax", [x], {"axis": dim})


# Creation

@lowering("aten.full.default")
def _full(cx, size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = ember_dtype(dtype) if dtype is not None else _scalar_dtype(fill_value, None)
    return cx.full(size, _fill_value(fill_value, dtype), dtype)


@lowering("aten.scalar_tensor.default")
def _scalar_tensor(cx, value, dtype=None, layout=None, device=None, pin_memory=None):
    if isinstance(value, (sympy.Expr, FloatSize)):  # a size's value, made at each call
        return cx.size_input(value, ember_dtype(dtype) if dtype is not None else "f32")
    dtype = ember_dtype(dtype) if dtype is not None else "f32"
    return cx.full([], _fill_value(value, dtype), dtype)


@lowering("aten.arange.start_step", "aten.arange.default", "aten.arange.start")
def _arange(cx, *args, dtype=None, layout=None, device=None, pin_memory=None):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if any(isinstance(v, sympy.Expr) for v in (start, end, step)):
        return _arange_of_sizes(cx, start, step)
    for v in (start, end, step):
        if not isinstance(v, (int, float)):
            raise Unsupported("arange bounds that are sizes")
    if dtype is None:
        dtype = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) else torch.float32
    if any(isinstance(v, int) and abs(v) > 2 ** 53 for v in (start, end, step)):
        raise Unsupported("arange bounds past 2^53, which ember's float attributes do not hold exactly")
    return cx.op("arange", [], {"start": float(start), "end": float(end), "step": float(step),
                                "dtype": ember_dtype(dtype)})


def _arange_of_sizes(cx, start, step):
    """An integer arange whose bounds are sizes (positions from a cache length): start + step * i
    for i below the node's symbolic length, i a running count of ones (exact in int64). The
    attributes of ember's arange are numbers, not dims."""
    result_dtype = cx.node.meta["val"].dtype  # a float bound (a float of sizes) makes it a float
    if not isinstance(step, int) or result_dtype not in (torch.int64, torch.int32):
        raise Unsupported("arange over sizes of a float dtype, or with a step that is a size")
    if isinstance(start, int) and abs(start) > 2 ** 53:
        raise Unsupported("arange bounds past 2^53, which ember's float attributes do not hold exactly")
    (length,) = cx.node.meta["val"].shape
    count = cx.op("cumsum", [cx.full([length], 1, "i64")], {"axis": 0})
    # The count starts at 1.
    first = cx.size_input(start - step, "i64") if isinstance(start, sympy.Expr) else cx.full([], start - step, "i64")
    out = cx.op("add", [first, cx.op("mul", [count, cx.full([], step, "i64")])])
    return cx.op("cast", [out], {"dtype": "i32"}) if result_dtype == torch.int32 else out


@lowering("aten.hardtanh.default")
def _hardtanh(cx, x, min_val=-1.0, max_val=1.0):
    if x.dtype not in _FLOATS:  # eager clamps integers by integer bounds, in their dtype
        raise Unsupported(f"hardtanh of {x.dtype}")
    return _clamp(cx, x, min_val, max_val)


@lowering("aten.bitwise_not.default")
def _bitwise_not(cx, x):
    if x.dtype == "bool":
        return cx.op("logical_not", [x])
    return cx.op("bitwise_xor", [x, cx.graph.scalar(-1.0, x.dtype)])


@lowering("aten.split_with_sizes.default")
def _split(cx, x, split_sizes, dim=0):
    return cx.op_multi("split", [x], {"sizes": static_ints(split_sizes, "a split size"), "axis": dim})


@lowering("aten.full_like.default")
def _full_like(cx, x, fill_value, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype = ember_dtype(dtype) if dtype is not None else x.dtype
    return cx.full(x.shape, _fill_value(fill_value, dtype), dtype)
