"""An ATen-level FX graph (from AOTAutograd) as one compiled ember graph.

Each placeholder becomes a graph input (a SymInt placeholder binds a symbol instead), each ATen
node an ember op through its lowering (_lower*.py), or a torch call when there is none or it
declines the case (Unsupported). Every lowered node is checked against the dtype and shape
PyTorch's meta says it has; a mismatch, or any other exception of a lowering, is a bug: the node
becomes a torch call with a warning (strict raises). get_attr tensors are inputs bound once.
"""
import bisect
import math
import operator
import os
import time
import warnings
import weakref

import sympy
import torch

from . import _C, _lower_composite, _lower_index, _lower_nn, _torch_calls  # noqa: F401 (the _lower_* modules register lowerings)
from ._eager_layout import (EagerLayouts, as_eager, as_view_of, contiguous_at_every_size, is_tensor_node,
                            output_tensor_vals)
from ._lower import LOWERINGS, dense_order, ember_dtype, sized, torch_dtype_of
from ._symbols import FloatSize, NonPolynomialSize, Symbols, Unsupported, input_size_symbols


# Ops whose result depends on the input's storage (offset and memory beyond its own elements),
# not only on its values. Unless the input owns its storage exactly (_owns_storage), neither a
# lowering nor a torch call can reproduce them, so a graph with one runs on PyTorch.
_STORAGE_OPS = ("aten.as_strided", "aten.set_", "aten.resize_")
# Ops whose meta kernels size a result otherwise than the op does, and when that matters:
# mkldnn_rnn_layer's workspace (result 3) is empty in its meta, and its backward reads it. ember's
# values, sized by the meta, crashed oneDNN: graphs that keep the workspace, or read it, run on
# PyTorch.
_UNSIZED_RESULTS = {"aten.mkldnn_rnn_layer.default": lambda node: any(
                        u.target is operator.getitem and u.args[1] == 3 for u in node.users),
                    "aten.mkldnn_rnn_layer_backward.default": lambda node: True}


# DLPack through PyTorch's C functions: Tensor.__dlpack__ and torch.from_dlpack are Python
# wrappers whose checks cost more than the rest of a small call (and refuse tensors that require
# grad, which is AOTAutograd's business around this call, not ours).
to_dlpack = getattr(torch._C, "_to_dlpack", None) or (lambda t: t.detach().__dlpack__())
from_dlpack = getattr(torch._C, "_from_dlpack", None) or torch.from_dlpack
try:
    # PyTorch's allocation without its argument parser, which Inductor's generated code calls:
    # 0.3 us against torch.empty's 1.3 us, most of a small call's output (the steady call).
    from torch._C._dynamo.guards import _empty_strided_cpu
except ImportError:
    def _empty_strided_cpu(shape, strides, dtype):
        return torch.empty_strided(shape, strides, dtype=dtype, device="cpu")
try:
    # [Note: the torch bridge] (frontend/python/torch_bridge/torch_bridge.cpp): the steady call
    # in C++, reading PyTorch's tensors in place; without it, the steady call goes through DLPack.
    from ._torch_bridge import api as _TORCH_BRIDGE
except ImportError:
    _TORCH_BRIDGE = None


class LoweringFailed(RuntimeError):
    """A lowering raised something other than Unsupported, or built a result of another dtype
    or shape than PyTorch's: a bug in ember, raised under the `strict` option."""


class Context:
    """What a lowering works with: the graph, sizes as dims, and the node being lowered."""

    def __init__(self, graph, symbols, size_input):
        self.graph = graph
        self.symbols = symbols
        self.size_input = size_input  # (sympy expression, ember dtype) -> a 0-d input of its value
        self.target_name = ""
        self.node = None  # the FX node being lowered

    def unused_outputs(self):
        """The indices of the node's outputs that nothing reads (getitem users decide)."""
        used = {u.args[1] for u in self.node.users if u.target is operator.getitem}
        total = len(self.node.meta.get("val", ()))
        return {i for i in range(total) if i not in used}

    def op(self, name, inputs, attrs=None):
        outs = self.op_multi(name, inputs, attrs)
        if len(outs) != 1:
            raise Unsupported(f"{name} has {len(outs)} outputs")
        return outs[0]

    def op_multi(self, name, inputs, attrs=None):
        try:
            return list(self.graph.op(name, list(inputs), attrs or {}))
        except ValueError as e:
            # ember's dims cannot express a size (one not a polynomial of the symbols, a
            # divisibility or a bound it cannot prove): a limit of ember's, the lowering declines.
            if str(e).startswith("[symbolic]"):
                raise Unsupported(str(e)) from e
            raise

    def shape(self, sizes):
        """ember dims: ints and ember dim texts (an ember Value's shape) as they are, PyTorch's
        SymInts and sympy expressions converted."""
        return [s if isinstance(s, (int, str)) else self.symbols.dim(s) for s in sizes]

    def full(self, shape, value, dtype):
        return self.op("full", [], {"shape": self.shape(shape), "value": float(value), "dtype": dtype})

    def copy(self, x):
        # Values are immutable in ember; a copy that PyTorch may mutate is made at the output
        # if it would share memory with an input (see CompiledFx.__call__).
        return x


def _torch_output_limit():
    """EMBER_TORCH_OUTPUT_MAX_MB in bytes. glibc maps every block over 32 MiB afresh, so a
    PyTorch output of 512 MiB costs about 220 ms of page faults on each call here (three times
    the GELU that fills it); ember's allocator keeps such blocks for the next call."""
    text = os.environ.get("EMBER_TORCH_OUTPUT_MAX_MB", "")
    try:
        return int(min(float(text or 32), 2.0 ** 40) * (1 << 20))  # inf: every output
    except ValueError:
        warnings.warn(f"EMBER_TORCH_OUTPUT_MAX_MB={text} is not a number; using 32", RuntimeWarning)
        return 32 << 20


_TORCH_OUTPUT_MAX = _torch_output_limit()


def _values_in_memory(t):
    """`t` with the values it holds in its memory. A negative view (x._neg_view(), the imaginary
    part of a conjugate) holds -x through a flag that DLPack drops: ember read x. A zero tensor
    (torch._efficientzerotensor, from some gradients) has no memory at all."""
    if t.is_neg():
        return t.resolve_neg()
    if t._is_zerotensor():
        return torch.zeros(t.shape, dtype=t.dtype)
    return t


class _TorchStorages:
    """The memory of a plan's outputs, from PyTorch's allocator: its statistics and profiler
    see what the user holds, as they would in eager. Larger ones (None) come from ember's.
    A buffer that is exactly one output is made as that output's tensor, which the plan then
    returns as it is; the other buffers are bytes, kept by address, so that the outputs in them
    can be handed out on their storages (on_torch_storage)."""

    def __init__(self):
        self.buffers = {}  # data address -> the uint8 tensor there
        self.starts = None  # the addresses in order, once an output starts inside a buffer
        self.requests = []  # what the plan asked for

    def __call__(self, requests):
        self.requests += requests
        given = []
        for nbytes, exact in requests:
            if nbytes > _TORCH_OUTPUT_MAX:
                given.append(None)
            elif exact is not None:
                t = torch.empty(exact[1], dtype=torch_dtype_of(exact[0]), device="cpu")
                given.append((t, to_dlpack(t)))
            else:
                b = torch.empty(nbytes, dtype=torch.uint8, device="cpu")
                self.buffers[b.data_ptr()] = b
                given.append(to_dlpack(b))
        self.starts = None
        return given

    def on_torch_storage(self, t):
        """`t` (imported through DLPack, so its storage cannot be resized) as a tensor on the
        PyTorch storage it lies in: resize_, out= arguments that grow and
        untyped_storage().resize_(0) then work on it as on eager's outputs."""
        if t.numel() == 0:  # no memory to share: a fresh tensor of PyTorch's
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")
        p = t.data_ptr()
        b = self.buffers.get(p)  # an output at the start of its buffer: the common case
        if b is None and self.buffers:
            if self.starts is None:
                self.starts = sorted(self.buffers)
            i = bisect.bisect_right(self.starts, p) - 1
            candidate = self.buffers[self.starts[i]] if i >= 0 else None
            if candidate is not None and p < self.starts[i] + candidate.numel():
                b = candidate
        if b is None:
            return t
        return torch.empty(0, dtype=t.dtype, device="cpu").set_(b.untyped_storage(), (p - b.data_ptr()) // t.element_size(),
                                                                t.shape, t.stride())


def _contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


_ARG, _CONST, _SIZE = range(3)


class _SizeInput:
    """A graph input made at each call from its sizes: `make(args, values)`, the tensor; `dim`,
    its value as an ember dim of the graph's symbols when it is an integer polynomial of them
    (what the C++ steady call evaluates), else None."""

    def __init__(self, make, dim=None):
        self.make, self.dim = make, dim

    def __call__(self, args, values):
        return self.make(args, values)
_SOURCE_KINDS = {"arg": _ARG, "const": _CONST, "size": _SIZE}


def _meta_types(val):
    """The (dtype, shape) of each tensor in a node's meta value, None for other entries."""
    vals = val if isinstance(val, (list, tuple)) else [val]
    return [(v.dtype, list(v.shape)) if isinstance(v, torch.Tensor) else None for v in vals]


def _is_size(val):
    return isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool)


class CompiledFx:
    """The callable AOTAutograd gets back: runs the ember plan on the call's tensors. It takes
    them as one list (AOTAutograd's boxed convention), so it could free inputs early."""

    def __init__(self, gm, mode, options, fixed_sizes=None, visible_outputs=None):
        start = time.perf_counter()
        self.strict = strict = options.get("strict", False)
        # An instance attribute: the wrappers Dynamo puts around a backward compiler copy the
        # instance's __dict__ (functools.wraps), not its class's attributes.
        self._boxed_call = True
        self.graph = _C.Graph()
        self.symbols = Symbols(self.graph, fixed_sizes)
        self.env = {}
        self.inputs = []          # per ember input: ("arg", index), ("const", tensor) or ("size", fn)
        self.size_inputs = {}     # (sympy expression, ember dtype) -> its 0-d ember input
        self.torch_calls = []     # ids of this graph's torch calls
        self.torch_call_ops = {}  # ATen op -> count
        self.lowered_ops = {}
        self.failed_lowerings = {}  # ATen op -> the reasons its lowering failed (bugs), one per node
        self.torch_call_views = set()  # FX nodes of view ops that run as torch calls (copies)
        self.outputs = None       # per FX output: ("ember", k) / ("size", expr) / ("value", v)
        self.returned_inputs = []  # (k, i): ember output k is the call's tensor argument i itself
        self.placeholders = {}    # FX placeholder -> its index in the call's args
        cx = Context(self.graph, self.symbols, self._size_input)
        try:
            for node in gm.graph.nodes:
                self._translate(gm, node, cx)
            self.symbols.check_bound()
            self.compiled = _C.CompiledGraph(self.graph, mode, strict, options.get("autotune_budget_s"),
                                             options.get("autotune_search", ""), options.get("static_plan_mb"))
        except BaseException:
            _torch_calls.release(self.torch_calls)
            raise
        weakref.finalize(self, _torch_calls.release, list(self.torch_calls))
        self.translate_ms = (time.perf_counter() - start) * 1e3
        self.view_roots = _view_roots(gm)  # per ember output
        # Kept to run on PyTorch if a torch call's result turns out to have another size than
        # its meta (_fall_back_to_pytorch); None until then.
        self.gm, self.on_pytorch = gm, None
        # Where each output lives in eager: a view of an input, or of memory of its own (its
        # root), with eager's layout as functions of the sizes. The call puts outputs that ember
        # lays out otherwise back in eager's layout (see _eager_layout.as_eager).
        self.layouts = EagerLayouts(gm, self.symbols, self.view_roots)
        self.groups = {}
        for k, root in enumerate(self.view_roots):
            if not isinstance(root, tuple):
                self.groups.setdefault(root, []).append(k)
        self.groups = list(self.groups.values())
        # Outputs the caller sees; in a training forward graph the rest are saved for the
        # backward graph, which reads them through any strides: their layout is not rebuilt.
        visible = self.visible_tensors = _tensor_outputs_among(gm, visible_outputs)
        self.layout_matters = [any(k < visible for k in group) for group in self.groups]
        self.input_sources = [(_SOURCE_KINDS[kind], src) for kind, src in self.inputs]
        self.outputs_are_tensors = [o for o in self.outputs] == [("ember", k) for k in range(len(self.outputs))]
        # [Note: the steady call] Whether a call can make its outputs before the plan runs:
        # decided by the first call (None until then, False for no), then (shape, strides, dtype)
        # per buffer.
        self.steady = None if self._may_be_steady() else False
        self.fast = None  # the steady call in C++ ([Note: the torch bridge]), once settled
        self.kept_imports = [None] * len(self.input_sources)  # [Note: kept imports]

    # --- translation -------------------------------------------------------------------------

    def _translate(self, gm, node, cx):
        if node.op == "placeholder":
            self._placeholder(node)
        elif node.op == "get_attr":
            tensor = getattr(gm, node.target)
            if not isinstance(tensor, torch.Tensor):
                raise Unsupported(f"get_attr of {type(tensor).__name__}")
            # Compilers run under AOTAutograd's fake mode; this tensor is real.
            self.env[node] = self._add_input(("const", tensor), tensor)
        elif node.op == "call_function":
            self.env[node] = self._call(node, cx)
        elif node.op == "output":
            self._output(node)
        else:
            raise Unsupported(f"FX node kind {node.op}")

    def _placeholder(self, node):
        val = node.meta.get("val")
        index = len(self.placeholders)
        self.placeholders[node] = index
        if isinstance(val, torch.Tensor):
            for d, size in enumerate(val.shape):
                self.symbols.bind(size, ("size", index, d))
            self.env[node] = self._add_input(("arg", index), val)
        elif isinstance(val, torch.SymInt):
            self.symbols.bind(val, ("int", index))
            self.env[node] = val.node.expr
        elif isinstance(val, torch.SymFloat):  # a float of sizes saved for the backward
            self.env[node] = FloatSize(arg=index)
        elif val is None or isinstance(val, (int, float, bool)):
            self.env[node] = ("runtime", index)  # a plain value: read from the call
        else:
            raise Unsupported(f"an input of type {type(val).__name__}")

    def _add_input(self, source, tensor):
        if tensor.device.type != "cpu":
            raise Unsupported(f"tensors on {tensor.device}")
        if tensor.is_sparse or tensor.is_quantized or tensor.layout != torch.strided:
            raise Unsupported("tensors that are not dense and strided")
        self.inputs.append(source)
        return self.graph.input(ember_dtype(tensor.dtype), self.symbols.shape(tensor.shape))

    def _dim_or_none(self, size):
        """An integer size as an ember dim (the C++ steady call evaluates it), or None."""
        if isinstance(size, FloatSize):
            return None
        try:
            return self.symbols.dim(size)
        except (Unsupported, NonPolynomialSize):
            return None

    def _size_input(self, size, dtype):
        """A size's value (a sympy expression, or a FloatSize) as a 0-d tensor input, made at
        each call from the symbols' values or from the argument that holds it."""
        key = (size, dtype)
        if key not in self.size_inputs:
            torch_dtype = torch_dtype_of(dtype)
            if isinstance(size, FloatSize) and size.arg is not None:
                arg = size.arg
                make = _SizeInput(lambda args, values: torch.tensor(args[arg], dtype=torch_dtype))
            else:
                value_of = self.symbols.value_function(getattr(size, "expr", size))
                make = _SizeInput(lambda args, values: torch.tensor(value_of(values), dtype=torch_dtype),
                                  self._dim_or_none(size))
            self.inputs.append(("size", make))
            self.size_inputs[key] = self.graph.input(dtype, [])
        return self.size_inputs[key]

    def _arg(self, a):
        if isinstance(a, torch.fx.Node):
            v = self.env[a]
            if isinstance(v, tuple) and len(v) == 2 and v[0] == "runtime":
                raise Unsupported("an op on a plain input value")
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(x) for x in a)
        if isinstance(a, torch.SymInt):
            return a.node.expr
        return a

    def _call(self, node, cx):
        target = node.target
        val = node.meta.get("val")
        if target is operator.getitem:
            return self.env[node.args[0]][node.args[1]]
        if _is_size(val):  # a size computation: known as an expression of the symbols
            return val.node.expr if isinstance(val, torch.SymInt) else val
        if isinstance(val, (torch.SymFloat, float)) and not isinstance(target, torch._ops.OpOverload):
            return FloatSize(val.node.expr) if isinstance(val, torch.SymFloat) else val
        if not isinstance(target, torch._ops.OpOverload):
            raise Unsupported(f"call of {target}")
        name = str(target)
        if name.startswith(_STORAGE_OPS) and not (name.startswith("aten.as_strided")
                                                   and _owns_storage(node.args[0])):
            raise Unsupported(f"{name} reads its input's storage, which ember does not keep as eager does")
        if name in _UNSIZED_RESULTS and _UNSIZED_RESULTS[name](node):
            raise Unsupported(f"{name} reads or makes a result its meta does not size as the op does")
        lower = LOWERINGS.get(name)
        if lower is not None:
            out = self._lower(lower, name, node, cx, val)
            if out is not None:
                self.lowered_ops[name] = self.lowered_ops.get(name, 0) + 1
                return out
        return self._torch_call(node, target, val)

    def _lower(self, lower, name, node, cx, val):
        """The lowering's ember values for `node`, or None for a torch call. A lowering declines
        a case it does not cover by raising Unsupported. Anything else it raises, or a result
        of another dtype or shape than PyTorch's meta, is a bug in the lowering: under `strict`
        it is raised; otherwise the node runs as a torch call (still right), with a warning
        naming the op, and the report counts it."""
        cx.target_name, cx.node = name, node
        try:
            out = lower(cx, *self._arg(node.args), **{k: self._arg(v) for k, v in node.kwargs.items()})
        except Unsupported:
            return None
        except Exception as e:  # noqa: BLE001 (any other exception is a bug, reported below)
            return self._failed_lowering(name, f"{type(e).__name__}: {e}", e)
        mismatch = self._mismatch(out, val)
        if mismatch:
            return self._failed_lowering(name, mismatch, None)
        return out

    def _failed_lowering(self, name, reason, error):
        if self.strict:
            raise LoweringFailed(f"[{name}] the lowering failed: {reason}") from error
        warnings.warn(f"ember: the lowering of {name} failed ({reason}); it runs as a torch call", RuntimeWarning,
                      stacklevel=2)
        self.failed_lowerings.setdefault(name, []).append(reason)
        return None

    def _mismatch(self, out, val):
        """How the lowering's result differs from PyTorch's meta, or "" when it does not."""
        outs = out if isinstance(out, list) else [out]
        metas = _meta_types(val)
        if len(outs) != len(metas):
            return f"{len(outs)} results, PyTorch's meta has {len(metas)}"
        for k, (o, m) in enumerate(zip(outs, metas)):
            if m is None:
                continue
            dtype, shape = ember_dtype(m[0]), self.symbols.shape(m[1])
            if not isinstance(o, _C.Value):
                return f"result {k} is a {type(o).__name__}, PyTorch's meta says {dtype}{list(shape)}"
            if o.dtype != dtype or o.shape != shape:
                return f"result {k} is {o.dtype}{list(o.shape)}, PyTorch's meta says {dtype}{list(shape)}"
        return ""

    def _torch_call(self, node, target, val):
        tensors, layouts = [], []

        def template(a):
            if isinstance(a, torch.fx.Node):
                v = self.env[a]
                if isinstance(v, sympy.Expr) or isinstance(v, int):
                    return self._size_arg(v)
                if isinstance(v, tuple) and len(v) == 2 and v[0] == "runtime":
                    raise Unsupported("a torch call on a plain input value")
                if v is None:
                    return None
                if isinstance(v, FloatSize):
                    if v.arg is not None:  # a graph input's float, which the call cannot reach
                        raise Unsupported("a torch call with a SymFloat argument of the graph's")
                    # A float of sizes (a correction of x.shape[1] / 4): evaluated for each call.
                    return _torch_calls.FloatArg(self.symbols.value_function(v.expr))
                tensors.append(v)
                layouts.append(self._layout_of(a))
                return _torch_calls.TensorArg(len(tensors) - 1)
            if isinstance(a, (list, tuple)):
                return type(a)(template(x) for x in a)
            if isinstance(a, torch.SymInt):
                return self._size_arg(a.node.expr)
            if isinstance(a, (torch.SymFloat, torch.SymBool)):
                raise Unsupported(f"a {type(a).__name__} argument")
            return a

        # A sparse result (nn.Embedding(sparse=True)'s gradient) has no place in ember's dense
        # buffers: the graph runs on PyTorch, with a warning.
        vals = val if isinstance(val, (list, tuple)) else [val]
        sparse = [v.layout for v in vals if isinstance(v, torch.Tensor) and v.layout != torch.strided]
        if sparse:
            raise Unsupported(f"{target} returns a {sparse[0]} tensor")
        args = template(node.args)
        kwargs = {k: template(v) for k, v in node.kwargs.items()}
        metas = _meta_types(val)
        # Only the results something reads become outputs of the call: an unread one may have
        # another size in the real kernel than in its meta (_embedding_bag_forward_only's
        # offset2bag is empty in bfloat16 where the meta sizes it by the indices), and nothing
        # needs its memory.
        read = _read_results(node, len(metas))
        declared = [m is not None and i in read for i, m in enumerate(metas)]
        out_types = [(ember_dtype(m[0]), self.symbols.shape(m[1])) for m, d in zip(metas, declared) if d]
        for_effect = not target._schema.returns
        if not for_effect and not any(m is not None for m in metas):
            raise Unsupported(f"{target} returns no tensor")
        effect_only = not out_types
        if effect_only:
            # Nothing to hand back: an op run for its effect alone (a runtime assert, such as
            # one_hot's check of its indices: impure, so the plan keeps it), or one whose results
            # nothing reads. Its one output is an empty placeholder.
            out_types = [("bool", [0])]
        pure = not for_effect and torch.Tag.nondeterministic_seeded not in target.tags
        if target.is_view:
            self.torch_call_views.add(node)
        call = _torch_calls.Call(target, args, kwargs, self.symbols, layouts, effect_only, declared=declared)
        cid = _torch_calls.register(call)
        self.torch_calls.append(cid)
        outs = iter(self.graph.torch_call(cid, pure, tensors, out_types))
        self.torch_call_ops[str(target)] = self.torch_call_ops.get(str(target), 0) + 1
        if effect_only:
            return [None] * len(metas) if isinstance(val, (list, tuple)) else None
        values = [next(outs) if d else None for d in declared]
        return values if isinstance(val, (list, tuple)) else values[0]

    def _layout_of(self, node):
        """Eager's strides of a torch call's input: a tuple, a _torch_calls.Strides of this
        call's symbol values, or None when unknown (then the input keeps ember's layout)."""
        strides = _eager_strides(node)
        if strides is None or all(isinstance(s, int) for s in strides):
            return strides
        known = set(self.symbols.ids)
        if not all(s.free_symbols <= known for s in strides if not isinstance(s, int)):
            return None
        return _torch_calls.Strides([s if isinstance(s, int) else self.symbols.value_function(s) for s in strides])

    def _size_arg(self, expr):
        """A size argument of a torch call: each of its symbols must be bound by the inputs (an
        unbacked one, from .item(), is not: then the graph runs on PyTorch)."""
        if isinstance(expr, sympy.Expr):
            for symbol in expr.free_symbols:
                self.symbols.dim(symbol)
        return _torch_calls.SizeArg(expr)

    def _output(self, node):
        results = node.args[0]
        results = results if isinstance(results, (list, tuple)) else [results]
        for r in results:
            if isinstance(r, torch.fx.Node) and _through_views(r) & self.torch_call_views:
                raise Unsupported(f"output {r.name} is a view that runs on PyTorch: its aliasing would be lost")
        ember_outs, self.outputs = [], []
        for r in results:
            v = self.env[r] if isinstance(r, torch.fx.Node) else r
            if v is None or isinstance(v, (int, float, bool)) and not isinstance(r, torch.fx.Node):
                self.outputs.append(("value", v))
            elif isinstance(v, (sympy.Expr, int)):
                self.outputs.append(("size", v))
            elif isinstance(v, FloatSize) and v.arg is not None:
                self.outputs.append(("runtime", v.arg))
            elif isinstance(v, FloatSize):
                self.outputs.append(("float size", self.symbols.value_function(v.expr)))
            elif isinstance(v, tuple) and len(v) == 2 and v[0] == "runtime":
                self.outputs.append(("runtime", v[1]))
            else:
                if isinstance(r, torch.fx.Node) and r.op == "placeholder":
                    self.returned_inputs.append((len(ember_outs), self.placeholders[r]))
                self.outputs.append(("ember", len(ember_outs)))
                ember_outs.append(v)
        self.graph.set_outputs(ember_outs)

    # --- running -----------------------------------------------------------------------------

    def _may_share(self, k, share):
        """Whether eager's output k shares memory with what ember's shares it with: input `share`
        (>= 0) or output -2 - share, by their view roots."""
        if share >= 0:
            input_index = self.inputs[share][1] if self.inputs[share][0] == "arg" else None
            return self.view_roots[k] == ("input", input_index)
        return self.view_roots[k] == self.view_roots[-2 - share]

    def __call__(self, args):
        if self.on_pytorch is not None:
            return self.on_pytorch(args)
        try:
            fast = self.fast  # read once: a fall-back on another thread may clear it
            if fast is not None:
                tensors = fast(args)
                if tensors is not None:  # None: an input the C++ call does not read (a subclass, ...)
                    if self.outputs_are_tensors:
                        return tensors
                    return self._outputs(tensors, args, self.symbols.values(args) if self.symbols.sources else [])
            return self._run_steady(args) if self.steady else self._run(args)
        except _torch_calls.ResultMismatch as e:
            return self._fall_back_to_pytorch(args, e)
        except (ValueError, TypeError) as e:
            # An input of another shape than traced: a value from an earlier graph whose meta
            # was wrong (a forward graph that fell back hands its backward eager's offset2bag).
            if not str(e).startswith("[run] input "):
                raise
            return self._fall_back_to_pytorch(args, e)

    def _fall_back_to_pytorch(self, args, error):
        """Runs this call, and every later one, on PyTorch: what ember's plan was built on (the
        sizes PyTorch's meta gave) is not what the real kernels give. Eager has no such
        expectation, so the user's program must not fail here; strict asks for the error."""
        if self.strict:
            raise error
        self.steady, self.fast = False, None
        warnings.warn(f"ember: a compiled graph runs on PyTorch from now on: {error}", RuntimeWarning, stacklevel=2)
        from .dynamo import eager_fallback
        self.on_pytorch = eager_fallback(self.gm)
        return self.on_pytorch(args)

    # [Note: kept imports] A model's parameters are most of a call's inputs (50 of the 61 of
    # GPT-2's decode step), the same tensors at every call, and each one's DLPack export and
    # import cost more than the rest of its share of the call. The Array imported from a
    # parameter, or from a constant of the graph, is kept and passed again while the same tensor
    # comes back with the same memory, shape and strides; values changed in place (an optimizer
    # step) are read from that memory as they are. Other tensors are imported afresh at each
    # call, so that ember holds none of the caller's memory past a call.
    def _input(self, k, t):
        kept = self.kept_imports[k]
        if (kept is not None and kept[0] is t and kept[1] == t.data_ptr() and kept[2] == t.shape
                and kept[3] == t.stride()):
            return kept[4]
        values = _values_in_memory(t)
        capsule = to_dlpack(values)
        if values is not t or not (type(t) is torch.nn.Parameter or self.input_sources[k][0] == _CONST):
            return capsule  # a copy (resolved negation, zeros) is not what later calls will hold
        array = _C.from_dlpack(capsule)
        self.kept_imports[k] = (t, t.data_ptr(), t.shape, t.stride(), array)
        return array

    def _inputs(self, args, values):
        """The plan's inputs, in one frame: a plain tensor argument (most of them) is exported as
        it is, parameters and constants go through _input, sizes are made from the call."""
        out = []
        for k, (kind, src) in enumerate(self.input_sources):
            if kind == _SIZE:
                out.append(to_dlpack(src(args, values)))
                continue
            t = args[src] if kind == _ARG else src
            if kind == _ARG and type(t) is torch.Tensor and not t.is_neg() and not t._is_zerotensor():
                out.append(to_dlpack(t))
            else:
                out.append(self._input(k, t))
        return out

    def _may_be_steady(self):
        """What a steady call needs of the graph: nothing that runs Python inside the plan (torch
        calls), and inputs made from sizes only where ember can evaluate them (a polynomial of the
        symbols). The Python one also needs sizes that never change and no input made from sizes."""
        return not self.torch_calls and all(kind != _SIZE or src.dim is not None for kind, src in self.input_sources)

    def _settle(self, storages, capsules, tensors, shares):
        """After the first call: the steady call when every output but the inputs returned as
        they are was exactly one buffer that PyTorch made, shared nothing, and went back as it
        was (eager's layout). Over symbolic sizes only the C++ one, and only where eager's
        outputs are contiguous at every size: it declines the calls whose sizes make an output
        buffer hold more than one output."""
        returned = {k for k, _ in self.returned_inputs}
        made = [k for k in range(len(capsules)) if k not in returned]
        exact = [e for _, e in storages.requests]
        self.steady = False
        if not (len(exact) == len(made) and all(e is not None for e in exact)
                and all(nbytes <= _TORCH_OUTPUT_MAX for nbytes, _ in storages.requests)
                and all(shares[k] == -1 and tensors[k] is capsules[k] for k in made)):  # the tensors PyTorch made
            return
        if not self.symbols.sources and all(kind != _SIZE for kind, _ in self.input_sources):
            self.steady = [(tuple(shape), _contiguous_strides(shape), torch_dtype_of(dtype)) for dtype, shape in exact]
        elif not all(contiguous_at_every_size(v) for v in output_tensor_vals(self.gm)):
            return
        if _TORCH_BRIDGE is not None:
            # Argument indices, constants, and sizes as ("size", dim).
            sources = [("size", src.dim) if kind == _SIZE else src for kind, src in self.input_sources]
            symbols = [(src[1], src[2] if src[0] == "size" else -1)
                       for _, src in sorted(self.symbols.sources.items())]
            self.fast = self.compiled.steady_call(_TORCH_BRIDGE, sources, symbols, self.returned_inputs,
                                                  min(_TORCH_OUTPUT_MAX, 2 ** 62))

    def _run_steady(self, args):
        """[Note: the steady call] The outputs made by PyTorch before the plan runs, handed to it
        as a list: no call back into Python during the plan, nothing to rebuild after it. Per
        call, this is the only frame of ember's besides __call__ and _inputs: in a
        compiled call, each frame of Python is a microsecond or more (issue 26's tiny graph).
        With the torch bridge, the same call is made in C++ (self.fast, _C.SteadyCall), and
        this one serves the inputs it declines."""
        made = [(t, to_dlpack(t)) for t in
                [_empty_strided_cpu(shape, strides, dtype) for shape, strides, dtype in self.steady]]
        tensors = self.compiled.run_given(self._inputs(args, []), made)
        for k, i in self.returned_inputs:
            tensors[k] = args[i]
        return tensors if self.outputs_are_tensors else self._outputs(tensors, args, [])

    def _run(self, args):
        if self.steady:
            return self._run_steady(args)
        values = self.symbols.values(args) if self.symbols.sources else []
        inputs = self._inputs(args, values)
        storages = _TorchStorages()
        if self.torch_calls:
            with _torch_calls.symbol_values(values):
                capsules, shares = self.compiled.run(inputs, values, storages)
        else:
            capsules, shares = self.compiled.run(inputs, values, storages)
        tensors = [c if isinstance(c, torch.Tensor) else from_dlpack(c) for c in capsules]
        # Outputs are PyTorch's memory, fresh each call, in every mode: a static plan keeps only
        # the buffers that hold no output ([Note: outputs the caller makes] in runtime/executable.h).
        # Values saved for a backward graph stay as they are.
        for k in range(self.visible_tensors):
            if tensors[k] is not capsules[k]:  # not already a tensor of PyTorch's own
                tensors[k] = storages.on_torch_storage(tensors[k])
        # Shared memory where eager's results do not share it: a copy, as PyTorch may mutate one
        # of them (a clone of an input, two equal values that CSE merged).
        shared = shares.count(-1) != len(shares)  # rare: most outputs are memory of their own
        unshare = {k for k, share in enumerate(shares) if share != -1 and not self._may_share(k, share)} if shared else ()
        for group, layout_matters in zip(self.groups, self.layout_matters):
            as_eager(tensors, group, unshare, self.layouts, values, layout_matters)
        for k in unshare:  # views of inputs in eager, sharing something else in ember
            if isinstance(self.view_roots[k], tuple):
                tensors[k] = tensors[k].clone()
        if shared:
            for k, share in enumerate(shares):
                if share >= 0 and k not in unshare and self.inputs[share][0] == "arg":
                    tensors[k] = as_view_of(args[self.inputs[share][1]], tensors[k])
        # An input returned as it is: the caller's tensor object, as in eager. AOTAutograd links
        # the autograd history of saved inputs by identity; a new tensor over the same memory
        # has none, and a double backward through it found no path to the input (None).
        for k, i in self.returned_inputs:
            tensors[k] = args[i]
        if self.steady is None:
            self._settle(storages, capsules, tensors, shares)
        if self.outputs_are_tensors:  # the common case: the graph's outputs are its tensors, in order
            return tensors
        return self._outputs(tensors, args, values)

    def _outputs(self, tensors, args, values):
        """The FX graph's outputs: its tensors, sizes, and values passed through."""
        out = []
        for kind, v in self.outputs:
            if kind == "ember":
                out.append(tensors[v])
            elif kind == "size":
                out.append(self.symbols.evaluate(v, values))
            elif kind == "float size":
                out.append(v(values))
            elif kind == "runtime":
                out.append(args[v])
            else:
                out.append(v)
        return out


class SizeSpecialized:
    """A graph with sizes that ember dims cannot hold (NonPolynomialSize), compiled for each set
    of input sizes it meets: the same graph, its sizes evaluated, kernels shared through the
    kernel cache. Dynamo sees one graph; ember keeps one plan per size."""

    def __init__(self, gm, mode, options, visible_outputs=None):
        self._boxed_call = True
        self.gm, self.mode, self.options, self.visible_outputs = gm, mode, options, visible_outputs
        self.strict = options.get("strict", False)
        self.sources = input_size_symbols(gm)
        if any(hint is None for _, _, hint in self.sources):
            raise Unsupported("a size symbol without an example value")
        self.plans = {}
        first = self._plan(tuple(hint for _, _, hint in self.sources))
        # What the report reads, from the first plan.
        self.lowered_ops, self.torch_call_ops = first.lowered_ops, first.torch_call_ops
        self.failed_lowerings = first.failed_lowerings
        self.compiled, self.translate_ms = first.compiled, first.translate_ms

    def _plan(self, key):
        plan = self.plans.get(key)
        if plan is None:
            fixed = {symbol: value for (symbol, _, _), value in zip(self.sources, key)}
            try:
                plan = CompiledFx(self.gm, self.mode, self.options, fixed, self.visible_outputs)
            except Exception as e:
                if self.strict or not self.plans:  # the first plan's failure is the compile's
                    raise
                warnings.warn(f"ember: compiling a graph for sizes {key} failed; at those sizes it runs on "
                              f"PyTorch instead ({type(e).__name__}: {e})", RuntimeWarning, stacklevel=3)
                from .dynamo import eager_fallback
                plan = eager_fallback(self.gm)
            self.plans[key] = plan
        return plan

    def __call__(self, args):
        key = tuple(args[src[1]].shape[src[2]] if src[0] == "size" else int(args[src[1]])
                    for _, src, _ in self.sources)
        return self._plan(key)(args)


def compile_fx(gm, mode, options, visible_outputs=None):
    """gm as ember plans: one over symbolic sizes, or one per set of sizes when they are not
    polynomials of the inputs'. `visible_outputs`: how many of gm's outputs the caller sees (a
    training forward graph's; the rest are saved for the backward graph), None for all. `options`:
    the backend's (dynamo.OPTIONS)."""
    try:
        return CompiledFx(gm, mode, options, visible_outputs=visible_outputs)
    except NonPolynomialSize:
        return SizeSpecialized(gm, mode, options, visible_outputs)


def _tensor_outputs_among(gm, count):
    """How many tensor outputs are among gm's first `count` outputs (None: all of them)."""
    out = [n for n in gm.graph.nodes if n.op == "output"][0]
    results = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
    results = results if count is None else results[:count]
    return sum(1 for r in results if isinstance(r, torch.fx.Node) and is_tensor_node(r))


def _owns_storage(node):
    """Whether eager's storage of this value is exactly its elements: made inside the graph (a
    graph input may be a view into more memory), at offset 0, dense."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) and node.op == "call_function" else None
    if not isinstance(val, torch.Tensor) or _eager_strides(node) is None:
        return False
    numel = math.prod(sized(s)[0] for s in val.shape)
    nbytes = sized(val.untyped_storage().nbytes())[0]
    return sized(val.storage_offset())[0] == 0 and sympy.expand(nbytes - numel * val.element_size()) == 0


def _eager_strides(node):
    """The strides PyTorch gives this value (ints, or sympy expressions of the symbols) when they
    describe a dense layout without overlap (so that a copy can have them); else None."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    strides = val.stride()
    if all(isinstance(s, int) for s in strides) and all(isinstance(s, int) for s in val.shape):
        return tuple(strides) if torch._prims_common.is_non_overlapping_and_dense_or_false(val) else None
    sizes, strides = [sized(s) for s in val.shape], [sized(s) for s in strides]
    if dense_order(sizes, strides, math.prod(s[0] for s in sizes)) is None:
        return None
    return tuple(s[0] for s in strides)


def _is_view_node(node):
    """A view op's node, or an element of one's result (split's parts are views too)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return isinstance(node.args[0], torch.fx.Node) and _is_view_node(node.args[0])
    return (isinstance(node.target, torch._ops.OpOverload) and node.target.is_view and bool(node.args)
            and isinstance(node.args[0], torch.fx.Node))


def _through_views(node):
    """The nodes on the chain of views that ends at `node` (itself included)."""
    chain = {node}
    while _is_view_node(node):
        node = node.args[0]
        chain.add(node)
    return chain


def _view_roots(gm):
    """Per output of the graph: the value it is a view of in eager, following view ops back to a
    placeholder (by its input index) or to the node that made fresh memory."""
    root, placeholders = {}, 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            root[node] = ("input", placeholders)
            placeholders += 1
        elif _is_view_node(node):
            root[node] = root.get(node.args[0], node.args[0])
        else:
            root[node] = node
        if node.op == "output":
            results = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
            return [root.get(r) for r in results if isinstance(r, torch.fx.Node) and is_tensor_node(r)]
    return []


def _read_results(node, count):
    """The indices of a node's results that the graph reads: all of them for a node that is its
    own value (one result, or a user that is not a getitem), else those its getitems take."""
    if any(u.target is not operator.getitem for u in node.users):
        return set(range(count))
    return {u.args[1] for u in node.users}
