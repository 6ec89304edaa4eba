"""Lowerings of indexing: reading (embedding, index_select, gather, advanced indexing) and
writing (index_put, index_add, scatter) along one axis at a time, with PyTorch's range rules."""
from ._lower import _LOW_PRECISION, _fill_value, _is_value, lowering
from ._symbols import Unsupported


# PyTorch raises for a negative index, where ember's ops count it from the end unless told not
# to wrap (tests/python/test_adversarial_bridge.py).

@lowering("aten.embedding.default")
def _embedding(cx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return cx.op("embedding", [weight, indices], {"wrap": False})


@lowering("aten.index_select.default")
def _index_select(cx, x, dim, index):
    return cx.op("index_select", [x, index], {"axis": dim, "wrap": False})


@lowering("aten.gather.default")
def _gather(cx, x, dim, index, sparse_grad=False):
    return cx.op("gather", [x, index], {"axis": dim, "wrap": False})


def _writes_into(x, src):
    if src.dtype != x.dtype:  # eager raises, or casts in ways that differ by op: its own call decides
        raise Unsupported("a source of another dtype than the tensor written into")


@lowering("aten.index_put.default")
def _index_put(cx, x, indices, values, accumulate=False):
    """x[..., idx, ...] = values (or += with accumulate) for one integer index tensor after
    full slices: ember's index_put along that axis, the index flattened. Negative indices
    count from the end, as in PyTorch's advanced indexing."""
    axis = len(indices) - 1
    idx = indices[axis] if indices else None
    if idx is None or any(i is not None for i in indices[:axis]) or idx.dtype in ("bool", "u8"):
        raise Unsupported("index_put other than by one integer index after full slices")
    _writes_into(x, values)
    target = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    src = cx.op("expand", [values], {"shape": cx.shape(target)}) if list(values.shape) != target else values
    flat = cx.op("reshape", [idx], {"shape": [-1]}) if len(idx.shape) != 1 else idx
    if len(idx.shape) != 1:
        src = cx.op("reshape", [src], {"shape": cx.shape(list(x.shape[:axis]) + [-1] + list(x.shape[axis + 1:]))})
    return cx.op("index_put", [x, flat, src], {"axis": axis, "accumulate": bool(accumulate), "wrap": True})


@lowering("aten.index.Tensor")
def _index(cx, x, indices):
    """x[..., idx, ...] by integer index tensors at adjacent dims after full slices: an
    index_select along each of them, the broadcast shape of the indices put back in their place.
    One index tensor, of any shape; or several that vary along different dims of their broadcast
    shape, in order (nearest upsampling's x[:, :, rows[:, None], cols]): then the result is their
    outer product, and each index is checked against its own dim. Negative indices count from
    the end, as in PyTorch's advanced indexing. Other combinations stay a torch call: a combined
    index would not catch one out of range in its own dim."""
    axes = [d for d, i in enumerate(indices) if i is not None]
    if not axes or axes != list(range(axes[0], axes[0] + len(axes))) or not x.shape:
        raise Unsupported("indexing other than by index tensors at adjacent dims")
    tensors = [indices[d] for d in axes]
    if any(t.dtype in ("bool", "u8") for t in tensors):
        raise Unsupported("indexing by a mask")
    shape = _separable_shape([t.shape for t in tensors]) if len(tensors) > 1 else list(tensors[0].shape)
    picked = x
    for axis, t in zip(axes, tensors):
        flat = cx.op("reshape", [t], {"shape": [-1]}) if len(t.shape) != 1 else t
        picked = cx.op("index_select", [picked, flat], {"axis": axis, "wrap": True})
    if len(tensors) == 1 and len(shape) == 1:
        return picked
    out = list(x.shape[:axes[0]]) + shape + list(x.shape[axes[-1] + 1:])
    return cx.op("reshape", [picked], {"shape": cx.shape(out)})


def _separable_shape(shapes):
    """The broadcast shape of index tensors that each vary along at most one dim of it, in
    order, so that indexing by them is selecting by each in turn; else Unsupported."""
    if any(not isinstance(d, int) for s in shapes for d in s):
        raise Unsupported("several index tensors of symbolic shapes")
    rank = max(len(s) for s in shapes)
    aligned = [[1] * (rank - len(s)) + list(s) for s in shapes]
    out, last = [1] * rank, -1
    for s in aligned:
        varying = [d for d, n in enumerate(s) if n != 1]
        if len(varying) > 1 or (varying and (varying[0] <= last or out[varying[0]] != 1)):
            raise Unsupported("index tensors that are not an outer product")
        if varying:
            last = varying[0]
            out[last] = s[last]
    return out


@lowering("aten.index_add.default")
def _index_add(cx, x, dim, index, source, alpha=1):
    if alpha != 1:
        raise Unsupported("index_add with alpha")
    _writes_into(x, source)
    if not x.shape:
        raise Unsupported("index_add into a 0-d tensor")
    index = cx.op("reshape", [index], {"shape": [-1]}) if len(index.shape) != 1 else index
    if x.dtype in _LOW_PRECISION:
        # PyTorch's CPU index_add sums each target in float32 and rounds once, as scatter_add
        # does (index_put's accumulation rounds at each step, and ember's index_put does too).
        wide = [cx.op("cast", [v], {"dtype": "f32"}) for v in (x, source)]
        out = cx.op("index_put", [wide[0], index, wide[1]], {"axis": dim, "accumulate": True, "wrap": False})
        return cx.op("cast", [out], {"dtype": x.dtype})
    return cx.op("index_put", [x, index, source], {"axis": dim, "accumulate": True, "wrap": False})


@lowering("aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default")
def _scatter(cx, x, dim, index, src):
    if not _is_value(src):
        src = cx.full(index.shape, _fill_value(src, x.dtype), x.dtype)
    _writes_into(x, src)
    add = cx.target_name == "aten.scatter_add.default"
    if add and x.dtype in _LOW_PRECISION:
        # PyTorch's CPU scatter_add sums each target in float32 and rounds once (cummin's
        # gradient in bfloat16 was a unit in the last place off, rounded at each addition).
        wide = [cx.op("cast", [v], {"dtype": "f32"}) for v in (x, src)]
        out = cx.op("scatter", [wide[0], index, wide[1]], {"axis": dim, "accumulate": True, "wrap": False})
        return cx.op("cast", [out], {"dtype": x.dtype})
    return cx.op("scatter", [x, index, src], {"axis": dim, "accumulate": add, "wrap": False})
