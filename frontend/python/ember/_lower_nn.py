"""Lowerings of the layers of neural networks: contractions, convolutions and their gradients,
pooling, normalisation (layer and batch norm, forward and backward) and attention. The
conventions are _lower.py's: a lowering declines with Unsupported."""
from ._lower import _FLOATS, _scaled, ember_dtype, lowering, static_float, static_int, static_ints
from ._symbols import Unsupported


# Contractions

def _floats_only(what, *values):
    """ember's contractions, convolutions and pooling take floats; PyTorch's take integers too
    (the torch call)."""
    for v in values:
        if v is not None and v.dtype not in _FLOATS:
            raise Unsupported(f"{what} of {v.dtype}")


@lowering("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def _mm(cx, a, b):
    _floats_only("matmul", a, b)
    return cx.op("matmul", [a, b])


@lowering("aten.addmm.default")
def _addmm(cx, bias, a, b, beta=1, alpha=1):
    if not (bias.dtype == a.dtype == b.dtype):  # eager raises ("must have the same dtype"): so does the torch call
        raise Unsupported("addmm of mixed dtypes")
    _floats_only("addmm", a)
    out = _scaled(cx, cx.op("matmul", [a, b]), alpha)
    return cx.op("add", [_scaled(cx, bias, beta), out]) if beta != 0 else out


def _conv_attrs(x, stride, padding, dilation, groups):
    """conv2d's attributes. A 1-d convolution is a 2-d one over a height of 1; one value stands
    for every spatial dim (padding="valid" arrives as [0])."""
    spatial = len(x.shape) - 2
    if spatial not in (1, 2):
        raise Unsupported(f"a {spatial}-d convolution")

    def per_dim(values, one):
        values = static_ints(values, "a convolution's stride, padding or dilation")
        values = values * spatial if len(values) == 1 else values
        return ([one] if spatial == 1 else []) + values

    return {"stride": per_dim(stride, 1), "padding": per_dim(padding, 0), "dilation": per_dim(dilation, 1),
            "groups": static_int(groups, "a convolution's groups")}


def _as_2d(cx, *tensors):
    """1-d convolution operands with a height of 1 (2-d ones as they are)."""
    return [t if t is None or len(t.shape) != 3 else cx.op("unsqueeze", [t], {"axis": 2}) for t in tensors]


def _from_2d(cx, t, spatial):
    return t if t is None or spatial == 2 else cx.op("squeeze", [t], {"axes": [2]})


@lowering("aten.convolution.default")
def _convolution(cx, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        raise Unsupported("a transposed convolution")
    _floats_only("a convolution", x, w)
    attrs = _conv_attrs(x, stride, padding, dilation, groups)
    inputs = _as_2d(cx, x, w) + ([bias] if bias is not None else [])
    return _from_2d(cx, cx.op("conv2d", inputs, attrs), len(x.shape) - 2)


@lowering("aten.convolution_backward.default")
def _convolution_backward(cx, grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                          groups, output_mask):
    # Other grouped ones stay PyTorch's: ember's gradients run a GEMM per group.
    groups = static_int(groups, "a convolution's groups")
    depthwise = groups > 1 and w.shape[1] == 1
    if transposed or not (groups == 1 or depthwise):
        raise Unsupported("only the gradients of a convolution, ungrouped or depthwise, not transposed")
    attrs = _conv_attrs(x, stride, padding, dilation, groups)
    spatial = len(x.shape) - 2
    grad, x, w = _as_2d(cx, grad, x, w)
    grad_x = cx.op("conv2d_input_grad", [grad, w, x], attrs) if output_mask[0] else None
    grad_w = cx.op("conv2d_weight_grad", [grad, x, w], attrs) if output_mask[1] else None
    grad_b = cx.op("sum", [grad], {"axes": [0, 2, 3], "keepdim": False}) if output_mask[2] else None
    return [_from_2d(cx, grad_x, spatial), _from_2d(cx, grad_w, spatial), grad_b]


@lowering("aten.avg_pool2d.default")
def _avg_pool(cx, x, kernel_size, stride=(), padding=(0, 0), ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    if divisor_override is not None:
        raise Unsupported("avg_pool2d with divisor_override")
    _floats_only("avg_pool2d", x)
    return cx.op("avg_pool2d", [x], {"kernel": _pair(kernel_size), "stride": _pair(stride) if stride else [],
                                     "padding": _pair(padding), "ceil_mode": ceil_mode,
                                     "count_include_pad": count_include_pad})


@lowering("aten.max_pool2d_with_indices.default")
def _max_pool_with_indices(cx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """Inference max-pool: ember's max_pool2d when nothing reads the indices (only the backward
    of training needs them; then the node stays a torch call)."""
    if 1 not in cx.unused_outputs():
        raise Unsupported("max_pool2d whose indices are used")
    out = cx.op("max_pool2d", [x], {"kernel": _pair(kernel_size), "stride": _pair(stride) if stride else [],
                                    "padding": _pair(padding), "dilation": _pair(dilation),
                                    "ceil_mode": bool(ceil_mode)})
    return [out, cx.full(out.shape, 0, "i64")]  # the unused indices: dead code once translated


@lowering("aten._adaptive_avg_pool2d.default")
def _adaptive_avg_pool(cx, x, output_size):
    return cx.op("adaptive_avg_pool2d", [x], {"output_size": _pair(output_size)})


def _pair(v):
    v = static_ints(v if isinstance(v, (list, tuple)) else [v], "a pooling size")
    return v * 2 if len(v) == 1 else v


# Normalisation

@lowering("aten.native_layer_norm.default")
def _native_layer_norm(cx, x, normalized_shape, weight, bias, eps):
    ndim = len(normalized_shape)
    shape = x.shape[len(x.shape) - ndim:]
    mixed = _mixed_norm(x, weight) or _mixed_norm(x, bias)
    xc = cx.op("cast", [x], {"dtype": "f32"}) if mixed else x
    weight = weight if weight is not None else cx.full(shape, 1.0, xc.dtype)
    bias = bias if bias is not None else cx.full(shape, 0.0, xc.dtype)
    out = cx.op_multi("native_layer_norm", [xc, weight, bias], {"ndim": ndim, "eps": static_float(eps, "eps")})
    # The mean and rstd in the input's dtype, as PyTorch's meta kernel declares them.
    return [cx.op("cast", [v], {"dtype": x.dtype}) for v in out] if mixed else out


@lowering("aten.native_layer_norm_backward.default")
def _layer_norm_backward(cx, dy, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    """Layer norm's gradients over the last len(normalized_shape) dims, in float32 (float64 for
    float64), as eager's kernel computes them. Under autocast the saved mean and rstd are rounded
    to the input's 16-bit dtype (PyTorch's meta declares them so; its CPU kernel keeps float32),
    and PyTorch's decomposition of this op then had 10-35x eager's error in the weight's
    gradient on rows with an offset: the mean is recomputed from x instead."""
    if dy.dtype != x.dtype or x.dtype not in ("f16", "bf16", "f32", "f64"):
        raise Unsupported("layer norm gradients of other dtypes")
    ndim, rank = len(normalized_shape), len(x.shape)
    inner = list(range(rank - ndim, rank))
    outer = list(range(rank - ndim))
    c = "f64" if x.dtype == "f64" else "f32"

    def up(v):
        return v if v.dtype == c else cx.op("cast", [v], {"dtype": c})

    def averaged(v):  # over the normalised dims, kept
        return cx.op("mean", [v], {"axes": inner, "keepdim": True})

    xc, dyc = up(x), up(dy)
    # A rounded mean is what hurts: on rows with an offset, x - mean loses its digits. A rounded
    # rstd is a relative error of the input's own precision (eps, which the backward is not given,
    # would be needed to recompute it).
    mean = averaged(xc) if mean.dtype in ("f16", "bf16") else up(mean)
    rstd = up(rstd)
    xhat = cx.op("mul", [cx.op("sub", [xc, mean]), rstd])
    g = dyc if weight is None else cx.op("mul", [dyc, up(weight)])
    grad_x = cx.op("mul", [rstd, cx.op("sub", [cx.op("sub", [g, averaged(g)]),
                                                cx.op("mul", [xhat, averaged(cx.op("mul", [g, xhat]))])])])
    grad_x = cx.op("cast", [grad_x], {"dtype": x.dtype}) if grad_x.dtype != x.dtype else grad_x

    def batch_sum(v, like):
        total = cx.op("sum", [v], {"axes": outer, "keepdim": False}) if outer else v
        return cx.op("cast", [total], {"dtype": like.dtype}) if total.dtype != like.dtype else total

    grad_w = batch_sum(cx.op("mul", [dyc, xhat]), weight) if weight is not None else None
    grad_b = batch_sum(dyc, bias) if bias is not None else None
    return [grad_x, grad_w, grad_b]


def _mixed_norm(x, param):
    """A float16/bfloat16 input of a norm with float32 parameters or statistics (autocast's
    linear layers and convolutions feed float32 norms): eager normalises it in float32 and
    rounds once."""
    return x.dtype in ("f16", "bf16") and param is not None and param.dtype == "f32"


@lowering("aten._native_batch_norm_legit_no_training.default")
def _batch_norm_inference(cx, x, weight, bias, running_mean, running_var, momentum, eps):
    channels = [x.shape[1]]
    mixed = _mixed_norm(x, running_mean)
    xc = cx.op("cast", [x], {"dtype": "f32"}) if mixed else x
    weight = weight if weight is not None else cx.full(channels, 1.0, xc.dtype)
    bias = bias if bias is not None else cx.full(channels, 0.0, xc.dtype)
    out = cx.op("batch_norm", [xc, running_mean, running_var, weight, bias], {"eps": static_float(eps, "eps")})
    if mixed:
        out = cx.op("cast", [out], {"dtype": x.dtype})
    # The saved mean and rstd of inference batch norm are empty tensors.
    empty = cx.full([0], 0.0, x.dtype)
    return [out, empty, empty]


@lowering("aten._native_batch_norm_legit_functional.default")
def _batch_norm_training(cx, x, weight, bias, running_mean, running_var, training, momentum, eps):
    if not training:
        raise Unsupported("functional batch norm outside training")
    channels = [x.shape[1]]
    # A float16/bfloat16 input with float32 statistics (autocast) is normalised in float32. The
    # saved mean and rstd then have the input's dtype, as PyTorch's meta kernel declares them
    # (its CPU kernel gives float32); the backward recomputes them from x.
    mixed = _mixed_norm(x, running_mean)
    xc = cx.op("cast", [x], {"dtype": "f32"}) if mixed else x
    weight = weight if weight is not None else cx.full(channels, 1.0, xc.dtype)
    bias = bias if bias is not None else cx.full(channels, 0.0, xc.dtype)
    out = cx.op_multi("native_batch_norm", [xc, weight, bias, running_mean, running_var],
                      {"momentum": static_float(momentum, "momentum"), "eps": static_float(eps, "eps")})
    if mixed:
        out = [cx.op("cast", [v], {"dtype": x.dtype}) for v in out[:3]] + list(out[3:])
    # PyTorch's meta declares the updated running statistics float32 where they are 16-bit (its
    # CPU kernel keeps their dtype); the graph copies them back into the 16-bit buffers, so the
    # meta's dtype, which the graph was built on, loses nothing.
    declared = [ember_dtype(v.dtype) for v in cx.node.meta["val"]]
    return [v if v.dtype == want else cx.op("cast", [v], {"dtype": want}) for v, want in zip(out, declared)]


@lowering("aten._native_batch_norm_legit.no_stats")
def _batch_norm_no_stats(cx, x, weight, bias, training, momentum, eps):
    """Batch norm over the batch's own statistics with no running ones: instance norm (which
    views [N, C, H, W] as one image of N * C channels) and batch norm with
    track_running_stats=False. The running statistics the training op updates are placeholders
    here, and dropped."""
    if not training or x.dtype not in ("f32", "f64"):
        raise Unsupported("batch norm without running statistics outside float32/float64 training")
    channels = [x.shape[1]]
    mean, var = cx.full(channels, 0.0, x.dtype), cx.full(channels, 1.0, x.dtype)
    return _batch_norm_training(cx, x, weight, bias, mean, var, True, momentum, eps)[:3]


@lowering("aten.native_batch_norm_backward.default")
def _batch_norm_backward(cx, dy, x, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
                         output_mask):
    """Batch norm's gradients with their sums over (N, H, W) in float64, as eager's (the CPU's
    accumulator type of float32 is double; PyTorch's decomposition, which Inductor runs, sums
    in float32). Those sums cancel, and in float32 over 32768 values a channel the weight and
    bias gradients had twice eager's error. Reading x and dy once either way, the wider sums
    cost no memory traffic."""
    if x.dtype not in ("f16", "bf16", "f32", "f64") or dy.dtype != x.dtype or len(x.shape) < 2:
        raise Unsupported("batch norm gradients of other dtypes or ranks")
    rank = len(x.shape)
    axes = [0] + list(range(2, rank))

    def wide(v):
        return cx.op("cast", [v], {"dtype": "f64"})

    def per_channel(v):  # [C] -> [1, C, 1, ...] beside x
        return cx.op("reshape", [v], {"shape": cx.shape([1, x.shape[1]] + [1] * (rank - 2))})

    def summed(v):
        return cx.op("sum", [v], {"axes": axes, "keepdim": False})

    def averaged(v):  # over (N, H, W), whose count may be symbolic
        return cx.op("mean", [v], {"axes": axes, "keepdim": False})

    if train and save_mean.dtype in ("f16", "bf16"):  # autocast: saved rounded, so recomputed
        x64 = wide(x)
        mean = averaged(x64)
        deviation = cx.op("sub", [x64, per_channel(mean)])
        var = averaged(cx.op("mul", [deviation, deviation]))
        invstd = cx.op("rsqrt", [cx.op("add", [var, cx.graph.scalar(static_float(eps, "eps"), "f64")])])
    elif train:
        mean, invstd = wide(save_mean), wide(save_invstd)
    else:
        mean = wide(running_mean)
        invstd = cx.op("rsqrt", [cx.op("add", [wide(running_var), cx.graph.scalar(static_float(eps, "eps"), "f64")])])
    dy64 = wide(dy)
    centered = cx.op("sub", [wide(x), per_channel(mean)])
    sum_dy = summed(dy64)
    dot = summed(cx.op("mul", [dy64, centered]))
    scale = invstd if weight is None else cx.op("mul", [invstd, wide(weight)])
    # PyTorch's meta gives grad_x a tensor even where output_mask leaves it out: zeros that nothing
    # reads (dead code, removed), so that the lowering matches and stays a lowering.
    grad_x = cx.full(list(x.shape), 0.0, x.dtype)
    if output_mask[0]:
        g = dy64
        if train:
            grad_mean = averaged(dy64)
            projection = cx.op("mul", [averaged(cx.op("mul", [dy64, centered])), cx.op("mul", [invstd, invstd])])
            g = cx.op("sub", [cx.op("sub", [dy64, per_channel(grad_mean)]),
                              cx.op("mul", [centered, per_channel(projection)])])
        grad_x = cx.op("cast", [cx.op("mul", [g, per_channel(scale)])], {"dtype": x.dtype})
    param_dtype = weight.dtype if weight is not None else x.dtype
    grad_w = cx.op("cast", [cx.op("mul", [dot, invstd])], {"dtype": param_dtype}) if output_mask[1] else None
    grad_b = cx.op("cast", [sum_dy], {"dtype": param_dtype}) if output_mask[2] else None
    return [grad_x, grad_w, grad_b]


def _grouped_heads(cx, q, kv):
    """Keys or values with fewer heads than the queries (grouped-query attention: Llama's, and
    enable_gqa=True), each head repeated for its group of query heads, as PyTorch's kernel reads
    them: query head h attends with key head h // group."""
    heads, kv_heads = q.shape[-3], kv.shape[-3]
    if heads == kv_heads:
        return kv
    if not (isinstance(heads, int) and isinstance(kv_heads, int)) or heads % kv_heads:
        raise Unsupported("grouped-query attention over symbolic or uneven head counts")
    shape = list(kv.shape)
    axis = len(shape) - 2
    grouped = shape[:axis] + [heads // kv_heads] + shape[axis:]
    repeated = cx.op("expand", [cx.op("unsqueeze", [kv], {"axis": axis})], {"shape": cx.shape(grouped)})
    return cx.op("reshape", [repeated], {"shape": cx.shape(shape[:-3] + [heads] + shape[-2:])})


@lowering("aten._scaled_dot_product_flash_attention_for_cpu.default")
def _flash_attention(cx, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    """Inference attention: ember's own (matmuls and a softmax per row). The logsumexp output is
    only for the backward kernel, which needs PyTorch's: a use of it keeps the node a torch call."""
    if dropout_p != 0.0 or 1 not in cx.unused_outputs():
        raise Unsupported("attention with dropout or whose logsumexp is used")
    if scale is not None and static_float(scale, "an attention scale") == 0.0:
        raise Unsupported("attention with scale 0 (ember's 0 means the default scale)")
    scale = 0.0 if scale is None else static_float(scale, "an attention scale")  # ember's 0: the default
    k, v = _grouped_heads(cx, q, k), _grouped_heads(cx, q, v)
    inputs = [q, k, v] + ([attn_mask] if attn_mask is not None else [])
    out = cx.op("scaled_dot_product_attention", inputs, {"causal": bool(is_causal), "scale": scale})
    # A query that may attend to nothing (a padded row) gives 0 in ember's kernel, as in PyTorch's.
    logsumexp = cx.full(q.shape[:-1], 0.0, "f32")  # unused, and dead code once translated
    return [out, logsumexp]
