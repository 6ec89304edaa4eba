"""ember's own tensors in Python: `ember.Tensor`, made from NumPy, PyTorch or nested lists, with
its ops as functions here. `ember.compile` over a function of ember tensors traces it with
ember's own tracer (graph breaks at `.item()`, `bool()`, printing, with the Python file:line).

    import ember
    from ember import tensor as et
    x = et.from_numpy(np.ones((4, 8), np.float32))      # no copy
    f = ember.compile(lambda x: et.softmax(et.relu(x) * 2, -1))
    y = f(x); np.from_dlpack(y)                          # no copy back
"""
import numpy as np

from . import _C

Tensor = _C.Tensor


def from_dlpack(x):
    """An ember tensor sharing the memory of a CPU tensor with __dlpack__ (PyTorch, NumPy). A
    PyTorch negative view holds -x through a flag DLPack drops: it is resolved into a copy."""
    if getattr(x, "is_neg", None) is not None and x.is_neg():
        x = x.resolve_neg()
    return Tensor.from_dlpack(x)


def from_numpy(a):
    return Tensor.from_dlpack(a)


def tensor(data, dtype=None):
    """A new ember tensor holding a copy of `data` (a list, a number, a NumPy array)."""
    return Tensor.from_dlpack(np.array(data, dtype=dtype, copy=True))


def to_numpy(x):
    return np.from_dlpack(x)


def _apply(op, inputs, **attrs):
    outs = _C.apply(op, list(inputs), attrs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _unary(name):
    def fn(x):
        return _apply(name, [x])
    fn.__name__ = name
    fn.__doc__ = f"ember's {name}, elementwise."
    return fn


for _name in ("abs", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
              "sigmoid", "relu", "silu", "erf", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "logical_not",
              "isnan", "isinf", "neg"):
    globals()[_name] = _unary(_name)


def gelu(x, approximate="none"):
    return _apply("gelu", [x], approximate=approximate)


def where(cond, a, b):
    return _apply("where", [cond, a, b])


def maximum(a, b):
    return _apply("maximum", [a, b])


def minimum(a, b):
    return _apply("minimum", [a, b])


def pow(a, b):  # noqa: A001
    return _apply("pow", [a, b])


def matmul(a, b):
    return _apply("matmul", [a, b])


def cast(x, dtype):
    return _apply("cast", [x], dtype=dtype)


def _reduction(name):
    def fn(x, axes=None, keepdim=False):
        axes = [] if axes is None else [axes] if isinstance(axes, int) else list(axes)
        return _apply(name, [x], axes=axes, keepdim=keepdim)
    fn.__name__ = name
    fn.__doc__ = f"ember's {name} over `axes` (all when None)."
    return fn


for _name in ("sum", "mean", "prod", "max", "min", "logsumexp"):
    globals()[_name] = _reduction(_name)


def softmax(x, axis=-1):
    return _apply("softmax", [x], axis=axis)


def log_softmax(x, axis=-1):
    return _apply("log_softmax", [x], axis=axis)


def layer_norm(x, weight, bias, eps=1e-5):
    """Over the last dim."""
    return _apply("layer_norm", [x, weight, bias], ndim=1, eps=eps)


def reshape(x, shape):
    return _apply("reshape", [x], shape=list(shape))


def permute(x, dims):
    return _apply("permute", [x], dims=list(dims))


def transpose(x, dim0, dim1):
    return _apply("transpose", [x], dim0=dim0, dim1=dim1)


def concat(tensors, axis=0):
    return _apply("concat", list(tensors), axis=axis)
